"""The incident page's timeline shows what changed: the changes triage read, grouped as it
groups them, as rows of the Timeline table among the alert's transitions (oldest first) and
as rules on the incident's latency chart; an incident whose triage fails still renders."""

from __future__ import annotations

import math

import pandas as pd

from alerts import Alert, AlertState, MemoryAlertState, Transition
from alerts.rules import builtin_rule_set
from collectors.store.change_records import ChangeEvent, ChangeKind
from collectors.store.fake import FakeMetricsReader, FakeRequestReader
from collectors.store.fake_changes import MemoryChanges
from console.incidents.charts import change_frame, incident_chart, span_frame
from console.incidents.frames import incident_detail, timeline_frame

NOW = 1_800_000_000.0
COUNTER = "tailwatch:knob_changes_total"


def _incident_store() -> tuple[MemoryAlertState, MemoryChanges]:
    alert = Alert.pending({"alertname": "queue-growth", "severity": "page"}, NOW - 300)
    fired = alert.fire(NOW - 240, value=12.0)
    state = MemoryAlertState()
    state.save_evaluation(
        [alert],
        [Transition(NOW - 300, alert.fingerprint, AlertState.INACTIVE, AlertState.PENDING, alert)],
    )
    state.save_evaluation(
        [fired],
        [Transition(NOW - 240, alert.fingerprint, AlertState.PENDING, AlertState.FIRING, fired)],
    )
    changes = MemoryChanges(
        [
            ChangeEvent(NOW - 310, t, ChangeKind.KNOB, "max_num_seqs", "16", "1", COUNTER)
            for t in ("replica-0", "replica-1")
        ]
        + [ChangeEvent(NOW - 5 * 86400, "replica-0", ChangeKind.TARGET, "added", source="s")]
    )  # fmt: skip
    return state, changes


def _detail():
    state, changes = _incident_store()
    (incident,) = state.incidents()
    rules = builtin_rule_set()[0].rules
    return incident_detail(
        state, FakeMetricsReader(), FakeRequestReader(), incident.id, rules, 1.0, NOW, changes
    )


def test_the_timeline_lists_the_changes_among_the_alerts_transitions() -> None:
    detail = _detail()
    assert detail.report is not None
    frame = timeline_frame(detail.transitions, detail.changes)
    assert list(frame.columns) == ["at", "event", "what", "value"]
    rows = [(r.at, r.event, r.what) for r in frame.itertuples()]
    ts = lambda t: pd.Timestamp(t, unit="s", tz="UTC")  # noqa: E731
    assert rows == [
        (ts(NOW - 310), "change", "max_num_seqs 16 → 1 on replica-0, -1"),
        (ts(NOW - 300), "alert", "inactive → pending"),
        (ts(NOW - 240), "alert", "pending → firing"),
    ]
    assert math.isnan(frame["value"][0]) and frame["value"][2] == 12.0


def test_the_chart_draws_a_rule_at_each_change() -> None:
    detail = _detail()
    frame = pd.DataFrame(
        {"ts": [pd.Timestamp(NOW - 400, unit="s", tz="UTC")], "percentile": ["p99"],
         "seconds": [0.2], "lower_seconds": [0.1], "upper_seconds": [0.25]}
    )  # fmt: skip
    start = pd.Timestamp(detail.baseline.start_seconds, unit="s", tz="UTC")
    end = pd.Timestamp(detail.window.end_seconds, unit="s", tz="UTC")
    changes = change_frame(detail.changes)
    spec = incident_chart(frame, span_frame(detail), start, end, changes).to_dict()
    rules = [layer for layer in spec["layer"] if layer.get("mark", {}).get("type") == "rule"]
    texts = [row["change"] for rows in spec["datasets"].values() for row in rows if "change" in row]
    assert rules and texts == ["max_num_seqs 16 → 1 on replica-0, -1"]
    without = incident_chart(frame, span_frame(detail), start, end).to_dict()
    assert len(without["layer"]) == len(spec["layer"]) - 1
