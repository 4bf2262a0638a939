"""Synthetic triage inputs shaped like the six incident scenarios (docs/loadgen.md's measured
figures for the ``tiny`` preset), a clean run and mixed incidents; shared by the triage,
report and docs tests."""

from __future__ import annotations

from dataclasses import replace

from alerts import Cause
from alerts.triage import (
    Measure,
    Measurements,
    SlowRequest,
    Source,
    TimeWindow,
    TriageInput,
    WindowPair,
)
from collectors.store.change_records import ChangeEvent, ChangeKind

INCIDENT = TimeWindow(1_800_000_600.0, 1_800_000_900.0)
BASELINE = TimeWindow(1_800_000_000.0, 1_800_000_600.0)

_SOURCES = {
    "num_requests": Source.COUNTER,
    "arrival_rate_per_second": Source.REQUEST_RECORDS,
    "ttft_mean_seconds": Source.REQUEST_RECORDS,
    "queue_mean_seconds": Source.REQUEST_RECORDS,
    "prefill_mean_seconds": Source.REQUEST_RECORDS,
    "ttft_p95_seconds": Source.HISTOGRAM,
    "itl_p99_seconds": Source.HISTOGRAM,
    "e2e_p50_seconds": Source.REQUEST_RECORDS,
    "e2e_mean_seconds": Source.HISTOGRAM,
    "itl_mean_seconds": Source.HISTOGRAM,
    "prompt_tokens_mean": Source.HISTOGRAM,
    "prompt_tokens_p95": Source.HISTOGRAM,
    "output_tokens_mean": Source.HISTOGRAM,
    "num_preemptions": Source.COUNTER,
    "kv_usage_max": Source.GAUGE,
    "prefix_queries": Source.COUNTER,
    "prefix_hits": Source.COUNTER,
    "waiting_mean": Source.GAUGE,
    "rejected_share": Source.COUNTER,
    "lora_loads": Source.COUNTER,
    "lora_load_seconds": Source.COUNTER,
    "start_time_seconds": Source.GAUGE,
    "structured_finished": Source.COUNTER,
    "structured_length": Source.COUNTER,
    "running_mean": Source.GAUGE,
    "gpu_utilization_mean": Source.GAUGE,
    "spec_draft_tokens": Source.COUNTER,
    "spec_accepted_tokens": Source.COUNTER,
    "spec_accept_rate_mean": Source.GAUGE,
    "grammar_compile_seconds": Source.HISTOGRAM,
    "client_ttft_p95_seconds": Source.HISTOGRAM,
}

#: A healthy tiny replica at 4 req/s, chat prompts of 32 tokens, 48 output tokens.
HEALTHY = {
    "num_requests": 80.0,
    "arrival_rate_per_second": 4.0,
    "ttft_mean_seconds": 0.05,
    "queue_mean_seconds": 0.002,
    "prefill_mean_seconds": 0.02,
    "ttft_p95_seconds": 0.08,
    "itl_p99_seconds": 0.070,
    "e2e_p50_seconds": 0.5,
    "prompt_tokens_p95": 32.0,
    "output_tokens_mean": 48.0,
    "num_preemptions": 0.0,
    "kv_usage_max": 0.3,
    "prefix_queries": 2000.0,
    "prefix_hits": 1600.0,
    "waiting_mean": 0.1,
    "rejected_share": 0.0,
    "structured_finished": 20.0,
    "structured_length": 1.0,
    "running_mean": 2.0,
}


def change(
    target: str,
    subject: str,
    before: str = "",
    after: str = "",
    *,
    lead_seconds: float = 30.0,
    kind: ChangeKind = ChangeKind.KNOB,
    source: str = "tailwatch:knob_changes_total",
) -> ChangeEvent:
    """A change ``lead_seconds`` before the incident window's start (a minute's onset span:
    a tenth of the baseline; up to two spans before the start it lines up in full)."""
    at = INCIDENT.start_seconds - lead_seconds
    return ChangeEvent(at, target, kind, subject, before, after, source)


def measurements(base: dict[str, float] | None = None, **changes: float) -> Measurements:
    values = {**(HEALTHY if base is None else base), **changes}
    return Measurements(**{k: Measure(v, _SOURCES[k]) for k, v in values.items()})


