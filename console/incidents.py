"""Incidents as the console shows them, from the evaluator's alert state
(:class:`alerts.state.AlertStateStore`): one incident per alert fingerprint (its latest saved
version), its transitions, and its triage (``alerts.gather`` + ``alerts.triage``) over the
alert's window against the baseline before it, exactly as ``tailwatch incident show`` reads it.

NOTE: the incident's id in the URL is the alert's fingerprint today; when the store keeps
incident records with ids of their own, only this module changes.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from alerts.gather import gather, knob_changes
from alerts.model import Alert, AlertState
from alerts.state import AlertStateStore, Transition
from alerts.triage import TriageReport, triage
from alerts.triage_data import TimeWindow
from collectors.replica_targets import replica_targets
from collectors.store.protocols import MetricsReader, RequestReader

#: An incident id in the URL: an alert fingerprint (16 hex digits).
INCIDENT_ID = re.compile(r"[0-9a-f]{16}")
# The same windows as ``tailwatch incident show`` (tailwatch/incident_cli.py).
MIN_INCIDENT_SECONDS = 60.0
MIN_BASELINE_SECONDS = 600.0
INCIDENT_COLUMNS = [
    "id", "alert", "state", "severity", "started", "ended", "duration_s", "labels", "summary",
]  # fmt: skip


def _latest(alert: Alert) -> float:
    times = (alert.active_at_seconds, alert.started_at_seconds, alert.ended_at_seconds)
    return max((t for t in times if t is not None), default=-math.inf)


def incident_versions(state: AlertStateStore, start: float, end: float) -> dict[str, Alert]:
    """The latest saved version of every alert active now or changed in ``[start, end]``,
    by fingerprint."""
    versions: dict[str, Alert] = {a.fingerprint: a for a in state.active_alerts()}
    for transition in state.history(start, end):
        current = versions.get(transition.fingerprint)
        if current is None or _latest(transition.alert) > _latest(current):
            versions[transition.fingerprint] = transition.alert
    return versions


def incident_window(alert: Alert, now: float) -> tuple[TimeWindow, TimeWindow]:
    """(incident, baseline): from when the condition first held to when it resolved (or
    now), at least a minute; the baseline just before it, as long, at least 10 minutes."""
    start = alert.active_at_seconds if alert.active_at_seconds is not None else now
    end = alert.ended_at_seconds if alert.ended_at_seconds is not None else now
    end = max(end, start + MIN_INCIDENT_SECONDS)
    length = max(end - start, MIN_BASELINE_SECONDS)
    return TimeWindow(start, end), TimeWindow(start - length, start)


def incident_frame(versions: dict[str, Alert], now: float) -> pd.DataFrame:
    """One row per incident (pending ones left out: they have not fired), firing first, then
    the most recent; strings as stored."""
    rows = []
    for fingerprint, alert in versions.items():
        if alert.state not in (AlertState.FIRING, AlertState.RESOLVED):
            continue
        started = alert.started_at_seconds or alert.active_at_seconds or now
        ended = alert.ended_at_seconds
        labels = ", ".join(
            f"{k}={v}"
            for k, v in sorted(alert.labels.items())
            if k not in ("alertname", "severity")
        )
        rows.append(
            (
                fingerprint,
                alert.name,
                alert.state.value,
                alert.labels.get("severity", ""),
                pd.Timestamp(started, unit="s", tz="UTC"),
                None if ended is None else pd.Timestamp(ended, unit="s", tz="UTC"),
                round((ended if ended is not None else now) - started, 1),
                labels,
                alert.annotations.get("summary", ""),
            )
        )
    frame = pd.DataFrame(rows, columns=INCIDENT_COLUMNS)
    if frame.empty:
        return frame
    frame["_firing"] = frame["state"] == AlertState.FIRING.value
    frame = frame.sort_values(["_firing", "started"], ascending=[False, False])
    return frame.drop(columns="_firing").reset_index(drop=True)


def transitions_of(state: AlertStateStore, fingerprint: str, now: float) -> list[Transition]:
    """Every stored transition of one alert, oldest first."""
    return [t for t in state.history(0.0, now) if t.fingerprint == fingerprint]


#: The annotation kind of a live knob change (beside the alert states firing and resolved).
KNOB_CHANGE = "knob change"


def annotation_frame(
    state: AlertStateStore, metrics: MetricsReader, start: float, end: float
) -> pd.DataFrame:
    """``ts, alert, state``: the alerts' firing and resolved transitions and the live knob
    changes (``alerts.gather.knob_changes``, first seen at) in ``[start, end]``: the
    annotations on every time chart."""
    rows = [
        (pd.Timestamp(t.at_seconds, unit="s", tz="UTC"), t.alert.name, t.to_state.value)
        for t in state.history(start, end)
        if t.to_state in (AlertState.FIRING, AlertState.RESOLVED)
    ]
    rows += [
        (pd.Timestamp(k.at_seconds, unit="s", tz="UTC"), f"{k.knob} on {k.target}", KNOB_CHANGE)
        for k in knob_changes(metrics, start, end)
        if k.at_seconds is not None
    ]
    return pd.DataFrame(rows, columns=["ts", "alert", "state"])


@dataclass(frozen=True)
class IncidentDetail:
    alert: Alert
    incident: TimeWindow
    baseline: TimeWindow
    transitions: tuple[Transition, ...]
    report: TriageReport | None
    error: str = ""


def incident_detail(
    state: AlertStateStore,
    metrics: MetricsReader,
    requests: RequestReader,
    fingerprint: str,
    now: float,
) -> IncidentDetail | None:
    """The incident ``fingerprint`` with its triage; ``None`` when no alert has it. A store
    that cannot answer the triage gives ``report=None`` and the one-line ``error``."""
    alert = incident_versions(state, 0.0, now).get(fingerprint)
    if alert is None:
        return None
    incident, baseline = incident_window(alert, now)
    transitions = tuple(transitions_of(state, fingerprint, now))
    join = replica_targets(metrics)
    mapping = {r: next(iter(ts)) for r, ts in join.targets_by_replica.items() if len(ts) == 1}
    try:
        report = triage(gather(metrics, requests, incident, baseline, replica_targets=mapping))
    except Exception as error:  # NOTE: what the store cannot answer is shown, not raised
        text = str(error).strip().splitlines()
        return IncidentDetail(
            alert, incident, baseline, transitions, None, text[0] if text else type(error).__name__
        )
    return IncidentDetail(alert, incident, baseline, transitions, report)


def silence_for(alert: Alert, hours: float, author: str, comment: str, now: float):
    """A silence matching exactly this alert's labels for ``hours`` from now
    (``alerts.silences.Silence.create`` validates it; raises ``AlertsError`` naming the
    field)."""
    from alerts.matchers import Matcher, MatchType
    from alerts.silences import Silence

    matchers = [Matcher(k, MatchType.EQUAL, v) for k, v in sorted(alert.labels.items())]
    return Silence.create(matchers, now, now + hours * 3600.0, author, comment, now)


def check_token(given: str, expected: str | None) -> bool:
    """The admin token matches (constant time); no token configured: never."""
    import hmac

    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())  # type: ignore[union-attr]
