"""A vLLM fleet's history for the scale benchmark (issue 24, item 3), generated as arrays and
written straight into what Prometheus and VictoriaMetrics load: OpenMetrics text for ``promtool
tsdb create-blocks-from openmetrics`` (one file per 2 h block, so promtool parses each once)
and JSON lines for VictoriaMetrics's ``/api/v1/import``.

Each replica exports what a vLLM 0.33 server does for the built-in rules, the Overview and the
SLOs page, under vLLM's names (read from the dialect table) and bucket layouts:
``vllm:time_to_first_token_seconds`` (22 bounds), ``vllm:inter_token_latency_seconds`` (19),
``vllm:e2e_request_latency_seconds`` and ``vllm:request_queue_time_seconds``
(``request_latency``, 21), each with ``_sum`` and ``_count``; ``vllm:request_success_total``
by ``finished_reason`` (stop, length, abort, error); preemptions, prefix-cache queries and
hits, prompt and generation tokens; running, waiting and KV usage; and Prometheus's own ``up``: 108 series a replica.

Healthy traffic is 4 requests/s a replica with a ±15 % diurnal swing and seeded ±5 % noise;
latencies are two point masses (90 % at the typical value, 10 % at 2.5×). Three incidents are
planted, each an hour long, hours apart, each of a kind the built-in rules page on:

- **overload**: every replica's arrivals 2.5×, 10 waiting, queue time 80 % of a TTFT 4× longer
  (``queue-growth``);
- **slow replicas**: 3 % of the replicas (at least one) decode 5× slower (``tail-latency-itl``);
- **KV exhaustion**: 10 % of the replicas (at least one) at 99 % KV usage, preempting 30 a
  minute, their TTFT 3× (``kv-saturation``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from bench.slo_fidelity import ITL_BOUNDS, TTFT_BOUNDS
from collectors import canonical as c
from collectors.dialect_rules import VLLM_RULES

#: vLLM's ``request_latency`` layout (e2e, queue, prefill, decode; reference/engine-metrics.md).
REQUEST_LATENCY_BOUNDS = (
    0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
    240.0, 480.0, 960.0, 1920.0, 7680.0,
)  # fmt: skip
REASONS = ("stop", "length", "abort", "error")
REASON_SHARES = (0.78, 0.2, 0.02, 0.0)
MODEL = "meta-llama/Llama-3.1-8B-Instruct"
JOB = "vllm"
BLOCK_SECONDS = 7200.0
SERIES_PER_REPLICA = (
    sum(len(b) + 3 for b in (TTFT_BOUNDS, ITL_BOUNDS, REQUEST_LATENCY_BOUNDS, REQUEST_LATENCY_BOUNDS))
    + len(REASONS) + 5 + 3 + 1
)  # fmt: skip


def vllm_name(family: str) -> str:
    """The current vLLM name of a canonical family (the table's first plain rule)."""
    return next(r.source for r in VLLM_RULES if r.family == family and not r.flags and not r.match)


@dataclass(frozen=True)
class Incident:
    kind: str
    start: float
    end: float
    replicas: tuple[int, ...]
    #: The built-in rule that must page, and the cause triage must rank first.
    rule: str
    cause: str


@dataclass
class FleetHistory:
    """``replicas`` × ``steps`` scrapes every ``interval`` seconds ending at ``end``."""

    replicas: int
    end: float
    hours: float = 24.0
    interval: float = 60.0
    seed: int = 24_003

    def __post_init__(self) -> None:
        self.steps = int(self.hours * 3600 / self.interval) + 1
        self.start = self.end - (self.steps - 1) * self.interval
        self.times = self.start + self.interval * np.arange(self.steps)
        self.incidents = self._incidents()
        self._build()

    @property
    def samples(self) -> int:
        return self.replicas * SERIES_PER_REPLICA * self.steps

    def instance(self, r: int) -> str:
        return f"replica-{r:03d}:8000"

    def _incidents(self) -> tuple[Incident, ...]:
        def at(hours_before_end: float) -> tuple[float, float]:
            start = self.end - hours_before_end * 3600
            return start, start + 3600.0

        n = self.replicas
        few = tuple(range(0, n, max(1, round(n / max(1, math.ceil(n * 0.03))))))[: max(1, math.ceil(n * 0.03))]  # fmt: skip
        tenth = tuple(range(n - max(1, math.ceil(n * 0.1)), n))
        return (
            Incident("overload", *at(16), tuple(range(n)), "queue-growth", "overload"),
            Incident("slow-replicas", *at(10), few, "tail-latency-itl", "slow-replica"),
            Incident("kv-exhaustion", *at(4), tenth, "kv-saturation", "kv-exhaustion"),
        )

    def _mask(self, incident: Incident) -> np.ndarray:
        """``[replicas, steps]``: where ``incident`` holds (after its start, until its end)."""
        in_time = (self.times > incident.start) & (self.times <= incident.end)
        rows = np.zeros(self.replicas, dtype=bool)
        rows[list(incident.replicas)] = True
        return rows[:, None] & in_time[None, :]

    def _build(self) -> None:
        rng = np.random.default_rng(self.seed)
        shape = (self.replicas, self.steps)
        day = 1.0 + 0.15 * np.sin(2 * math.pi * (self.times % 86400) / 86400)
        per_second = 4.0 * day[None, :] * rng.uniform(0.95, 1.05, shape)
        ttft = np.full(shape, 0.08)
        itl = np.full(shape, 0.02)
        queue_share = np.full(shape, 0.05)
        waiting = rng.integers(0, 3, shape).astype(float)
        kv = 0.35 + 0.1 * rng.random(shape)
        preempt_per_minute = np.zeros(shape)
        overload, slow, squeeze = (self._mask(i) for i in self.incidents)
        per_second = np.where(overload, per_second * 2.5, per_second)
        ttft = np.where(overload, 0.32, ttft)
        queue_share = np.where(overload, 0.8, queue_share)
        waiting = np.where(overload, 10.0, waiting)
        itl = np.where(slow, 0.1, itl)
        kv = np.where(squeeze, 0.99, kv)
        preempt_per_minute = np.where(squeeze, 30.0, preempt_per_minute)
        ttft = np.where(squeeze, ttft * 3, ttft)
        waiting = np.where(squeeze, waiting + 4, waiting)
        requests = np.round(per_second * self.interval)
        requests[:, 0] = 0.0  # the first scrape: a fresh counter
        output_tokens = 200.0
        e2e = ttft + itl * output_tokens
        self.histograms: dict[str, tuple[tuple[float, ...], np.ndarray, np.ndarray]] = {}
        for family, bounds, value, per_request in (
            (c.TTFT_SECONDS, TTFT_BOUNDS, ttft, 1),
            (c.ITL_SECONDS, ITL_BOUNDS, itl, int(output_tokens)),
            (c.E2E_SECONDS, REQUEST_LATENCY_BOUNDS, e2e, 1),
            (c.QUEUE_SECONDS, REQUEST_LATENCY_BOUNDS, ttft * queue_share, 1),
        ):
            self.histograms[family] = (bounds, *self._histogram(bounds, value, requests * per_request))  # fmt: skip
        self.counters: dict[tuple[str, str], np.ndarray] = {}
        for reason, share in zip(REASONS, REASON_SHARES, strict=True):
            self.counters[c.REQUESTS_TOTAL, reason] = np.cumsum(np.round(requests * share), axis=1)
        self.counters[c.PREEMPTIONS_TOTAL, ""] = np.cumsum(
            np.round(preempt_per_minute * self.interval / 60), axis=1
        )
        queries = requests * 600.0
        self.counters[c.PREFIX_CACHE_QUERIES_TOTAL, ""] = np.cumsum(queries, axis=1)
        self.counters[c.PREFIX_CACHE_HITS_TOTAL, ""] = np.cumsum(np.round(queries * 0.6), axis=1)
        self.counters[c.PROMPT_TOKENS_TOTAL, ""] = np.cumsum(queries, axis=1)
        self.counters[c.GENERATION_TOKENS_TOTAL, ""] = np.cumsum(requests * output_tokens, axis=1)
        self.gauges = {
            c.REQUESTS_WAITING: waiting,
            c.REQUESTS_RUNNING: np.minimum(256.0, per_second * e2e),
            c.KV_CACHE_USAGE: kv,
        }

    @staticmethod
    def _histogram(bounds, value: np.ndarray, n: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cumulative bucket counts ``[replicas, steps, buckets + 1]`` and sums of a mix: 90 %
        of ``n`` at ``value``, 10 % at 2.5×."""
        tail = np.round(n * 0.1)
        body = n - tail
        edges = np.array([*bounds, math.inf])
        per_step = (body[..., None] * (value[..., None] <= edges)) + (
            tail[..., None] * (value[..., None] * 2.5 <= edges)
        )
        sums = body * value + tail * value * 2.5
        return np.cumsum(per_step, axis=1), np.cumsum(sums, axis=1)

    # --- the series, one at a time ---------------------------------------------------------

    def series(self) -> Iterator[tuple[str, str, dict[str, str], np.ndarray]]:
        """``(family's exposition name, its type, labels with __name__, values)`` of every
        series, each family's together (histograms: buckets, then counts, then sums)."""
        for family, (bounds, counts, sums) in self.histograms.items():
            name = vllm_name(family)
            les = [repr(b) for b in bounds] + ["+Inf"]
            for r in range(self.replicas):
                for i, le in enumerate(les):
                    yield (
                        name,
                        "histogram",
                        self._labels(f"{name}_bucket", r, le=le),
                        counts[r, :, i],
                    )
            for r in range(self.replicas):
                yield name, "histogram", self._labels(f"{name}_count", r), counts[r, :, -1]
            for r in range(self.replicas):
                yield name, "histogram", self._labels(f"{name}_sum", r), sums[r]
        for (family, reason), values in self.counters.items():
            name = vllm_name(family)
            extra = {"finished_reason": reason} if reason else {}
            for r in range(self.replicas):
                yield name, "counter", self._labels(f"{name}_total", r, **extra), values[r]
        for family, values in self.gauges.items():
            name = vllm_name(family)
            for r in range(self.replicas):
                yield name, "gauge", self._labels(name, r), values[r]
        up = np.ones(self.steps)
        for r in range(self.replicas):
            yield "up", "gauge", {"__name__": "up", "instance": self.instance(r), "job": JOB}, up

    def _labels(self, name: str, r: int, **extra: str) -> dict[str, str]:
        return {
            "__name__": name, "instance": self.instance(r), "job": JOB, "model_name": MODEL,
            **extra,
        }  # fmt: skip

    # --- writers ---------------------------------------------------------------------------

    def write_openmetrics(self, folder: Path) -> list[Path]:
        """One OpenMetrics file per 2 h block (aligned as Prometheus aligns blocks), each
        family's samples together and each series in time order; returns the files."""
        folder.mkdir(parents=True, exist_ok=True)
        first = math.floor(self.start / BLOCK_SECONDS)
        last = math.floor(self.end / BLOCK_SECONDS)
        files = []
        stamps = [f"{t:.0f}" for t in self.times]
        for block in range(first, last + 1):
            lo, hi = block * BLOCK_SECONDS, (block + 1) * BLOCK_SECONDS
            steps = np.nonzero((self.times >= lo) & (self.times < hi))[0]
            if steps.size == 0:
                continue
            a, b = int(steps[0]), int(steps[-1]) + 1
            path = folder / f"block-{block}.om"
            with path.open("w", encoding="ascii") as out:
                family_open = None
                for family, kind, labels, values in self.series():
                    if family != family_open:
                        out.write(f"# TYPE {family} {kind}\n")
                        family_open = family
                    prefix = _exposition_prefix(labels)
                    out.write(
                        "".join(
                            f"{prefix}{_number(v)} {s}\n"
                            for v, s in zip(values[a:b].tolist(), stamps[a:b], strict=True)
                        )
                    )
                out.write("# EOF\n")
            files.append(path)
        return files

    def victoriametrics_lines(self, batch: int = 2000) -> Iterator[bytes]:
        """JSON lines for ``/api/v1/import``, ``batch`` series a chunk."""
        stamps = [int(t * 1000) for t in self.times]
        lines: list[str] = []
        for _family, _kind, labels, values in self.series():
            lines.append(
                json.dumps({"metric": labels, "values": values.tolist(), "timestamps": stamps})
            )
            if len(lines) >= batch:
                yield ("\n".join(lines) + "\n").encode()
                lines = []
        if lines:
            yield ("\n".join(lines) + "\n").encode()


def _exposition_prefix(labels: dict[str, str]) -> str:
    name = labels["__name__"]
    rest = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{rest}}} "


def _number(v: float) -> str:
    return str(int(v)) if v.is_integer() else f"{v:.3f}"
