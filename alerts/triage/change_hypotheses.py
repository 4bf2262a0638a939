"""What changed, as hypotheses of their own: "changed X at T", ranked beside the causes.

Each group of changes made together (:mod:`alerts.triage.change_groups`) that lines up with
the onset is scored ``timing × explains`` (``docs/alerts.md``, "What changed?"):

- **timing**: where the change lies against the onset. The onset lies between the baseline's
  end and the incident's start (``alerts.triage.windows``): a span ``S`` wide (at least a tenth
  of the baseline). A change up to ``2 S`` before the incident's start scores 1, one ``4 S``
  before it or more 0, linearly between; one after the start 0 (it cannot have begun what
  was already happening), and is no hypothesis. Nor is one made before the baseline began:
  the baseline already ran with it, so it cannot explain how the incident differs from it
  (the ramp reaches 0 at the baseline's start when that is nearer than ``4 S``).
- **explains**: whether the changed thing moves what the incident shows. Each changed thing
  has a *footprint*: the evidence rows it would move, as alternatives whose ramps multiply
  (the causes' ramps), the best alternative counting. A knob that bounds batching, lowered,
  explains queueing or shedding; raised, preemptions or a slower token gap; a quantisation,
  model or version label (any label not named here) a slower step or longer answers; a
  replica removed, queueing; added, the prefix hit rate of cold replicas; restarted, its own cold cache; the
  traffic mix, the prompts' and outputs' lengths and the arrivals. Every footprint but the
  traffic's is *guarded* by steady traffic: times ``1 - ramp`` of the arrivals' rise and of
  the prompts' (unknown: ½), since a change of the traffic explains whatever it moved by
  itself (the causes of traffic, overload and prefill interference, name it).

Two classes. What someone did to the fleet (a knob, a config or version label, the replica
set) is an *action*: when it explains the incident it is the cause (undo it), whatever
mechanism it acts through, so it is not discounted and ranks first on a tie. What happened
to the fleet — the traffic mix, and the bundled engine's drill faults, which stand for events
in the world (a throttled GPU, another process's memory: :data:`CIRCUMSTANCES`) and leave
no change record in production — is a *circumstance*: it counts only for what the causes
leave unexplained (``explains × (1 - the top cause's score)``) and ranks after them on a tie.

A change can also be the *occasion* of a cause rather than its fix (:data:`OCCASIONS`): a
scale-out or a restart brings replicas up cold, and undoing it fixes nothing (warming them
does). While that cause leads the causes, such a change counts as a circumstance: it agrees
with the cause (its footprint is the cause's) and ranks after it.

Pure: rows and groups in, :class:`~alerts.triage.hypotheses.Hypothesis` values out.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from alerts.triage.change_groups import ChangeGroup, group_changes, short_targets
from alerts.triage.data import TimeWindow, TriageInput
from alerts.triage.evidence_rows import FLEET, EvidenceKey, EvidenceRow
from alerts.triage.hypotheses import Hypothesis, Reason, ramp, reason_of
from alerts.vocabulary import Cause
from collectors.store.change_records import ChangeEvent, ChangeKind, TargetChange

K = EvidenceKey

#: A change this many onset spans before the incident's start scores 1 for timing, and 0
#: from :data:`ZERO_SPANS` on.
FULL_SPANS = 2.0
ZERO_SPANS = 4.0
#: The onset span is at least this share of the baseline (a rule without a window has none).
MIN_SPAN_SHARE = 0.1
#: What a guard that cannot be read counts (neither steady nor moved).
UNKNOWN_GUARD = 0.5
#: The bundled engine's drill faults (``engine.live_knobs.FAULTS``) and the usable KV pool,
#: which a drill shrinks as if another process took the memory: stand-ins for events in the
#: world, recorded as changes but ranked as circumstances.
CIRCUMSTANCES = frozenset(
    {"step_delay_seconds", "prefill_seconds_per_token", "fail_next_steps", "num_usable_gpu_blocks"}
    # the simulator's share of structured answers that outgrow max_tokens: answers growing
    | {"structured_output_truncation_share"}
)
#: The simulator's draft acceptance rate (``engine.sim.features``) stands for how repetitive
#: the traffic is, or how well a draft matches its target: nobody turns it in production.
CIRCUMSTANCES |= frozenset({"spec_decode_acceptance_rate"})


@dataclass(frozen=True)
class Signal:
    """One ramp of a footprint: a row's side through ``[lo, hi]`` (``falls``: a fall);
    ``inverse``: counts ``1 - ramp`` (a guard: the traffic stayed); ``scoped``: a row that
    singles out a replica counts only when that replica is one the change was made on."""

    key: EvidenceKey
    uses: str
    lo: float
    hi: float
    falls: bool = False
    inverse: bool = False
    scoped: bool = False


Alternative = tuple[Signal, ...]

QUEUE = Signal(K.QUEUE_SHARE, "incident", 0.25, 0.6)
REJECTED = Signal(K.REJECTED_SHARE, "incident", 0.01, 0.1)
ITL = Signal(K.ITL_P99, "change", 1.2, 2.0)
PREEMPTIONS = Signal(K.PREEMPTIONS_PER_REQUEST, "change", 0.01, 0.05, scoped=True)
HIT_FALL = Signal(K.STEADY_HIT_RATE, "change", 0.1, 0.4, falls=True)
FLEET_HIT_FALL = Signal(K.PREFIX_HIT_RATE, "change", 0.05, 0.2, falls=True)
NEW_SHARE = Signal(K.NEW_REPLICA_QUERY_SHARE, "incident", 0.1, 0.4)
HIT_SKEW = Signal(K.HIT_RATE_SKEW, "incident", 0.1, 0.4, falls=True, scoped=True)
ITL_SKEW = Signal(K.ITL_MEAN_SKEW, "incident", 1.25, 2.0, scoped=True)
E2E_SKEW = Signal(K.E2E_MEAN_SKEW, "incident", 1.25, 2.0, scoped=True)
PROMPTS = Signal(K.PROMPT_P95, "change", 1.5, 4.0)
PROMPTS_MEAN = Signal(K.PROMPT_MEAN, "change", 1.5, 4.0)
OUTPUTS = Signal(K.OUTPUT_MEAN, "change", 1.5, 4.0)
ARRIVALS = Signal(K.ARRIVAL_RATE, "change", 1.1, 1.5)
GUARDS: Alternative = (replace(ARRIVALS, inverse=True), replace(PROMPTS, inverse=True))
TRUNCATED = Signal(K.STRUCTURED_LENGTH_SHARE, "change", 0.02, 0.1)

COLD_ITL = Signal(K.COLD_ITL_RATIO, "incident", 1.25, 2.0)
CAPACITY_DOWN: tuple[Alternative, ...] = ((QUEUE,), (REJECTED,))
STEP_SLOWER: tuple[Alternative, ...] = ((ITL,),)
KV_SQUEEZE: tuple[Alternative, ...] = ((PREEMPTIONS,),)
PREFIX_LOSS: tuple[Alternative, ...] = ((HIT_FALL,),)
SLOW_TARGET: tuple[Alternative, ...] = ((ITL_SKEW,), (E2E_SKEW,))
COLD_REPLICAS: tuple[Alternative, ...] = ((FLEET_HIT_FALL, NEW_SHARE),)
TRAFFIC_SHAPE: tuple[Alternative, ...] = ((PROMPTS,), (PROMPTS_MEAN,), (OUTPUTS,), (ARRIVALS,))
#: A changed thing not named below (a model, version or quantisation label, a LoRA config):
#: it changed how the engine runs, or, a model or its chat template, how long it answers
#: (output-length-shift's incident: the change is the thing to undo).
GENERIC = (*STEP_SLOWER, *CAPACITY_DOWN, *SLOW_TARGET, (OUTPUTS,))

LOWER, RAISE = -1, 1
_KV = {LOWER: KV_SQUEEZE, RAISE: ()}
_ADMISSION = {LOWER: ((REJECTED,),), RAISE: ((QUEUE,),)}
#: Footprints by what changed and which way (a value that went down is ``LOWER``; a change
#: whose direction is not known, or a switch, counts every direction's).
FOOTPRINTS: Mapping[str, Mapping[int, tuple[Alternative, ...]]] = {
    "max_num_seqs": {LOWER: CAPACITY_DOWN, RAISE: (*KV_SQUEEZE, *STEP_SLOWER)},
    "max_num_batched_tokens": {LOWER: CAPACITY_DOWN, RAISE: STEP_SLOWER},
    "max_waiting_requests": _ADMISSION,
    "max_concurrency_per_tenant": _ADMISSION,
    "num_gpu_blocks": _KV,
    "gpu_memory_utilization": _KV,
    "kv_cache_memory_bytes": _KV,
    "num_usable_gpu_blocks": _KV,
    "block_size": {LOWER: KV_SQUEEZE, RAISE: KV_SQUEEZE},
    "enable_prefix_caching": {LOWER: PREFIX_LOSS, RAISE: ()},
    "enable_chunked_prefill": {LOWER: STEP_SLOWER, RAISE: CAPACITY_DOWN},
    "step_delay_seconds": {LOWER: (), RAISE: (*SLOW_TARGET, *STEP_SLOWER, *CAPACITY_DOWN)},
    "prefill_seconds_per_token": {LOWER: (), RAISE: (*STEP_SLOWER, *CAPACITY_DOWN)},
    TargetChange.REMOVED: {LOWER: CAPACITY_DOWN},
    TargetChange.ADDED: {RAISE: (*COLD_REPLICAS, (COLD_ITL,))},
    TargetChange.RESTARTED: {RAISE: ((HIT_SKEW,), *SLOW_TARGET, (COLD_ITL,))},
    "structured_output_truncation_share": {LOWER: (), RAISE: ((TRUNCATED,),)},
}
#: The changes that are a cause's occasion, not its fix, by cause (see the module docstring).
OCCASIONS: Mapping[Cause | None, frozenset[str]] = {
    Cause.COLD_START: frozenset({TargetChange.ADDED, TargetChange.RESTARTED}),
}
_BOOLEANS = {"true": RAISE, "false": LOWER}


def _number(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def direction(event: ChangeEvent) -> int | None:
    """``RAISE`` or ``LOWER`` from the event's before and after (numbers, or a switch
    turned on or off); ``None`` when they do not say."""
    before, after = event.before.strip().lower(), event.after.strip().lower()
    if before in _BOOLEANS and after in _BOOLEANS:
        return _BOOLEANS[after]
    a, b = _number(before), _number(after)
    if a is None or b is None or a == b:
        return None
    return RAISE if b > a else LOWER


def footprint(event: ChangeEvent) -> tuple[Alternative, ...]:
    """What ``event`` would move (see the module docstring), each alternative with its
    guards."""
    if event.kind is ChangeKind.TRAFFIC:
        return TRAFFIC_SHAPE
    table = FOOTPRINTS.get(event.subject)
    if table is None:
        chosen: tuple[Alternative, ...] = GENERIC
    elif event.kind is ChangeKind.TARGET:
        chosen = next(iter(table.values()))
    else:
        way = direction(event)
        chosen = (
            table.get(way, ()) if way is not None else tuple(a for v in table.values() for a in v)
        )
    return tuple(dict.fromkeys((*alternative, *GUARDS) for alternative in chosen))


def is_circumstance(event: ChangeEvent, top_cause: Cause | None = None) -> bool:
    """The traffic mix, a drill fault (:data:`CIRCUMSTANCES`), and the occasion of
    ``top_cause`` (:data:`OCCASIONS`: a scale-out while cold-start leads)."""
    if event.kind is ChangeKind.TARGET and event.subject in OCCASIONS.get(top_cause, ()):
        return True
    return event.kind is ChangeKind.TRAFFIC or (
        event.kind is ChangeKind.KNOB and event.subject in CIRCUMSTANCES
    )


def onset_span(incident: TimeWindow, baseline: TimeWindow) -> float:
    """How wide the onset's span is: from the baseline's end to the incident's start, at
    least :data:`MIN_SPAN_SHARE` of the baseline."""
    gap = incident.start_seconds - baseline.end_seconds
    return max(gap, MIN_SPAN_SHARE * baseline.duration_seconds)


def changes_window(incident: TimeWindow, baseline: TimeWindow) -> tuple[float, float]:
    """The changes triage reads: from the baseline's start (or the earliest a change still
    scores for timing, if earlier) to the incident's end."""
    earliest = incident.start_seconds - ZERO_SPANS * onset_span(incident, baseline)
    return min(baseline.start_seconds, earliest), incident.end_seconds


