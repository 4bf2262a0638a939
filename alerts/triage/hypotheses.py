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
    # NOTE: arrivals above capacity that one tenant's share of the work concentrates in are
    # that tenant's (noisy-tenant: cap it; scaling out feeds it more); without a tenant
    # breakdown the rule is as it was
    concentration = _concentration(rows)
    if any(not math.isnan(r.sub_score) for r in concentration):
        reasons += concentration
        score *= 1.0 - max(map(_sub, concentration))
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
    reasons: tuple[Reason, ...] = (skew,)
    score, note = _sub(skew), ""
    # NOTE: a replica that is slow because it preempts is a squeezed KV pool, not a slow
    # machine: where the skewed replica is the one preempting most, its preemptions halve
    # the skew's weight at most (a slowed replica that queues may preempt a little too, so
    # a slight rate takes little off, and a heavy one leaves kv-exhaustion, >= 0.7, first)
    preempting = rows.get(K.PREEMPTIONS_PER_REQUEST)
    if preempting is not None and preempting.scope not in (FLEET, "") and preempting.scope == skew.scope:  # fmt: skip
        preempt = reason_of(rows, K.PREEMPTIONS_PER_REQUEST, "change", 0.01, 0.05, is_required=False)  # fmt: skip
        score *= 1.0 - 0.5 * _sub(preempt)
        reasons = (skew, preempt)
    # NOTE: a replica that started since the baseline and is slower than the rest is most
    # likely still cold (the cold-start rule weighs it against the steady replicas): its
    # slowness counts half here, so the two do not tie on the same replica
    cold = rows.get(K.COLD_ITL_RATIO)
    if cold is not None and cold.is_known and skew.scope in cold.scope.split(","):
        note = f"{skew.scope} started since the baseline: counts half (a cold start?)"
        score *= 0.5
    return _hypothesis(Cause.SLOW_REPLICA, score, reasons, skew.scope, note)


