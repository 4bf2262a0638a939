"""Which windows triage compares for an alert: the incident, from when its condition first
held to when it resolved (or now), against an equal baseline that ends where the data that
first made the condition hold begins (the rule's window before); both widened to a floor so
a short blip still has data, and scaled with the rules (drills)."""

from __future__ import annotations

from collections.abc import Iterable

from alerts.model import Alert, AlertState
from alerts.rules.base import Rule
from alerts.state import AlertStateStore
from alerts.triage.data import TimeWindow

#: The shortest windows triage compares (a shorter incident is widened forward from its
#: start, a shorter baseline back from the incident's), at ``window_scale`` 1.
MIN_INCIDENT_SECONDS = 60.0
MIN_BASELINE_SECONDS = 600.0


def triage_windows(
    start: float, end: float, *, lookback_seconds: float = 0.0, scale: float = 1.0
) -> tuple[TimeWindow, TimeWindow]:
    """(incident, baseline) for an alert whose condition held from ``start`` to ``end``
    (Unix seconds), computed over ``lookback_seconds`` of data (``Rule.lookback_seconds``).
    The incident window starts where the condition first held: what follows is the
    trouble itself. The baseline ends a lookback earlier: the data that made the condition
    hold reaches back that far, so the onset lies in between and counts for neither side.
    NOTE: an incident window that reached back over the lookback held mostly the calm
    before the onset when triaged at page time (a replica slowed on a ramp read 1.2x its
    peers, under any cause's ramp, while the ITL tail had already paged). The floors are
    times ``scale``, as the rules' windows are under ``alerts.window_scale``."""
    end = max(end, start + MIN_INCIDENT_SECONDS * scale)
    baseline_end = start - lookback_seconds
    length = max(end - start, MIN_BASELINE_SECONDS * scale)
    return TimeWindow(start, end), TimeWindow(baseline_end - length, baseline_end)


def onset_seconds(
    start: float, earlier: Iterable[tuple[float, float]], lookback_seconds: float
) -> float:
    """When the condition's trouble began: ``start`` (pending since) moved back to the start
    of each earlier time the condition held (``earlier``: (went pending, went inactive)
    pairs of the same alert) that ended within two lookbacks of it (their windows touch or
    overlap). A condition that flickered on and off while its window filled began with its
    first flicker; starting at the last one would put the onset in the baseline again."""
    onset = start
    for began, ended in sorted(earlier, reverse=True):
        if began >= onset:
            continue
        if onset - ended > 2 * lookback_seconds:
            break
        onset = began
    return onset


def alert_triage_windows(
    alert: Alert,
    start: float,
    end: float,
    rules: Iterable[Rule],
    *,
    scale: float = 1.0,
    state: AlertStateStore | None = None,
) -> tuple[TimeWindow, TimeWindow]:
    """:func:`triage_windows` for ``alert``, reaching back over the window of the rule in
    ``rules`` that raises it (none when no rule does any more: a removed rule), from its
    :func:`onset_seconds`: the times it went pending before come from ``state``'s history
    (the 20 lookbacks before ``start``)."""
    from alerts.evaluator import rule_of  # NOTE: here: the evaluator imports much of alerts

    rule = rule_of(alert, rules)
    lookback = 0.0 if rule is None else rule.lookback_seconds()
    if state is not None and lookback > 0:
        start = onset_seconds(start, _episodes(state, alert, start, lookback), lookback)
    return triage_windows(start, end, lookback_seconds=lookback, scale=scale)


def _episodes(
    state: AlertStateStore, alert: Alert, start: float, lookback: float
) -> list[tuple[float, float]]:
    """``alert``'s (went pending, went inactive) pairs in the 20 lookbacks before ``start``."""
    pairs, began = [], None
    for t in state.history(start - 20 * lookback, start):
        if t.fingerprint != alert.fingerprint:
            continue
        if t.to_state is AlertState.PENDING:
            began = t.at_seconds
        elif began is not None:
            pairs.append((began, t.at_seconds))
            began = None
    return pairs