def single(incident: Measurements, baseline: Measurements | None = None, **kw) -> TriageInput:
    """One replica ``r0``: the fleet is that replica."""
    pair = WindowPair(incident, baseline or measurements())
    return TriageInput(INCIDENT, BASELINE, pair, {"r0": pair}, **kw)


def fleet_of(replicas: dict[str, WindowPair], **kw) -> TriageInput:
    """A fleet whose totals are the replicas' (sums, means of means, max KV)."""

    def total(side: str) -> Measurements:
        ms = [getattr(p, side) for p in replicas.values()]
        out = {}
        for name in _SOURCES:
            values = [getattr(m, name).value for m in ms]
            if name in (
                "num_requests",
                "arrival_rate_per_second",
                "num_preemptions",
                "prefix_queries",
                "prefix_hits",
                "waiting_mean",
                "structured_finished",
                "structured_length",
                "running_mean",
                "spec_draft_tokens",
                "spec_accepted_tokens",
            ):
                out[name] = sum(values)
            elif name in (
                "kv_usage_max",
                "itl_p99_seconds",
                "prompt_tokens_p95",
                "ttft_p95_seconds",
                "client_ttft_p95_seconds",
            ):
                out[name] = max(values)
            else:
                out[name] = sum(values) / len(values)
        return measurements(out)

    fleet = WindowPair(total("incident"), total("baseline"))
    return TriageInput(INCIDENT, BASELINE, fleet, replicas, **kw)


def long_prompt_surge() -> TriageInput:
    return single(
        measurements(
            itl_p99_seconds=0.1949,
            prompt_tokens_p95=480.0,
            output_tokens_mean=30.0,
            arrival_rate_per_second=7.0,
            ttft_mean_seconds=0.12,
            queue_mean_seconds=0.01,
        )
    )


def kv_pressure() -> TriageInput:
    base = measurements(output_tokens_mean=128.0, arrival_rate_per_second=6.0)
    inc = measurements(
        {k: v.value for k, v in vars(base).items()},
        num_requests=30.0,
        num_preemptions=22.0,
        kv_usage_max=1.0,
        ttft_mean_seconds=0.6,
        queue_mean_seconds=0.3,
        itl_p99_seconds=0.1,
        waiting_mean=4.0,
    )
    # NOTE: the drill's squeeze, recorded as a knob change just before the onset: a
    # circumstance (it stands for another process taking the memory)
    squeeze = change("r0", "num_usable_gpu_blocks", "256", "24")
    return single(inc, base, changes=(squeeze,))


def prefix_break() -> TriageInput:
    return single(measurements(prefix_hits=0.0, prefill_mean_seconds=0.05, ttft_mean_seconds=0.08))


def overload() -> TriageInput:
    return single(
        measurements(
            arrival_rate_per_second=25.0,
            ttft_mean_seconds=2.0,
            queue_mean_seconds=1.72,
            waiting_mean=30.0,
            itl_p99_seconds=0.09,
        ),
        measurements(arrival_rate_per_second=2.0, queue_mean_seconds=0.002),
    )


def scale_out_round_robin() -> TriageInput:
    old_base = measurements(prefix_queries=1000.0, prefix_hits=730.0)
    cold_base = measurements(prefix_queries=0.0, prefix_hits=0.0, num_requests=0.0)
    old_inc = measurements(prefix_queries=500.0, prefix_hits=360.0)
    new_inc = measurements(prefix_queries=500.0, prefix_hits=170.0, e2e_p50_seconds=0.6)
    return fleet_of(
        {
            "r0": WindowPair(old_inc, old_base),
            "r1": WindowPair(old_inc, old_base),
            "r2": WindowPair(new_inc, cold_base),
            "r3": WindowPair(new_inc, cold_base),
        }
    )


COARSE_E2E = "histogram too coarse (rank in bucket [0, 0.3]); exact values of 40 request records"