def timing(group: ChangeGroup, incident: TimeWindow, baseline: TimeWindow) -> Reason:
    """The timing ramp of ``group``: its lead (seconds from its first event to the incident's
    start) through ``[ZERO_SPANS, FULL_SPANS] × span`` backwards, cut at the baseline's start;
    after the incident's start, 0."""
    span = onset_span(incident, baseline)
    lead = incident.start_seconds - group.first_seconds
    zero = min(ZERO_SPANS * span, incident.start_seconds - baseline.start_seconds)
    full = min(FULL_SPANS * span, zero)
    sub = 0.0 if lead < 0 or lead >= zero else ramp(-lead, -zero, -full)
    return Reason(
        K.CHANGE, "seconds before the onset", _scope(group), "incident", lead, zero, full, sub
    )


def _scope(group: ChangeGroup) -> str:
    return short_targets(group.targets) if group.targets else FLEET


def _read(rows: Mapping[EvidenceKey, EvidenceRow], signal: Signal, group: ChangeGroup) -> Reason:
    found = reason_of(
        rows, signal.key, signal.uses, signal.lo, signal.hi, falls=signal.falls,
        is_required=not signal.inverse,
    )  # fmt: skip
    if signal.scoped and found.scope not in (FLEET, *group.targets):
        return replace(found, what=f"{found.what.strip()} (another replica)", sub_score=0.0)
    if signal.inverse:
        sub = UNKNOWN_GUARD if math.isnan(found.sub_score) else 1.0 - found.sub_score
        return replace(found, what=f"steady: {found.what.strip()}", lo=found.hi, hi=found.lo,
                       sub_score=sub)  # fmt: skip
    return found


