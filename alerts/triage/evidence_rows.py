"""The rows of the evidence table: keys, the row type, and how a row's change is computed.

Fractions (queue share, hit rate, KV usage, 429 share, preemptions per request) change by
*difference*; times, lengths and rates by *ratio*. NaN means unknown throughout.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from alerts.triage.data import NAN, Measure, Measurements, Source

FLEET = "fleet"


class EvidenceKey(enum.StrEnum):
    """The rows of the evidence table (``docs/alerts.md``, "Triage", lists each)."""

    TTFT_MEAN = "ttft_mean"
    QUEUE_MEAN = "queue_mean"
    PREFILL_MEAN = "prefill_mean"
    QUEUE_SHARE = "queue_share"
    LEAST_QUEUE_SHARE = "least_queue_share"
    TTFT_P95 = "ttft_p95"
    ITL_P99 = "itl_p99"
    PROMPT_P95 = "prompt_p95"
    PROMPT_MEAN = "prompt_mean"
    OUTPUT_MEAN = "output_mean"
    ARRIVAL_RATE = "arrival_rate"
    PREEMPTIONS_PER_REQUEST = "preemptions_per_request"
    KV_USAGE_MAX = "kv_usage_max"
    PREFIX_HIT_RATE = "prefix_hit_rate"
    STEADY_HIT_RATE = "steady_hit_rate"
    NEW_REPLICA_QUERY_SHARE = "new_replica_query_share"
    WAITING_MEAN = "waiting_mean"
    REJECTED_SHARE = "rejected_share"
    E2E_P50_SKEW = "e2e_p50_skew"
    E2E_MEAN_SKEW = "e2e_mean_skew"
    ITL_MEAN_SKEW = "itl_mean_skew"
    WAITING_SKEW = "waiting_skew"
    HIT_RATE_SKEW = "hit_rate_skew"
    CHANGE = "change"  # a group of changes made together (alerts.triage.change_groups)
    NOT_ENOUGH_DATA = "not_enough_data"
    LORA_LOADS_PER_REQUEST = "lora_loads_per_request"
    LORA_LOAD_SHARE = "lora_load_share"
    LORA_LOAD_TIME_SHARE = "lora_load_time_share"
    COLD_ITL_RATIO = "cold_itl_ratio"
    COLD_TTFT_RATIO = "cold_ttft_ratio"
    STRUCTURED_LENGTH_SHARE = "structured_length_share"
    TENANT_PROMPT_SHARE = "tenant_prompt_share"  # the noisiest tenant's (alerts.triage.tenants)
    TENANT_QUEUE_SHARE = "tenant_queue_share"
    OTHER_TENANTS_TTFT = "other_tenants_ttft"
    ITL_MEAN = "itl_mean"  # the fleet's mean token gap: its step time
    RUNNING_MEAN = "running_mean"  # the batch: requests running, mean
    GPU_UTILIZATION = "gpu_utilization"  # NVML's busy fraction, mean over the fleet's GPUs
    SPEC_ACCEPTANCE = "spec_acceptance"  # accepted draft tokens over draft tokens
    ITL_PER_RUNNING = "itl_per_running"  # the token gap per request in the batch
    COLD_COMPILE_SHARE = "cold_compile_share"
    E2E_MEAN = "e2e_mean"  # the fleet's mean request latency
    CLIENT_TTFT_P95 = "client_ttft_p95"  # first tokens as the clients saw them (a gateway's)
    CLIENT_GAP = "client_gap"  # client TTFT p95 minus the engines' TTFT p95 (seconds)
    CLIENT_GAP_SHARE = "client_gap_share"  # that gap over the client TTFT p95 (0..1)


class ChangeKind(enum.StrEnum):
    RATIO = "ratio"  # incident / baseline
    DIFFERENCE = "difference"  # incident - baseline


@dataclass(frozen=True)
class EvidenceRow:
    key: EvidenceKey
    what: str
    scope: str  # "fleet" or the target the row singles out
    incident: float
    baseline: float
    change: float  # NaN when either side is unknown (or a ratio over a zero baseline)
    change_kind: ChangeKind
    source: Source
    note: str = ""

    @property
    def is_known(self) -> bool:
        return math.isfinite(self.incident)


def finite(x: float) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _change(incident: float, baseline: float, kind: ChangeKind) -> float:
    if not (finite(incident) and finite(baseline)):
        return NAN
    if kind is ChangeKind.DIFFERENCE:
        return incident - baseline
    return incident / baseline if baseline > 0 else NAN


def make_row(
    key: EvidenceKey,
    what: str,
    incident: Measure,
    baseline: Measure,
    kind: ChangeKind,
    scope: str = FLEET,
    note: str = "",
) -> EvidenceRow:
    source = incident.source if incident.source is not Source.NONE else baseline.source
    notes = [n for n in (note, incident.note) if n]
    return EvidenceRow(
        key,
        what,
        scope,
        incident.value,
        baseline.value,
        _change(incident.value, baseline.value, kind),
        kind,
        source,
        "; ".join(dict.fromkeys(notes)),
    )


def ratio(num: Measure, den: Measure) -> Measure:
    """``num / den`` with ``num``'s source; unknown when either is, or ``den`` is 0."""
    if not (num.is_known and den.is_known) or den.value <= 0:
        return Measure(NAN, num.source, num.note)
    return Measure(num.value / den.value, num.source, num.note)


def exact_sum(values: Iterable[float]) -> float:
    """The sum of finite ``values`` rounded once, so the same in any order; +-inf when it
    overflows.

    ``sum`` rounds at every step (``1e308 + 1e308 - 1e308`` is inf in that order, 1e308 in
    another), and ``math.fsum`` still raises on an intermediate overflow in some orders
    only: where it does, the sum is taken exactly as fractions."""
    values = list(values)
    try:
        return math.fsum(values)
    except OverflowError:
        exact = sum(map(Fraction, values), Fraction(0))
        try:
            return float(exact)
        except OverflowError:
            return math.inf if exact > 0 else -math.inf


def total(measures: Iterable[Measure]) -> Measure:
    """The sum of the known measures (:func:`exact_sum`: the order they come in never
    changes it), with the first one's source and note."""
    known = [m for m in measures if m.is_known]
    if not known:
        return Measure()
    return Measure(exact_sum(m.value for m in known), known[0].source, known[0].note)


def queue_share(m: Measurements) -> Measure:
    return ratio(m.queue_mean_seconds, m.ttft_mean_seconds)


def hit_rate(m: Measurements) -> Measure:
    return ratio(m.prefix_hits, m.prefix_queries)


def preemptions_per_request(m: Measurements) -> Measure:
    return ratio(m.num_preemptions, m.num_requests)


def structured_length_share(m: Measurements) -> Measure:
    """Structured outputs cut at ``max_tokens`` over those that finished (0..1)."""
    return ratio(m.structured_length, m.structured_finished)


def spec_acceptance(m: Measurements) -> Measure:
    """Accepted over draft tokens (vLLM's counters); SGLang's acceptance gauge without them."""
    counted = ratio(m.spec_accepted_tokens, m.spec_draft_tokens)
    gauge = m.spec_accept_rate_mean
    return gauge if gauge.is_known and not counted.is_known else counted