def slow_replica() -> TriageInput:
    # NOTE: the fast replica's e2e p50 comes from the records, as gather reads it for `tiny`
    fast = replace(
        measurements(e2e_mean_seconds=0.55),
        e2e_p50_seconds=Measure(0.5, Source.REQUEST_RECORDS, COARSE_E2E),
    )
    slow = measurements(
        e2e_p50_seconds=5.45,
        e2e_mean_seconds=5.6,
        waiting_mean=6.0,
        queue_mean_seconds=1.0,
        ttft_mean_seconds=1.2,
    )
    return fleet_of(
        {
            "r0": WindowPair(fast, measurements(e2e_p50_seconds=0.51, e2e_mean_seconds=0.56)),
            "r1": WindowPair(slow, fast),
        },
        slow_requests=(
            SlowRequest(
                "a" * 32, e2e_seconds=6.1, target="r1", sources=frozenset({Source.EXEMPLARS})
            ),
            SlowRequest(
                "a" * 32,
                e2e_seconds=6.1,
                ttft_seconds=1.4,
                queue_seconds=1.2,
                request_id="cmpl-1",
                target="r1",
                sources=frozenset({Source.REQUEST_RECORDS}),
            ),
            SlowRequest(
                "b" * 32,
                e2e_seconds=5.9,
                request_id="cmpl-2",
                target="r1",
                sources=frozenset({Source.REQUEST_RECORDS}),
            ),
        ),
    )


def clean() -> TriageInput:
    return single(
        measurements(itl_p99_seconds=0.072, prefix_hits=1580.0, arrival_rate_per_second=4.2)
    )


def busy_idle_gpu() -> TriageInput:
    """The busy-idle-gpu drill's figures at its page (two replicas summed): steps 2.8x as
    long (a memory-bound step slowed) while the batch, pinned at max_num_seqs, grew 1.3x;
    arrivals and prompts steady; requests queue; NVML reads the GPU busy."""
    base = measurements(
        itl_mean_seconds=0.0066, running_mean=3.9, gpu_utilization_mean=0.9,
        prompt_tokens_mean=64.0,
    )  # fmt: skip
    inc = measurements(
        itl_mean_seconds=0.0186, running_mean=5.0, gpu_utilization_mean=0.99,
        prompt_tokens_mean=64.0, itl_p99_seconds=0.18, arrival_rate_per_second=3.8,
        ttft_mean_seconds=3.78, queue_mean_seconds=3.77, waiting_mean=30.0,
    )  # fmt: skip
    return single(inc, base)


def spec_not_paying() -> TriageInput:
    """The spec-not-paying drill's figures at its page: the draft acceptance rate fell from
    0.45 to 0.014; each request needs three times the steps, so the batch grew 6.5x and its
    verification made the steps 3x as long."""
    base = measurements(
        itl_mean_seconds=0.0107, running_mean=10.5, spec_draft_tokens=4000.0,
        spec_accepted_tokens=1780.0,
    )  # fmt: skip
    inc = measurements(
        itl_mean_seconds=0.0339, running_mean=68.0, spec_draft_tokens=9000.0,
        spec_accepted_tokens=128.0, itl_p99_seconds=0.14, ttft_mean_seconds=0.11,
        queue_mean_seconds=0.004,
    )  # fmt: skip
    return single(inc, base)


def client_gap() -> TriageInput:
    """The client-gap drill's figures at its page: a gateway that added 10 ms to every first
    token now adds 250 ms; the engines' TTFT p95 stayed at 19 ms, the clients' went from
    38 ms to 488 ms (the bucket 0.25..0.5 s interpolated)."""
    base = measurements(ttft_p95_seconds=0.0188, client_ttft_p95_seconds=0.0377)
    inc = measurements(ttft_p95_seconds=0.0187, client_ttft_p95_seconds=0.4875)
    return single(inc, base)


def with_slow(data: TriageInput, *requests: SlowRequest) -> TriageInput:
    return replace(data, slow_requests=requests)


#: scenario → (input, the cause it must rank first)
SCENARIOS = {
    "long-prompt-surge": (long_prompt_surge, Cause.PREFILL_INTERFERENCE),
    "kv-pressure": (kv_pressure, Cause.KV_EXHAUSTION),
    "prefix-break": (prefix_break, Cause.PREFIX_BREAK),
    "overload": (overload, Cause.OVERLOAD),
    "scale-out-round-robin": (scale_out_round_robin, Cause.PREFIX_SCATTER),
    "slow-replica": (slow_replica, Cause.SLOW_REPLICA),
    "busy-idle-gpu": (busy_idle_gpu, Cause.BUSY_IDLE_GPU),
    "spec-not-paying": (spec_not_paying, Cause.SPEC_NOT_PAYING),
    "client-gap": (client_gap, Cause.CLIENT_GAP),
}