def _explains(
    rows: Mapping[EvidenceKey, EvidenceRow],
    alternatives: Iterable[Alternative],
    group: ChangeGroup,
) -> tuple[float, tuple[Reason, ...]]:
    """The best alternative's product and its reasons; ``nan`` when no alternative has a
    signal that could be read."""
    best: tuple[float, tuple[Reason, ...]] = (math.nan, ())
    for alternative in alternatives:
        reasons = tuple(_read(rows, s, group) for s in alternative)
        moved = [r for r, s in zip(reasons, alternative, strict=True) if not s.inverse]
        if all(math.isnan(r.sub_score) for r in moved):
            continue
        score = math.prod(0.0 if math.isnan(r.sub_score) else r.sub_score for r in reasons)
        if math.isnan(best[0]) or score > best[0]:
            best = (score, reasons)
    return best


def change_hypothesis(
    group: ChangeGroup,
    rows: Mapping[EvidenceKey, EvidenceRow],
    incident: TimeWindow,
    baseline: TimeWindow,
    top_cause_score: float,
    top_cause: Cause | None = None,
) -> Hypothesis:
    """``group`` scored (see the module docstring); the hypothesis carries the group."""
    when = timing(group, incident, baseline)
    actions = [e for e in group.events if not is_circumstance(e, top_cause)]
    others = [e for e in group.events if is_circumstance(e, top_cause)]
    by_action = _explains(rows, (a for e in actions for a in footprint(e)), group)
    by_other = _explains(rows, (a for e in others for a in footprint(e)), group)
    residual = 1.0 - max(0.0, min(1.0, top_cause_score))
    candidates: list[tuple[float, tuple[Reason, ...], str]] = []
    if not math.isnan(by_action[0]):
        candidates.append((by_action[0], by_action[1], ""))
    if not math.isnan(by_other[0]):
        note = f"a circumstance: counts for what the causes leave (× 1 - {top_cause_score:.2f})"
        candidates.append((by_other[0] * residual, by_other[1], note))
    described = group.describe()
    if not candidates:
        return Hypothesis(
            Cause.CHANGE, 0.0, (when,), _scope(group), False,
            f"{described}; not enough data: none of what it would move was measured", group,
        )  # fmt: skip
    explains, reasons, note = max(candidates, key=lambda c: c[0])
    text = f"{described}; {note}" if note else described
    score = min(1.0, max(0.0, when.sub_score * explains))
    return Hypothesis(Cause.CHANGE, score, (when, *reasons), _scope(group), True, text, group)


