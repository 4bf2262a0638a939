"""Evidence rows about LoRA adapters: how often a request waited for its adapter to load,
and how much of the first-token time went to loading.

A fleet whose adapters in use fit its loaded set (``max_cpu_loras``) loads each once and
then serves them warm: loads per request near 0. When more distinct adapters are in use
than stay loaded, the least recently used is evicted for each cold one and loaded again
the next time it is asked for (thrash): loads per request climb, and the load seconds, on
the critical path of the request that needed the adapter and of the batch it stalls,
become a share of TTFT. A load also stalls the replica that makes it, every request beside
it waiting: loads that take a share of the replicas' time take that share of their capacity,
and the queue they build hides them in TTFT (its mean grows faster than the loads), so
the share of the replicas' time is a row of its own. All are fleet sums (the load counters are per adapter and per
replica: ``tailwatch:lora_loads_total``, ``tailwatch:lora_load_seconds_total``).
"""

from __future__ import annotations

from alerts.triage.data import Measure, Measurements, TriageInput
from alerts.triage.evidence_rows import ChangeKind, EvidenceKey, EvidenceRow, make_row, ratio


def loads_per_request(m: Measurements) -> Measure:
    return ratio(m.lora_loads, m.num_requests)


def load_share_of_ttft(m: Measurements) -> Measure:
    """Seconds spent loading adapters over the seconds spent to first tokens (TTFT mean
    times requests): 0..1 while loads are on the first token's path, which they are for
    the request that waits for its adapter."""
    first_token_seconds = Measure(
        m.ttft_mean_seconds.value * m.num_requests.value, m.ttft_mean_seconds.source
    )
    return ratio(m.lora_load_seconds, first_token_seconds)


def load_share_of_time(data: TriageInput, side: str) -> Measure:
    """Seconds spent loading adapters over the seconds the replicas ran in the window
    (``side``: ``"incident"`` or ``"baseline"``): each replica that reports loads counts
    the whole window; without per-replica data the fleet counts as one."""
    window = data.incident if side == "incident" else data.baseline
    loads = getattr(data.fleet, side).lora_load_seconds
    reporting = [p for p in data.replicas.values() if getattr(p, side).lora_load_seconds.is_known]
    replica_seconds = Measure(window.duration_seconds * max(1, len(reporting)), loads.source)
    return ratio(loads, replica_seconds)


def lora_rows(data: TriageInput) -> list[EvidenceRow]:
    inc, base = data.fleet.incident, data.fleet.baseline
    D = ChangeKind.DIFFERENCE
    return [
        make_row(
            EvidenceKey.LORA_LOADS_PER_REQUEST,
            "adapter loads per request",
            loads_per_request(inc),
            loads_per_request(base),
            D,
        ),
        make_row(
            EvidenceKey.LORA_LOAD_SHARE,
            "adapter load seconds, share of TTFT",
            load_share_of_ttft(inc),
            load_share_of_ttft(base),
            D,
        ),
        make_row(
            EvidenceKey.LORA_LOAD_TIME_SHARE,
            "adapter load seconds, share of the replicas' time",
            load_share_of_time(data, "incident"),
            load_share_of_time(data, "baseline"),
            D,
        ),
    ]
