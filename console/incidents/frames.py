"""Incidents as the console shows them, from the stored incident records
(:mod:`alerts.incidents`, ``AlertStateStore.incident(id)`` and ``incidents(...)``): the list,
the ``?id=`` of the URL read as untrusted input, and one incident's detail: its transitions
and its triage over the same windows as ``tailwatch incident show`` (``alerts.triage.windows``
with the configured rules, then ``alerts.triage.gather`` + ``alerts.triage.rank``), so the console and
the CLI agree.

NOTE: an old link's ``?id=<fingerprint>`` (16 hex digits, before incidents had ids) opens
that alert's latest incident.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pandas as pd

from alerts import (
    ALERTNAME,
    SEVERITY,
    Alert,
    AlertState,
    AlertStateStore,
    Incident,
    Transition,
    opener_of,
)
from alerts.rules import Rule
from alerts.triage import (
    ChangeGroup,
    TimeWindow,
    TriageReport,
    alert_triage_windows,
    gather,
    group_changes,
    short_targets,
    triage,
)
from alerts.views import IncidentIdError, parse_incident_id
from collectors.replica_targets import replica_targets
from collectors.store.protocols import ChangeReader, MetricsReader, RequestReader

#: An alert fingerprint, the incident id of links made before incidents had ids.
FINGERPRINT = re.compile(r"[0-9a-f]{16}")
#: The most incidents the list shows (open ones first).
LIST_LIMIT = 200
#: The most incidents searched for a fingerprint's latest.
FINGERPRINT_SEARCH_LIMIT = 10_000
INCIDENT_COLUMNS = [
    "id", "state", "alert", "severity", "labels", "cause", "part_of", "pending_since",
    "started", "resolved", "duration_s", "acknowledged_by", "summary",
]  # fmt: skip


def labels_text(alert: Alert) -> str:
    """The alert's labels but its name and severity (shown in their own columns)."""
    return ", ".join(
        f"{k}={v}" for k, v in sorted(alert.labels.items()) if k not in (ALERTNAME, SEVERITY)
    )


def _ts(seconds: float | None) -> pd.Timestamp | None:
    return None if seconds is None else pd.Timestamp(seconds, unit="s", tz="UTC")


def listed_incidents(state: AlertStateStore, start: float, end: float) -> list[Incident]:
    """Open incidents, then those resolved in ``[start, end]`` (open first, newest first),
    leaving out those that began firing after ``end`` (a view pinned to the past)."""
    return [
        i
        for i in state.incidents(since_seconds=start, limit=LIST_LIMIT)
        if i.started_at_seconds <= end
    ]


def duration_seconds(incident: Incident, now: float) -> float:
    """From firing to resolved, or to ``now`` while open."""
    end = incident.resolved_at_seconds
    return (now if end is None else end) - incident.started_at_seconds


def incident_frame(incidents: Iterable[Incident], now: float) -> pd.DataFrame:
    """One row per incident in the given order (strings as stored); ``cause`` is triage's
    when it fired, ``part_of`` the incident a symptom joined (one cause, one incident)."""
    listed = list(incidents)

    def part_of(incident: Incident) -> str:
        opener = opener_of(incident, listed)
        return "" if opener is None else f"#{opener.id}"

    rows = [
        (
            i.id,
            i.state,
            i.alertname,
            i.severity,
            labels_text(i.alert),
            i.cause,
            part_of(i),
            _ts(i.pending_since_seconds),
            _ts(i.started_at_seconds),
            _ts(i.resolved_at_seconds),
            round(duration_seconds(i, now), 1),
            "" if i.ack is None else i.ack.by,
            i.summary,
        )
        for i in listed
    ]
    return pd.DataFrame(rows, columns=INCIDENT_COLUMNS)


@dataclass(frozen=True)
class IncidentRef:
    """What ``?id=`` asks for: an incident id, an alert fingerprint (an old link), or
    nothing (``problem`` says why the text is neither)."""

    incident_id: int | None = None
    fingerprint: str | None = None
    problem: str = ""


def parse_incident_param(text: str) -> IncidentRef:
    """``?id=`` as untrusted input: ``12`` or ``#12`` (as ``tailwatch incident show`` reads
    it), or an alert's fingerprint; anything else a ``problem`` naming the value."""
    raw = text.strip()
    shown = repr(text[:40]) + ("…" if len(text) > 40 else "")
    if FINGERPRINT.fullmatch(raw) and not raw.isdigit():
        return IncidentRef(fingerprint=raw)
    try:
        wanted = parse_incident_id(raw)
    except IncidentIdError:
        return IncidentRef(
            problem=f"id={shown} is not an incident id: expected a number such as 12 "
            "(from the list below)"
        )
    if wanted is None:  # NOTE: more digits than any id has: a plain miss
        return IncidentRef(problem=f"id={shown}: no incident has that id")
    # NOTE: 16 digits is also a fingerprint's shape: looked up as one when no id matches
    return IncidentRef(incident_id=wanted, fingerprint=raw if FINGERPRINT.fullmatch(raw) else None)


def latest_incident_of(state: AlertStateStore, fingerprint: str) -> int | None:
    """The id of the latest incident of the alert with ``fingerprint`` (an old link)."""
    found = [
        i for i in state.incidents(limit=FINGERPRINT_SEARCH_LIMIT) if i.fingerprint == fingerprint
    ]
    return max(found, key=lambda i: (i.started_at_seconds, i.id)).id if found else None


