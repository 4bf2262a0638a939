"""Change events grouped for a reader: a drill's two knobs patched on three replicas are one
line ("max_num_seqs 32 → 4, step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC"),
not six, in the evidence, the CLI's recommendation and the console's verdict and annotations;
targets and the traffic mix read as what happened to them."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alerts import MemoryAlertState
from alerts.triage import group_changes, render_text, short_targets, triage
from alerts.triage.evidence import EvidenceKey
from collectors.store.change_records import ChangeEvent, ChangeKind
from collectors.store.fake_changes import MemoryChanges
from tests.alerts import triage_cases as tc

AT = 1796530292.0  # 2026-12-05 04:11:32 UTC
REPLICAS = ("replica-0", "replica-1", "replica-2")
COUNTER = "tailwatch:knob_changes_total"


def knob(target: str, name: str, at: float, before: str = "", after: str = "") -> ChangeEvent:
    return ChangeEvent(at, target, ChangeKind.KNOB, name, before, after, COUNTER)


def drill_changes(at: float = AT) -> tuple[ChangeEvent, ...]:
    """Two knobs patched on three replicas, each first seen by its own scrape."""
    return tuple(
        e
        for i, target in enumerate(REPLICAS)
        for e in (
            knob(target, "max_num_seqs", at + 0.1 * i, "32", "4"),
            knob(target, "step_delay_seconds", at + 0.1 * i),
        )
    )


def test_a_drill_on_three_replicas_is_one_group() -> None:
    (group,) = group_changes(drill_changes())
    assert group.describe() == (
        "max_num_seqs 32 → 4, step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC"
    )
    assert group.num_changes == 6
    assert group.subjects == ("max_num_seqs", "step_delay_seconds")


def test_distinct_times_values_and_kinds_are_separate_lines() -> None:
    later = AT + 120.0
    changes = (
        *drill_changes(),
        knob("replica-1", "max_num_seqs", later, "4", "8"),
        knob("replica-2", "max_num_seqs", later, "4", "16"),
        ChangeEvent(later + 1.0, "replica-3", ChangeKind.TARGET, "added", source="scrapes"),
        ChangeEvent(later + 1.0, "replica-4", ChangeKind.TARGET, "added", source="scrapes"),
        ChangeEvent(later + 2.0, "", ChangeKind.TRAFFIC, "batch", "0.000", "0.210", "tenant"),
        ChangeEvent(later + 2.0, "", ChangeKind.TRAFFIC, "chat", "1.000", "0.790", "tenant"),
    )
    assert [g.describe() for g in group_changes(changes)] == [
        "max_num_seqs 32 → 4, step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC",
        "max_num_seqs 4 → 16 changed on replica-2 at 04:13:32 UTC",
        "max_num_seqs 4 → 8 changed on replica-1 at 04:13:32 UTC",
        "replica-3, -4 added at 04:13:33 UTC",
        "traffic mix: tenant batch 0% → 21% of requests, tenant chat 100% → 79% of requests "
        "at 04:13:34 UTC",
    ]


def test_a_group_spread_over_seconds_says_between() -> None:
    changes = [knob(t, "max_num_seqs", AT + 5.0 * i) for i, t in enumerate(REPLICAS)]
    (group,) = group_changes(changes)
    assert group.when() == "between 04:11:32 and 04:11:42 UTC"


@pytest.mark.parametrize(
    ("targets", "text"),
    [
        (["replica-0", "replica-1", "replica-2"], "replica-0, -1, -2"),
        (["127.0.0.1:8000", "127.0.0.1:8001"], "127.0.0.1:8000, :8001"),
        (["r0", "r1"], "r0, r1"),
        (["a", "b"], "a, b"),
        (["replica-1", "replica-10"], "replica-1, -10"),
        (["only"], "only"),
        (["x-", "x-1"], "x-, x-1"),
    ],
)
def test_short_targets_writes_the_shared_stem_once(targets, text) -> None:
    assert short_targets(targets) == text


def test_replicas_are_in_natural_order() -> None:
    changes = [knob(f"replica-{i}", "max_num_seqs", AT) for i in (10, 2, 1)]
    (group,) = group_changes(changes)
    assert group.targets == ("replica-1", "replica-2", "replica-10")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["r-0", "r-1", "r-2", "x", ""]),
            st.sampled_from(["a", "b", "c"]),
            st.sampled_from(list(ChangeKind)),
            st.floats(0, 100),
        ),
        unique_by=lambda t: (t[0], t[1], t[2]),
    ),
    st.randoms(),
)
def test_every_change_is_in_exactly_one_group_whatever_the_order(items, rnd) -> None:
    changes = [ChangeEvent(AT + at, t, kind, k) for t, k, kind, at in items]
    groups = group_changes(changes)
    shuffled = list(changes)
    rnd.shuffle(shuffled)
    assert group_changes(shuffled) == groups
    assert sorted(e.key for g in groups for e in g.events) == sorted(e.key for e in changes)
    assert sum(g.num_changes for g in groups) == len(changes)


def test_the_evidence_and_the_recommendation_show_one_line_per_group() -> None:
    # NOTE: well before the onset: a row, but not a hypothesis, and no recent change
    report = triage(replace(tc.overload(), changes=drill_changes(tc.INCIDENT.start_seconds - 500)))
    (row,) = [r for r in report.evidence if r.key is EvidenceKey.CHANGE]
    assert (row.what, row.scope, row.incident) == (
        "change: max_num_seqs 32 → 4, step_delay_seconds",
        "replica-0, -1, -2",
        6.0,
    )
    assert all(h.change is None for h in report.hypotheses)
    lined_up = triage(replace(tc.overload(), changes=drill_changes(tc.INCIDENT.start_seconds - 5)))
    text = render_text(lined_up, width=220)
    lines = [line for line in text.splitlines() if "recent change" in line]
    # NOTE: lined up, but the arrivals' rise explains the queue: context, with its score
    assert lines == [
        "  recent change: max_num_seqs 32 → 4, step_delay_seconds changed on replica-0, -1, -2 "
        "at 08:09:55 UTC (score 0.00)"
    ]


def test_the_charts_annotate_one_mark_per_group() -> None:
    from console.incidents.frames import CHANGE, annotation_frame

    changes = MemoryChanges(drill_changes())
    frame = annotation_frame(MemoryAlertState(), changes, AT - 60.0, AT + 60.0)
    marks = frame[frame["state"] == CHANGE]
    assert list(marks["alert"]) == ["max_num_seqs 32 → 4, step_delay_seconds on replica-0, -1, -2"]
    assert annotation_frame(MemoryAlertState(), None, AT - 60.0, AT + 60.0).empty