def is_action(hypothesis: Hypothesis) -> bool:
    """A change hypothesis whose group holds something someone did (not only circumstances)."""
    group = hypothesis.change
    return group is not None and any(not is_circumstance(e) for e in group.events)


def change_hypotheses(
    data: TriageInput,
    rows: Mapping[EvidenceKey, EvidenceRow],
    top_cause_score: float,
    top_cause: Cause | None = None,
) -> list[Hypothesis]:
    """One hypothesis per group of changes that lines up with the onset (timing above 0);
    ``top_cause``: the cause that leads, whose occasions count as circumstances."""
    out = []
    for group in group_changes(data.changes):
        if timing(group, data.incident, data.baseline).sub_score <= 0:
            continue
        out.append(
            change_hypothesis(group, rows, data.incident, data.baseline, top_cause_score, top_cause)
        )
    return out


def ranked(causes: Sequence[Hypothesis], changes: Sequence[Hypothesis]) -> tuple[Hypothesis, ...]:
    """Causes and changes, highest score first; on a tie an action before the causes (in
    :class:`Cause` order), a circumstance after them, and the later change first."""
    order = {cause: i for i, cause in enumerate(Cause)}

    def key(h: Hypothesis) -> tuple[float, int, float]:
        if h.change is None:
            return (-h.score, 1, float(order[h.cause]))
        return (-h.score, 0 if is_action(h) else 2, -h.change.first_seconds)

    return tuple(sorted([*causes, *changes], key=key))
