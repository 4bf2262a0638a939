"""Ranked hypotheses: each :class:`~alerts.vocabulary.Cause` scored in [0, 1] from evidence rows.

Every score is built from *ramps*: ``ramp(x, lo, hi)`` is 0 at or below ``lo``, 1 at or above
``hi``, linear between. A cause's rule (below, and ``docs/alerts.md``, "Triage") multiplies
the ramps of the signals it needs and takes the max of alternatives; each ramp is kept as a
:class:`Reason` (the row, its value, the ramp's ends and what it contributed), so a score can
be recomputed by hand from the report. A *required* signal that is unknown makes the score 0
and the hypothesis says "not enough data"; an *optional* one that is unknown counts as 0.
Deterministic: no randomness, ties ranked in :class:`Cause`'s declaration order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from alerts.triage.change_groups import ChangeGroup
from alerts.triage.evidence import FLEET, EvidenceKey, EvidenceRow, rows_by_key
from alerts.vocabulary import Cause

K = EvidenceKey


def ramp(x: float, lo: float, hi: float) -> float:
    """0 at or below ``lo``, 1 at or above ``hi``, linear between; NaN stays NaN."""
    if math.isnan(x):
        return math.nan
    if x <= lo:
        return 0.0
    if x >= hi:
        return 1.0
    return (x - lo) / (hi - lo)


@dataclass(frozen=True)
class Reason:
    """One signal behind a score: which row and side, its value, and the ramp it went through.

    ``uses`` is ``"incident"``, ``"change"`` (the row's incident-vs-baseline change) or
    ``"baseline"``; ``sub_score`` is ``ramp(value, lo, hi)`` (NaN: the value is unknown)."""

    key: EvidenceKey
    what: str
    scope: str
    uses: str
    value: float
    lo: float
    hi: float
    sub_score: float
    is_required: bool = True


@dataclass(frozen=True)
class Hypothesis:
    """A cause, or a change (``Cause.CHANGE``, with ``change``: the group of changes made
    together, :mod:`alerts.triage.change_hypotheses`), scored in [0, 1]."""

    cause: Cause
    score: float  # in [0, 1]
    reasons: tuple[Reason, ...]
    scope: str = FLEET  # the replica the cause points at, when it points at one
    has_enough_data: bool = True
    note: str = ""
    change: ChangeGroup | None = None


def reason_of(
    rows: dict[EvidenceKey, EvidenceRow],
    key: EvidenceKey,
    uses: str,
    lo: float,
    hi: float,
    *,
    is_required: bool = True,
    falls: bool = False,
) -> Reason:
    """``ramp(value, lo, hi)`` of one side of a row; ``falls``: a fall of at least ``lo``
    starts the ramp (``ramp(-value, lo, hi)``, shown as the ends ``-lo..-hi``)."""
    row = rows.get(key)
    shown_lo, shown_hi = (-lo, -hi) if falls else (lo, hi)
    if row is None:
        return Reason(
            key, key.value, FLEET, uses, math.nan, shown_lo, shown_hi, math.nan, is_required
        )
    value = {"incident": row.incident, "change": row.change, "baseline": row.baseline}[uses]
    sub = ramp(-value if falls else value, lo, hi)
    return Reason(key, row.what, row.scope, uses, value, shown_lo, shown_hi, sub, is_required)


def _sub(reason: Reason) -> float:
    return 0.0 if math.isnan(reason.sub_score) else reason.sub_score


def _hypothesis(
    cause: Cause, score: float, reasons: Iterable[Reason], scope: str = FLEET, note: str = ""
) -> Hypothesis:
    reasons = tuple(reasons)
    missing = [r.what.strip() for r in reasons if r.is_required and math.isnan(r.sub_score)]
    if missing:
        return Hypothesis(
            cause, 0.0, reasons, scope, False, "not enough data: " + ", ".join(missing)
        )
    return Hypothesis(cause, min(1.0, max(0.0, score)), reasons, scope, True, note)


def _prefill_interference(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: long prompts show first in the first tokens (theirs take their prefill, the
    # others' queue behind it) and then in the token gaps of every decode in their steps;
    # at the first page the ITL tail may not have moved yet, so either tail counts; and a
    # minority of very long prompts moves the prompts' mean before their p95
    itl = reason_of(rows, K.ITL_P99, "change", 1.2, 2.0, is_required=False)
    ttft = reason_of(rows, K.TTFT_P95, "change", 1.2, 2.0, is_required=False)
    prompt = reason_of(rows, K.PROMPT_P95, "change", 1.5, 4.0, is_required=False)
    mean = reason_of(rows, K.PROMPT_MEAN, "change", 1.5, 4.0, is_required=False)
    reasons = (itl, ttft, prompt, mean)
    missing = [
        what
        for what, pair in (("ITL p99, TTFT p95", (itl, ttft)), ("prompt length", (prompt, mean)))
        if all(math.isnan(r.sub_score) for r in pair)
    ]
    if missing:
        note = "not enough data: " + ", ".join(missing)
        return Hypothesis(Cause.PREFILL_INTERFERENCE, 0.0, reasons, FLEET, False, note)
    score = max(_sub(itl), _sub(ttft)) * max(_sub(prompt), _sub(mean))
    return _hypothesis(Cause.PREFILL_INTERFERENCE, score, reasons)


def _kv_exhaustion(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: a healthy engine does not preempt: one preemption in twenty requests is already a
    # pool that does not hold the running sequences
    preempt = reason_of(rows, K.PREEMPTIONS_PER_REQUEST, "change", 0.01, 0.05)
    kv = reason_of(rows, K.KV_USAGE_MAX, "incident", 0.8, 0.98, is_required=False)
    score = _sub(preempt) * (0.7 + 0.3 * _sub(kv))
    scope = rows[K.KV_USAGE_MAX].scope if K.KV_USAGE_MAX in rows else FLEET
    return _hypothesis(Cause.KV_EXHAUSTION, score, (preempt, kv), scope)


def _prefix_break(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: the drop is read on replicas that served in both windows, so cold replicas added
    # since the baseline (prefix-scatter) do not count as a broken prefix.
    drop = reason_of(rows, K.STEADY_HIT_RATE, "change", 0.1, 0.4, falls=True)
    # NOTE: a prompt change that breaks the prefix keeps the prompts' lengths; new traffic of
    # long unshared prompts dilutes the token-weighted hit rate instead (long prompts
    # surging read as a broken prefix before this), so a shift of the lengths halves it
    shift = reason_of(rows, K.PROMPT_P95, "change", 1.5, 4.0, is_required=False)
    score = _sub(drop) * (1.0 - 0.5 * _sub(shift))
    return _hypothesis(Cause.PREFIX_BREAK, score, (drop, shift))


def _prefix_scatter(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    fleet = reason_of(rows, K.PREFIX_HIT_RATE, "change", 0.05, 0.2, falls=True)
    new = reason_of(rows, K.NEW_REPLICA_QUERY_SHARE, "incident", 0.1, 0.4)
    return _hypothesis(Cause.PREFIX_SCATTER, _sub(fleet) * _sub(new), (fleet, new))


def _overload(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    queue = reason_of(rows, K.LEAST_QUEUE_SHARE, "incident", 0.25, 0.6, is_required=False)
    growth = reason_of(rows, K.ARRIVAL_RATE, "change", 1.1, 1.5, is_required=False)
    rejected = reason_of(rows, K.REJECTED_SHARE, "incident", 0.01, 0.1, is_required=False)
    reasons = (queue, growth, rejected)
    if all(math.isnan(r.sub_score) for r in (queue, rejected)):
        return Hypothesis(
            Cause.OVERLOAD,
            0.0,
            reasons,
            FLEET,
            False,
            "not enough data: queue share of TTFT, 429 share of responses",
        )
    # NOTE: overload is arrivals above capacity: queueing or shedding without more arrivals
    # means capacity fell (a squeezed KV pool, a slow replica, long prefills), which the
    # other causes name; so the arrivals' rise weighs both (unknown arrivals: half weight)
    weight = 0.5 if math.isnan(growth.sub_score) else _sub(growth)
    score = weight * max(_sub(queue), _sub(rejected))
    return _hypothesis(Cause.OVERLOAD, score, reasons)


def _skew_reason(rows: dict[EvidenceKey, EvidenceRow], key: EvidenceKey) -> Reason:
    """A replica's skew against the others; relative to that replica's own baseline skew
    when that was above 1 (a replica that was always slower, other hardware, is no
    incident)."""
    row = rows.get(key)
    if row is not None and math.isfinite(row.baseline) and row.baseline > 1.0:
        return reason_of(rows, key, "change", 1.25, 2.0)
    return reason_of(rows, key, "incident", 1.25, 2.0)


def _slow_replica(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: means (a histogram's sum over its count): a bucketed p50 of short requests
    # cannot tell a replica twice as slow, and a mean moves as soon as part of a window is
    # slow; the ITL's first (token gaps are observed as they are made, a request's e2e only
    # when it finishes), the e2e's for a replica that queues; the e2e p50 where neither is
    # known
    candidates = [
        _skew_reason(rows, key)
        for key in (K.ITL_MEAN_SKEW, K.E2E_MEAN_SKEW)
        if rows.get(key) is not None and rows[key].is_known
    ] or [_skew_reason(rows, K.E2E_P50_SKEW)]
    skew = max(candidates, key=lambda r: -1.0 if math.isnan(r.sub_score) else r.sub_score)
    return _hypothesis(Cause.SLOW_REPLICA, _sub(skew), (skew,), skew.scope)


def _structured_truncation(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: a rise of the share cut at max_tokens, not its level: a route whose schema
    # sometimes runs long has a steady share. 2 points is a steady route's noise; 10 points
    # more (one structured answer in ten more invalid) is the whole of it. truncation-rise
    # fires at 5 points, so triage at its first ticket, over the few seconds since the
    # condition held, already reads the cause above the floor (at 5 points: 0.375)
    share = reason_of(rows, K.STRUCTURED_LENGTH_SHARE, "change", 0.02, 0.1)
    return _hypothesis(Cause.STRUCTURED_TRUNCATION, _sub(share), (share,))


def _output_length_shift(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: answers a quarter longer start the ramp, twice as long is all of it. The same
    # arrivals and prompts (a traffic change names itself: overload, prefill interference),
    # and no preemption (kv-exhaustion names the squeeze longer answers can make): each guard
    # counts 1 - its ramp (unknown: 1/2). The concurrency the longer decodes hold up is
    # support, not a requirement: at the first page it may not have risen far yet.
    output = reason_of(rows, K.OUTPUT_MEAN, "change", 1.25, 2.0)
    arrivals = reason_of(rows, K.ARRIVAL_RATE, "change", 1.1, 1.5, is_required=False)
    prompts = reason_of(rows, K.PROMPT_P95, "change", 1.5, 4.0, is_required=False)
    preempt = reason_of(rows, K.PREEMPTIONS_PER_REQUEST, "change", 0.01, 0.05, is_required=False)
    running = reason_of(rows, K.RUNNING_MEAN, "change", 1.2, 2.0, is_required=False)

    def guard(reason: Reason) -> float:
        return 0.5 if math.isnan(reason.sub_score) else 1.0 - reason.sub_score

    score = _sub(output) * guard(arrivals) * guard(prompts) * guard(preempt)
    score *= 0.7 + 0.3 * _sub(running)
    reasons = (output, arrivals, prompts, preempt, running)
    return _hypothesis(Cause.OUTPUT_LENGTH_SHIFT, score, reasons)


_RULES = (
    _prefill_interference,
    _kv_exhaustion,
    _prefix_break,
    _prefix_scatter,
    _overload,
    _slow_replica,
    _structured_truncation,
    _output_length_shift,
)
_ORDER = {cause: i for i, cause in enumerate(Cause)}


#: The causes a rule scores from the evidence (every one but ``Cause.CHANGE``, which
#: :mod:`alerts.triage.change_hypotheses` scores per group of changes).
MECHANISMS = tuple(cause for cause in Cause if cause is not Cause.CHANGE)


def rank_hypotheses(rows: Iterable[EvidenceRow]) -> tuple[Hypothesis, ...]:
    """Every cause of :data:`MECHANISMS` scored from ``rows``, highest score first (ties:
    :class:`Cause` order)."""
    by_key = rows_by_key(rows)
    hypotheses = [rule(by_key) for rule in _RULES]
    return tuple(sorted(hypotheses, key=lambda h: (-h.score, _ORDER[h.cause])))