def episode_transitions(state: AlertStateStore, incident: Incident, now: float) -> list[Transition]:
    """The alert's transitions of this episode, oldest first: from going pending to its
    resolution (or ``now``)."""
    end = incident.resolved_at_seconds
    return [
        t
        for t in state.history(incident.pending_since_seconds, now if end is None else end)
        if t.fingerprint == incident.fingerprint
    ]


@dataclass(frozen=True)
class IncidentDetail:
    """One incident, its triage windows and transitions, the triage (``report=None`` with
    the one-line ``error`` when the store cannot answer it), and the changes triage read
    (grouped as it groups them) from the baseline's start to the window's end."""

    incident: Incident
    window: TimeWindow
    baseline: TimeWindow
    transitions: tuple[Transition, ...]
    report: TriageReport | None
    error: str = ""
    changes: tuple[ChangeGroup, ...] = ()


def triage_windows_of(
    incident: Incident,
    rules: Iterable[Rule],
    scale: float,
    now: float,
    state: AlertStateStore | None = None,
) -> tuple[TimeWindow, TimeWindow]:
    """(window, baseline) exactly as ``tailwatch incident show`` computes them."""
    end = incident.resolved_at_seconds
    return alert_triage_windows(
        incident.alert,
        incident.pending_since_seconds,
        now if end is None else end,
        rules,
        scale=scale,
        state=state,
    )


def incident_detail(
    state: AlertStateStore,
    metrics: MetricsReader,
    requests: RequestReader,
    incident_id: int,
    rules: Iterable[Rule],
    scale: float,
    now: float,
    changes: ChangeReader | None = None,
) -> IncidentDetail | None:
    """The incident ``incident_id`` with its triage; ``None`` when no incident has it."""
    incident = state.incident(incident_id)
    if incident is None:
        return None
    window, baseline = triage_windows_of(incident, rules, scale, now, state)
    transitions = tuple(episode_transitions(state, incident, now))
    mapping = replica_targets(metrics).unique()
    try:
        data = gather(metrics, requests, window, baseline, replica_targets=mapping, changes=changes)
        report = triage(data)
    except Exception as error:  # NOTE: what the store cannot answer is shown, not raised
        text = str(error).strip().splitlines()
        first = text[0] if text else type(error).__name__
        return IncidentDetail(incident, window, baseline, transitions, None, first)
    groups = group_changes(data.changes)
    return IncidentDetail(incident, window, baseline, transitions, report, changes=groups)


#: The ``event`` of a timeline row: the alert's own transition, or a change.
ALERT_EVENT, CHANGE_EVENT = "alert", "change"


def timeline_frame(
    transitions: Iterable[Transition], changes: Iterable[ChangeGroup] = ()
) -> pd.DataFrame:
    """``at, event, what, value``: one row per transition of the alert (``pending →
    firing``, with the rule's value) and per group of changes (``max_num_seqs 16 → 1 on
    replica-0, -1``), oldest first; a change before a transition at the same time."""
    rows = [
        (t.at_seconds, 1, ALERT_EVENT, f"{t.from_state.value} → {t.to_state.value}", t.alert.value)
        for t in transitions
    ]
    rows += [(g.first_seconds, 0, CHANGE_EVENT, change_label(g), None) for g in changes]
    rows.sort(key=lambda r: (r[0], r[1], r[3]))
    return pd.DataFrame(
        [(_ts(at), event, what, value) for at, _, event, what, value in rows],
        columns=["at", "event", "what", "value"],
    )


#: The annotation kind of a change (beside the alert states firing and resolved).
CHANGE = "change"
#: The most change events the annotations read (the newest).
MAX_CHANGE_EVENTS = 1000


def change_label(group: ChangeGroup) -> str:
    """A change group as one short annotation: what changed, and where."""
    what = ", ".join(group.what)
    return f"{what} on {short_targets(group.targets)}" if group.targets else what


def annotation_frame(
    state: AlertStateStore, changes: ChangeReader | None, start: float, end: float
) -> pd.DataFrame:
    """``ts, alert, state``: the alerts' firing and resolved transitions and the changes
    (the store's change events, grouped as triage groups them; the collector records them
    whether or not an evaluator runs) in ``[start, end]``: the annotations on every time
    chart."""
    rows = [
        (pd.Timestamp(t.at_seconds, unit="s", tz="UTC"), t.alert.name, t.to_state.value)
        for t in state.history(start, end)
        if t.to_state in (AlertState.FIRING, AlertState.RESOLVED)
    ]
    events = [] if changes is None else changes.change_events(start, end, limit=MAX_CHANGE_EVENTS)
    rows += [
        (pd.Timestamp(g.first_seconds, unit="s", tz="UTC"), change_label(g), CHANGE)
        for g in group_changes(events)
    ]
    return pd.DataFrame(rows, columns=["ts", "alert", "state"])


def silence_for(alert: Alert, hours: float, author: str, comment: str, now: float):
    """A silence matching exactly this alert's labels for ``hours`` from now
    (``alerts.silences.Silence.create`` validates it; raises ``AlertsError`` naming the
    field)."""
    from alerts import Matcher, MatchType, Silence

    matchers = [Matcher(k, MatchType.EQUAL, v) for k, v in sorted(alert.labels.items())]
    return Silence.create(matchers, now, now + hours * 3600.0, author, comment, now)


def check_token(given: str, expected: str | None) -> bool:
    """The admin token matches (constant time); no token configured: never."""
    import hmac

    return bool(expected) and hmac.compare_digest(given.encode(), expected.encode())  # type: ignore[union-attr]
