"""Guided triage of a latency incident: evidence, ranked causes, slowest requests, an action.

``triage(data)`` is pure: a :class:`~alerts.triage.data.TriageInput` (built by
:mod:`alerts.triage.gather` from the store, or by hand) in, a :class:`TriageReport` out. The evidence
table is :mod:`alerts.triage.evidence`, the scoring :mod:`alerts.triage.hypotheses` (the
causes) and :mod:`alerts.triage.change_hypotheses` (what changed); this module links the
slowest requests by trace id and picks the recommendation from
:data:`alerts.vocabulary.ACTIONS`. A cause must score at least :data:`SCORE_FLOOR` to be
recommended; below it the verdict is "no cause stands out". Bad or missing data never raises:
it shows as "not enough data".
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from alerts.triage.change_groups import ChangeGroup
from alerts.triage.change_hypotheses import change_hypotheses, ranked
from alerts.triage.data import SlowRequest, TriageInput
from alerts.triage.evidence import FLEET, EvidenceKey, EvidenceRow, evidence_table, rows_by_key
from alerts.triage.hypotheses import Hypothesis, rank_hypotheses
from alerts.vocabulary import ACTIONS, Action, Cause

#: A cause scoring below this is not recommended ("no cause stands out").
SCORE_FLOOR = 0.3
#: How many slowest requests the report lists.
MAX_SLOW_REQUESTS = 10

NO_CAUSE = "no cause stands out"
NOT_ENOUGH_DATA = "not enough data"


@dataclass(frozen=True)
class Recommendation:
    """The action for the top cause: ``action`` is ``ACTIONS[cause][0]``, ``alternatives`` the
    rest; ``target`` the replica it applies to when the cause points at one; ``change`` the
    group of changes to revert when the top hypothesis is a change; ``recent_changes`` the
    hypotheses of the other changes that line up with the onset (those of ``target``, or any
    fleet-wide), most likely first."""

    cause: Cause
    action: Action
    alternatives: tuple[Action, ...]
    target: str | None
    recent_changes: tuple[Hypothesis, ...]
    change: ChangeGroup | None = None


@dataclass(frozen=True)
class TriageReport:
    evidence: tuple[EvidenceRow, ...]
    hypotheses: tuple[Hypothesis, ...]
    slowest_requests: tuple[SlowRequest, ...]
    recommendation: Recommendation | None
    verdict: str  # the top cause's name, NO_CAUSE or NOT_ENOUGH_DATA

    @property
    def top(self) -> Hypothesis | None:
        """The top hypothesis when it clears the floor."""
        return self.hypotheses[0] if self.recommendation is not None else None


def _e2e(request: SlowRequest) -> float:
    value = request.e2e_seconds
    return value if isinstance(value, float | int) and math.isfinite(value) else -math.inf


def _pick(a: float, b: float) -> float:
    return a if isinstance(a, float | int) and math.isfinite(a) else b


def _merge(a: SlowRequest, b: SlowRequest) -> SlowRequest:
    """One request seen twice (an exemplar and a record): known fields of ``a`` win."""
    return SlowRequest(
        trace_id=a.trace_id,
        e2e_seconds=_pick(a.e2e_seconds, b.e2e_seconds),
        ttft_seconds=_pick(a.ttft_seconds, b.ttft_seconds),
        queue_seconds=_pick(a.queue_seconds, b.queue_seconds),
        prefill_seconds=_pick(a.prefill_seconds, b.prefill_seconds),
        request_id=a.request_id or b.request_id,
        target=a.target or b.target,
        sources=a.sources | b.sources,
    )


def slowest_requests(
    requests: Iterable[SlowRequest], limit: int = MAX_SLOW_REQUESTS
) -> tuple[SlowRequest, ...]:
    """De-duplicated by trace id (fields merged, the slower sighting first), slowest e2e
    first (unknown e2e last), ties by trace id; at most ``limit``."""
    merged: dict[str, SlowRequest] = {}
    for request in sorted(requests, key=lambda r: (-_e2e(r), r.trace_id, r.request_id or "")):
        if not request.trace_id:
            continue
        seen = merged.get(request.trace_id)
        merged[request.trace_id] = request if seen is None else _merge(seen, request)
    ordered = sorted(merged.values(), key=lambda r: (-_e2e(r), r.trace_id))
    return tuple(ordered[: max(0, limit)])


def _recommend(top: Hypothesis, hypotheses: tuple[Hypothesis, ...]) -> Recommendation:
    first, *rest = ACTIONS[top.cause]
    target = None if top.scope == FLEET or "," in top.scope or top.change else top.scope
    recent = tuple(
        h
        for h in hypotheses
        if h.change is not None
        and h is not top
        and (target is None or not h.change.targets or target in h.change.targets)
    )
    return Recommendation(top.cause, first, tuple(rest), target, recent, top.change)


def triage(data: TriageInput) -> TriageReport:
    """The triage report of one incident (see the module docstring)."""
    rows = evidence_table(data)
    causes = rank_hypotheses(rows)
    slow = slowest_requests(data.slow_requests)
    if rows[0].key is EvidenceKey.NOT_ENOUGH_DATA or not any(h.has_enough_data for h in causes):
        return TriageReport(rows, causes, slow, None, NOT_ENOUGH_DATA)
    known = [h for h in causes if h.has_enough_data]  # NOTE: ranked: the first leads
    changes = change_hypotheses(data, rows_by_key(rows), known[0].score, known[0].cause)
    hypotheses = ranked(causes, changes)
    top = hypotheses[0]
    if top.score < SCORE_FLOOR:
        return TriageReport(rows, hypotheses, slow, None, NO_CAUSE)
    return TriageReport(rows, hypotheses, slow, _recommend(top, hypotheses), top.cause.value)