def _adapter_thrash(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: a warm adapter set loads each adapter once: one load in fifty requests is
    # already a set that does not hold what is asked for, one in ten a set that thrashes;
    # the loads matter when they are a part of the first tokens' time or of the replicas'
    # (a twentieth is felt, a quarter is the incident); the replicas' time when the stalls
    # built a queue that the first tokens' time is mostly made of
    loads = reason_of(rows, K.LORA_LOADS_PER_REQUEST, "change", 0.02, 0.1, is_required=False)
    share = reason_of(rows, K.LORA_LOAD_SHARE, "incident", 0.05, 0.25, is_required=False)
    busy = reason_of(rows, K.LORA_LOAD_TIME_SHARE, "incident", 0.05, 0.25, is_required=False)
    reasons = (loads, share, busy)
    if math.isnan(loads.sub_score):
        note = "not enough data: adapter loads per request (LoRA off, or no load counter)"
        return Hypothesis(Cause.ADAPTER_THRASH, 0.0, reasons, FLEET, False, note)
    score = _sub(loads) * max(_sub(share), _sub(busy))
    return _hypothesis(Cause.ADAPTER_THRASH, score, reasons)


def _cold_start(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: a replica that takes traffic before it is warm steps slowly: its token gaps a
    # quarter longer than the steady replicas' is the slow-replica rule's own start, twice
    # as long is certain. Its first tokens count too, but a cold prefix cache (a scale-out
    # that scatters prefix groups) lengthens them by itself, so they count only as far as
    # the fleet's hit rate held
    # A started replica compiling the grammars a warm one has cached (the first requests
    # after a deploy) is cold too: a twentieth of their first tokens' time is felt, a
    # quarter is the incident
    itl = reason_of(rows, K.COLD_ITL_RATIO, "incident", 1.25, 2.0, is_required=False)
    ttft = reason_of(rows, K.COLD_TTFT_RATIO, "incident", 1.5, 3.0, is_required=False)
    hit = reason_of(rows, K.PREFIX_HIT_RATE, "change", 0.05, 0.2, is_required=False, falls=True)
    compile_ = reason_of(rows, K.COLD_COMPILE_SHARE, "incident", 0.05, 0.25, is_required=False)
    reasons = (itl, ttft, hit, compile_)
    scope = next(
        (
            rows[k].scope
            for k in (K.COLD_ITL_RATIO, K.COLD_COMPILE_SHARE)
            if k in rows and rows[k].is_known
        ),
        FLEET,
    )
    if all(math.isnan(r.sub_score) for r in (itl, ttft, compile_)):
        note = "not enough data: no replica started since the baseline began beside a steady one"
        return Hypothesis(Cause.COLD_START, 0.0, reasons, FLEET, False, note)
    score = max(_sub(itl), _sub(ttft) * (1.0 - _sub(hit)), _sub(compile_))
    return _hypothesis(Cause.COLD_START, score, reasons, scope)


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


def _concentration(rows: dict[EvidenceKey, EvidenceRow]) -> tuple[Reason, Reason]:
    """The noisiest tenant's rise in its share of the prompt tokens and of the queue time:
    a fifth of the fleet's work moving to one tenant starts the ramp, half of it ends it."""
    tokens = reason_of(rows, K.TENANT_PROMPT_SHARE, "change", 0.2, 0.5, is_required=False)
    queue = reason_of(rows, K.TENANT_QUEUE_SHARE, "change", 0.2, 0.5, is_required=False)
    return tokens, queue


def _noisy_tenant(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: one tenant's share of the work concentrating is harmless within capacity (a
    # tenant that grows); it starves the others when their first tokens wait: their TTFT
    # mean at 1.5x its baseline starts the ramp, 3x ends it; or, as overload reads it,
    # every replica queues (first come, first served: the queue the tenant fills is the
    # others' too; at page time their requests are still in it, with no record yet).
    # Long prompts that take the token share stall decodes rather than queue them
    # (prefill-interference): a shift of the prompt-length tail halves the score, as it
    # does a broken prefix's
    tokens, queue = _concentration(rows)
    others = reason_of(rows, K.OTHER_TENANTS_TTFT, "change", 1.5, 3.0, is_required=False)
    waits = reason_of(rows, K.LEAST_QUEUE_SHARE, "incident", 0.25, 0.6, is_required=False)
    shift = reason_of(rows, K.PROMPT_P95, "change", 1.5, 4.0, is_required=False)
    reasons = (tokens, queue, others, waits, shift)
    if all(math.isnan(r.sub_score) for r in (tokens, queue, others)):
        note = "not enough data: no tenant breakdown (request records naming two tenants)"
        return Hypothesis(Cause.NOISY_TENANT, 0.0, reasons, FLEET, False, note)
    harm = max(_sub(others), _sub(waits))
    score = max(_sub(tokens), _sub(queue)) * harm * (1.0 - 0.5 * _sub(shift))
    # NOTE: the scope names the tenant (the rows' "tenant 'bulk'"): the one to cap
    return _hypothesis(Cause.NOISY_TENANT, score, reasons, tokens.scope)


def _guard(reason: Reason, unknown: float = 0.0) -> float:
    """``1 - ramp``: the signal stayed put (``unknown`` when it cannot be read)."""
    return 1.0 - (unknown if math.isnan(reason.sub_score) else reason.sub_score)


def _busy_idle_gpu(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: a decode step reads every weight whatever the batch, so a memory-bound GPU that
    # gets slower (longer contexts, a throttled memory clock) makes every step slower at the
    # same batch; a batch that cannot grow to absorb it (capped by max_num_seqs) leaves
    # requests waiting while NVML reads "100 %". A batch that grew with the steps is load
    # (overload, or a healthy rise): the steps must slow more than the batch grew; a slower step with more arrivals, longer prompts, a
    # preempting pool or one slow replica is the other causes'.
    slower = reason_of(rows, K.ITL_MEAN, "change", 1.2, 2.0)
    # NOTE: with steady arrivals, requests that take longer make a larger batch (Little's
    # law); a batch that cannot absorb the slower steps shows as steps slower than the batch
    # grew, or as requests queueing
    per_request = reason_of(rows, K.ITL_PER_RUNNING, "change", 1.1, 1.5, is_required=False)
    queue = reason_of(rows, K.QUEUE_SHARE, "change", 0.1, 0.3, is_required=False)
    arrivals = reason_of(rows, K.ARRIVAL_RATE, "change", 1.1, 1.5, is_required=False)
    prompts = reason_of(rows, K.PROMPT_MEAN, "change", 1.5, 4.0, is_required=False)
    preempt = reason_of(rows, K.PREEMPTIONS_PER_REQUEST, "change", 0.01, 0.05, is_required=False)
    skew = reason_of(rows, K.ITL_MEAN_SKEW, "incident", 1.25, 2.0, is_required=False)
    # NOTE: drafts no longer accepted make a larger batch of slower steps too: spec-not-paying
    drafts = reason_of(rows, K.SPEC_ACCEPTANCE, "change", 0.1, 0.3, is_required=False, falls=True)
    busy = reason_of(rows, K.GPU_UTILIZATION, "incident", 0.8, 0.95, is_required=False)
    steady = _guard(arrivals, 0.5) * _guard(prompts, 0.5) * _guard(preempt) * _guard(skew)
    steady *= _guard(drafts)
    held = max(_sub(per_request), _sub(queue))
    score = _sub(slower) * held * steady * (0.7 + 0.3 * _sub(busy))
    reasons = (slower, per_request, queue, arrivals, prompts, preempt, skew, drafts, busy)
    missing = math.isnan(per_request.sub_score) and math.isnan(queue.sub_score)
    if missing:
        note = "not enough data: ITL mean / requests running, queue share of TTFT"
        return Hypothesis(Cause.BUSY_IDLE_GPU, 0.0, reasons, FLEET, False, note)
    return _hypothesis(Cause.BUSY_IDLE_GPU, score, reasons)


def _spec_not_paying(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: a step verifies every draft token whether or not it is accepted: a falling
    # acceptance rate costs the same steps for fewer tokens (a request's decode takes
    # longer) and, at load, the rejected drafts' compute makes each step slower too, or the
    # fleet falls below its arrivals and queues
    fall = reason_of(rows, K.SPEC_ACCEPTANCE, "change", 0.1, 0.3, falls=True)
    itl = reason_of(rows, K.ITL_MEAN, "change", 1.2, 2.0, is_required=False)
    tail = reason_of(rows, K.ITL_P99, "change", 1.2, 2.0, is_required=False)
    queue = reason_of(rows, K.QUEUE_SHARE, "change", 0.1, 0.3, is_required=False)
    # NOTE: a memory-bound fleet's steps keep their time, but it serves fewer requests a
    # second: the first tokens' tail shows the queue before its share of TTFT moves
    first = reason_of(rows, K.TTFT_P95, "change", 1.2, 2.0, is_required=False)
    # NOTE: and whatever the load, each request needs more steps: its e2e grows
    e2e = reason_of(rows, K.E2E_MEAN, "change", 1.2, 2.0, is_required=False)
    reasons = (fall, itl, tail, queue, first, e2e)
    score = _sub(fall) * max(_sub(r) for r in reasons[1:])
    return _hypothesis(Cause.SPEC_NOT_PAYING, score, reasons)


def _client_gap(rows: dict[EvidenceKey, EvidenceRow]) -> Hypothesis:
    # NOTE: time added between the engines and the clients (a saturated proxy, a misrouted
    # region, TLS or auth in front) slows every first token the clients see by the same
    # amount while the engines' own stay put: the client tail rises (a fifth to twice), the
    # gap grows to a tenth to two fifths more of the clients' wait, and the engines' tail
    # does not rise (if it did, the engines are slow: their causes own it). Without client
    # timings the rows are unknown: not enough data, score 0.
    client = reason_of(rows, K.CLIENT_TTFT_P95, "change", 1.2, 2.0)
    share = reason_of(rows, K.CLIENT_GAP_SHARE, "change", 0.1, 0.4)
    engines = reason_of(rows, K.TTFT_P95, "change", 1.2, 2.0)
    reasons = (client, share, engines)
    score = _sub(client) * _sub(share) * _guard(engines)
    return _hypothesis(Cause.CLIENT_GAP, score, reasons)


_RULES = (
    _prefill_interference,
    _kv_exhaustion,
    _prefix_break,
    _prefix_scatter,
    _overload,
    _slow_replica,
    _adapter_thrash,
    _cold_start,
    _structured_truncation,
    _output_length_shift,
    _noisy_tenant,
    _busy_idle_gpu,
    _spec_not_paying,
    _client_gap,
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
