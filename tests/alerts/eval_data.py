"""Synthetic scrapes for the evaluator's tests: a fleet of replicas whose behaviour per scrape
interval is a :class:`Conditions` chosen by the test (a function of time and replica), turned
into cumulative counters and histograms as an engine's ``/metrics`` would show them, and kept
in a :class:`FakeMetricsReader`. Simulated hours take no wall time beyond building them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from collectors import canonical as c
from collectors.canonical import CanonicalHistogram, CanonicalSample, Kind
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader

START = 1_800_000_000.0
INTERVAL = 15.0
LATENCY_BOUNDS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, math.inf)
ITL_BOUNDS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, math.inf)
#: A latency mix: (seconds, share of the interval's requests).
Mix = tuple[tuple[float, float], ...]


@dataclass(frozen=True)
class Conditions:
    """One replica over one scrape interval (healthy defaults)."""

    requests: int = 100  # finished per interval
    error_share: float = 0.0  # of them, finished_reason="error"
    ttft: Mix = ((0.08, 1.0),)
    itl: Mix = ((0.02, 1.0),)
    e2e: Mix = ((0.8, 1.0),)
    queue_share: float = 0.05  # queue time as a share of TTFT
    waiting: float = 1.0
    kv_usage: float = 0.4
    preemptions: int = 0  # per interval
    prefix_queries: int = 1000
    prefix_hit_share: float = 0.6
    up: bool = True
    gpu_ecc_uncorrected: int = 0  # new per interval
    gpu_throttle: str = ""  # an active throttle reason, "" for none
    structured: int = 20  # structured-output requests finished per interval
    structured_length_share: float = 0.02  # of them, cut at max_tokens (finished "length")
    spec_draft_tokens: int = 400  # speculative draft tokens proposed per interval
    spec_acceptance: float = 0.7  # of them, accepted
    #: a gateway in front adds this to every first token the clients see (None: no gateway,
    #: no client_ttft_seconds series)
    gateway_delay_seconds: float | None = None


Behaviour = Callable[[float, int], Conditions]


def healthy(t: float, replica: int) -> Conditions:
    return Conditions()


@dataclass
class _Replica:
    target: str
    counts: dict[str, list[float]] = field(default_factory=dict)
    sums: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)

    def observe(self, family: str, bounds: tuple[float, ...], mix: Mix, n: int) -> None:
        counts = self.counts.setdefault(family, [0.0] * len(bounds))
        for value, share in mix:
            k = round(n * share)
            for i, bound in enumerate(bounds):
                if value <= bound:
                    counts[i] += k
            self.sums[family] = self.sums.get(family, 0.0) + k * value

    def add(self, name: str, amount: float) -> None:
        self.counters[name] = self.counters.get(name, 0.0) + amount


def _labels(target: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"model": "m", "target": target, **extra}.items()))


def _scrape(replica: _Replica, t: float, cond: Conditions, gpu: bool) -> ScrapeRecord:
    target = replica.target
    if not cond.up:
        return ScrapeRecord(target, t, is_up=False, error="connection refused")
    n = cond.requests
    replica.observe(c.TTFT_SECONDS, LATENCY_BOUNDS, cond.ttft, n)
    if cond.gateway_delay_seconds is not None:
        delayed = tuple((v + cond.gateway_delay_seconds, s) for v, s in cond.ttft)
        replica.observe(c.CLIENT_TTFT_SECONDS, LATENCY_BOUNDS, delayed, n)
    replica.observe(c.ITL_SECONDS, ITL_BOUNDS, cond.itl, n * 20)
    replica.observe(c.E2E_SECONDS, LATENCY_BOUNDS, cond.e2e, n)
    queue = tuple((v * cond.queue_share, s) for v, s in cond.ttft)
    replica.observe(c.QUEUE_SECONDS, LATENCY_BOUNDS, queue, n)
    errors = round(n * cond.error_share)
    replica.add("stop", n - errors)
    replica.add("error", errors)
    replica.add("preemptions", cond.preemptions)
    replica.add("queries", cond.prefix_queries)
    replica.add("hits", round(cond.prefix_queries * cond.prefix_hit_share))
    replica.add("ecc", cond.gpu_ecc_uncorrected)
    cut = round(cond.structured * cond.structured_length_share)
    replica.add("structured_length", cut)
    replica.add("structured_stop", cond.structured - cut)
    replica.add("spec_drafts", cond.spec_draft_tokens)
    replica.add("spec_accepted", round(cond.spec_draft_tokens * cond.spec_acceptance))
    lab = _labels(target)
    histograms = tuple(
        CanonicalHistogram(
            family,
            lab,
            bounds,
            tuple(replica.counts[family]),
            replica.sums.get(family, 0.0),
            replica.counts[family][-1],
        )
        for family, bounds in (
            (c.TTFT_SECONDS, LATENCY_BOUNDS),
            (c.ITL_SECONDS, ITL_BOUNDS),
            (c.E2E_SECONDS, LATENCY_BOUNDS),
            (c.QUEUE_SECONDS, LATENCY_BOUNDS),
            (c.CLIENT_TTFT_SECONDS, LATENCY_BOUNDS),
        )
        if family in replica.counts
    )
    counter, gauge = Kind.COUNTER, Kind.GAUGE
    samples = [
        CanonicalSample(
            c.REQUESTS_TOTAL,
            _labels(target, finished_reason="stop"),
            replica.counters["stop"],
            counter,
        ),
        CanonicalSample(
            c.REQUESTS_TOTAL,
            _labels(target, finished_reason="error"),
            replica.counters["error"],
            counter,
        ),
        *(
            CanonicalSample(
                c.STRUCTURED_OUTPUT_FINISHED_TOTAL,
                _labels(target, finished_reason=reason),
                replica.counters[f"structured_{reason}"],
                counter,
            )
            for reason in ("stop", "length")
        ),
        CanonicalSample(c.PREEMPTIONS_TOTAL, lab, replica.counters["preemptions"], counter),
        CanonicalSample(
            c.SPEC_DECODE_DRAFT_TOKENS_TOTAL, lab, replica.counters["spec_drafts"], counter
        ),
        CanonicalSample(
            c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL, lab, replica.counters["spec_accepted"], counter
        ),
        CanonicalSample(c.PREFIX_CACHE_QUERIES_TOTAL, lab, replica.counters["queries"], counter),
        CanonicalSample(c.PREFIX_CACHE_HITS_TOTAL, lab, replica.counters["hits"], counter),
        CanonicalSample(c.REQUESTS_WAITING, lab, cond.waiting, gauge),
        CanonicalSample(c.REQUESTS_RUNNING, lab, 4.0, gauge),
        CanonicalSample(c.KV_CACHE_USAGE, lab, cond.kv_usage, gauge),
    ]
    if gpu:
        gpu_lab = {"target": target, "gpu": "0", "uuid": f"GPU-{target}"}
        samples.append(
            CanonicalSample(
                c.GPU_ECC_ERRORS_TOTAL,
                tuple(
                    sorted({**gpu_lab, "error_type": "uncorrected", "counter": "volatile"}.items())
                ),
                replica.counters["ecc"],
                counter,
            )
        )
        for reason in ("hw_thermal_slowdown", "sw_power_cap"):
            samples.append(
                CanonicalSample(
                    c.GPU_THROTTLE_ACTIVE,
                    tuple(sorted({**gpu_lab, "reason": reason}.items())),
                    1.0 if cond.gpu_throttle == reason else 0.0,
                    gauge,
                )
            )
    return ScrapeRecord(target, t, tuple(samples), histograms)


def target(replica: int) -> str:
    return f"r{replica}"


def build(
    behaviour: Behaviour,
    *,
    replicas: int = 3,
    hours: float = 1.0,
    start: float = START,
    interval: float = INTERVAL,
    gpu: bool = False,
    reader: FakeMetricsReader | None = None,
    omit: frozenset[str] = frozenset(),
) -> FakeMetricsReader:
    """A reader holding ``hours`` of scrapes every ``interval`` seconds from ``start`` (the
    first scrape at ``start``), each replica's interval ending at ``t`` behaving as
    ``behaviour(t, replica)``; families in ``omit`` are left out (a metric-name drift)."""
    reader = reader or FakeMetricsReader()
    fleet = [_Replica(target(i)) for i in range(replicas)]
    steps = int(hours * 3600 / interval)
    records = []
    for k in range(steps + 1):
        t = start + k * interval
        for i, replica in enumerate(fleet):
            record = _scrape(replica, t, behaviour(t, i), gpu)
            if omit:
                record = replace(
                    record,
                    samples=tuple(s for s in record.samples if s.family not in omit),
                    histograms=tuple(h for h in record.histograms if h.family not in omit),
                )
            records.append(record)
    reader.write_scrapes(records)
    return reader
