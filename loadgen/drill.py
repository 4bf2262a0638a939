"""Running a scenario: one open-loop schedule across its phases, with the admin changes
and routing changes at phase starts, ``/metrics`` scraped from every replica at each phase
boundary, and the named signal measured per phase.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np

from loadgen.admin import patch_knobs, scrape, total
from loadgen.errors import TargetError, WorkloadError
from loadgen.record import RequestResult
from loadgen.routing import Router
from loadgen.runner import RunState, run_schedule
from loadgen.scenario import Expectation, Scenario
from loadgen.workload import build_schedule
from slo.buckets import parse_le
from slo.quantile import histogram_quantile

Samples = dict[tuple[str, frozenset], float]
# NOTE: the bundled engine's names (engine/metric_names.py), spelled here as loadgen speaks
# HTTP only and never imports the engine outside loadgen.replicas.
ENGINE_INFO_SAMPLE = "tailwatch:engine_info"
ITL_BUCKETS = "vllm:inter_token_latency_seconds_bucket"
TTFT_BUCKETS = "vllm:time_to_first_token_seconds_bucket"
INSTANCE_ID_LABEL = "instance_id"


@dataclass
class DrillResult:
    scenario: Scenario
    urls: list[str]
    state: RunState
    phase_bounds: list[tuple[str, float, float]]  # (name, start s, end s)
    scrapes: list[list[Samples]] = field(default_factory=list)  # [boundary][replica]

    def phase_results(self, name: str) -> list[RequestResult]:
        start, end = next((s, e) for n, s, e in self.phase_bounds if n == name)
        return [r for r in self.state.results if start <= r.scheduled_seconds < end]

    def _boundaries(self, name: str) -> tuple[list[Samples], list[Samples]]:
        """The readings at the start and the end of phase ``name``, per replica. A replica
        that restarted at the phase's start counts the phase from zero: its start reading
        is the old engine's, whose counters the new one does not continue."""
        index = next(i for i, (n, _, _) in enumerate(self.phase_bounds) if n == name)
        before, after = list(self.scrapes[index]), self.scrapes[index + 1]
        phase = next((p for p in self.scenario.phases if p.name == name), None)
        for replica in phase.restart if phase is not None else ():
            before[replica] = {}
        return before, after

    def server_delta(self, name: str, metric: str, replicas: list[int] | None = None) -> float:
        before, after = self._boundaries(name)
        chosen = replicas if replicas is not None else range(len(self.urls))
        return sum(total(after[r], metric) - total(before[r], metric) for r in chosen)

    def server_buckets(
        self, name: str, metric: str, replicas: list[int] | None = None
    ) -> dict[float, float]:
        """Δ of histogram ``metric``'s cumulative buckets over phase ``name``, summed over
        the replicas (le → count), as ``sum by (le) (increase(...))`` would read them."""
        before, after = self._boundaries(name)
        chosen = replicas if replicas is not None else range(len(self.urls))
        buckets: dict[float, float] = {}
        for r in chosen:
            for (sample, labels), value in after[r].items():
                if sample != metric:
                    continue
                le = parse_le(dict(labels).get("le", ""))
                if le is not None:
                    delta = value - before[r].get((sample, labels), 0.0)
                    buckets[le] = buckets.get(le, 0.0) + delta
        return buckets

    def signal(self, phase: str, expectation: Expectation | None = None) -> float:
        """The expectation's signal over one phase (NaN when it has no data)."""
        e = expectation or self.scenario.expects
        replicas = [e.replica] if e.replica is not None else None
        if e.signal == "prefix_hit_rate":
            queries = self.server_delta(phase, "vllm:prefix_cache_queries_total", replicas)
            hits = self.server_delta(phase, "vllm:prefix_cache_hits_total", replicas)
            return hits / queries if queries else math.nan
        if e.signal == "preemptions":
            return self.server_delta(phase, "vllm:num_preemptions_total", replicas)
        if e.signal == "engine_itl_p99_ms":
            buckets = self.server_buckets(phase, ITL_BUCKETS, replicas)
            return histogram_quantile(0.99, buckets.items()).value * 1000
        if e.signal == "engine_ttft_p99_ms":
            buckets = self.server_buckets(phase, TTFT_BUCKETS, replicas)
            return histogram_quantile(0.99, buckets.items()).value * 1000
        if e.signal == "queue_share_of_ttft":
            queue = self.server_delta(phase, "vllm:request_queue_time_seconds_sum", replicas)
            ttft = self.server_delta(phase, "vllm:time_to_first_token_seconds_sum", replicas)
            return queue / ttft if ttft else math.nan
        if e.signal == "structured_length_share":
            family = "tailwatch:structured_output_finished_total"
            before, after = self._boundaries(phase)
            chosen = replicas if replicas is not None else range(len(self.urls))
            finished = sum(total(after[r], family) - total(before[r], family) for r in chosen)
            cut = sum(
                total(after[r], family, finished_reason="length")
                - total(before[r], family, finished_reason="length")
                for r in chosen
            )
            return cut / finished if finished else math.nan
        if e.signal == "output_tokens_mean":
            tokens = self.server_delta(phase, "vllm:request_generation_tokens_sum", replicas)
            count = self.server_delta(phase, "vllm:request_generation_tokens_count", replicas)
            return tokens / count if count else math.nan
        if e.signal == "queue_time_mean_ms":
            queue = self.server_delta(phase, "vllm:request_queue_time_seconds_sum", replicas)
            count = self.server_delta(phase, "vllm:request_queue_time_seconds_count", replicas)
            return queue / count * 1000 if count else math.nan
        results = [r for r in self.phase_results(phase) if r.succeeded]
        if e.stream is not None:
            results = [r for r in results if r.stream == e.stream]
        if e.signal == "e2e_p50_skew":
            # how far the named replica has diverged from the rest of the fleet (~1 when
            # all replicas serve alike)
            named = self.urls[e.replica if e.replica is not None else 0]
            mine = [r.e2e_seconds for r in results if r.replica == named and r.e2e_seconds]
            rest = [r.e2e_seconds for r in results if r.replica != named and r.e2e_seconds]
            if not mine or not rest:
                return math.nan
            return float(np.percentile(mine, 50) / np.percentile(rest, 50))
        if e.replica is not None:
            results = [r for r in results if r.replica == self.urls[e.replica]]
        if e.signal == "itl_p99_ms":
            gaps = [g for r in results for g in r.itl_seconds]
            return float(np.percentile(gaps, 99)) * 1000 if gaps else math.nan
        if e.signal == "e2e_p50_ms":
            e2e = [r.e2e_seconds for r in results if r.e2e_seconds is not None]
            return float(np.percentile(e2e, 50)) * 1000 if e2e else math.nan
        if e.signal == "ttft_p95_ms":
            ttft = [r.ttft_seconds for r in results if r.ttft_seconds is not None]
            return float(np.percentile(ttft, 95)) * 1000 if ttft else math.nan
        raise ValueError(f"unknown signal {e.signal!r}")

    def phase_requests(self, name: str) -> dict[str, int]:
        """How the phase's requests ended: served, refused with 429 (load shed), other
        errors and never sent (the client's in-flight cap)."""
        results = self.phase_results(name)
        return {
            "num_scheduled": len(results),
            "num_succeeded": sum(r.succeeded for r in results),
            "num_429": sum(r.status == 429 for r in results),
            "num_errors": sum(
                not r.succeeded and not r.dropped and r.status != 429 for r in results
            ),
            "num_dropped": sum(r.dropped for r in results),
        }

    def phase_start(self, name: str) -> float:
        """The wall-clock (epoch seconds) start of phase ``name``."""
        return self.state.started_at + next(s for n, s, _ in self.phase_bounds if n == name)

    def phase_end(self, name: str) -> float:
        """The wall-clock (epoch seconds) end of phase ``name``."""
        return self.state.started_at + next(e for n, _, e in self.phase_bounds if n == name)

    def phase_times(self) -> list[dict[str, Any]]:
        """Each phase's start and end: offsets from the run's start (seconds) and wall-clock
        (epoch seconds and UTC ISO-8601), for lining the run up with a collector's store.
        NOTE: these are the schedule's boundaries (arrivals switch exactly then); a
        phase's admin change lands a scrape later, within milliseconds."""
        t0 = self.state.started_at
        return [
            {
                "name": name,
                "start_offset_seconds": start,
                "end_offset_seconds": end,
                "start_epoch_seconds": t0 + start,
                "end_epoch_seconds": t0 + end,
                "start_utc": _iso_utc(t0 + start),
                "end_utc": _iso_utc(t0 + end),
            }
            for name, start, end in self.phase_bounds
        ]

    def replicas(self) -> list[dict[str, Any]]:
        """The replicas the run drove: index (as the scenario's ``replica:``), URL, port and
        the engine's instance id (``tailwatch:engine_info``, the ``replica`` of its request
        records; None for an engine that exports none, e.g. vLLM)."""
        first = self.scrapes[0] if self.scrapes else [{} for _ in self.urls]
        return [
            {
                "index": i,
                "url": url,
                "port": urlsplit(url).port,
                "instance_id": _instance_id(first[i]),
            }
            for i, url in enumerate(self.urls)
        ]

    def verdict(self) -> dict[str, Any]:
        """Baseline and perturbation values of the signal, and whether it moved as named."""
        e = self.scenario.expects
        baseline, perturbed = self.signal("baseline"), self.signal("perturbation")
        if e.change == "rise":
            moved = perturbed > 0 and perturbed >= e.factor * baseline
        else:
            moved = perturbed <= e.factor * baseline
        return {
            "scenario": self.scenario.name,
            "signal": e.signal,
            "change": e.change,
            "factor": e.factor,
            "baseline": baseline,
            "perturbation": perturbed,
            "moved": bool(moved),
            "alert": e.alert.value if e.alert else None,
            "triage_cause": e.triage_cause.value if e.triage_cause else None,
            "phases": {name: self.signal(name) for name, _, _ in self.phase_bounds},
            "requests": {name: self.phase_requests(name) for name, _, _ in self.phase_bounds},
            "phase_times": self.phase_times(),
            "replicas": self.replicas(),
            "started_at_epoch_seconds": self.state.started_at,
        }


async def run_drill(
    scenario: Scenario,
    urls: list[str],
    *,
    admin_token: str | None = None,
    max_in_flight: int = 256,
    state: RunState | None = None,
) -> DrillResult:
    """Run every phase of ``scenario`` against ``urls`` (one per replica it names)."""
    check_real_time(scenario)
    if len(urls) < scenario.replicas:
        raise TargetError(
            f"scenario {scenario.name!r} needs {scenario.replicas} replica URLs, got {len(urls)}"
        )
    urls = [u.rstrip("/") for u in urls[: scenario.replicas]]
    router = Router(urls, scenario.routing)
    schedule, bounds, actions = [], [], []
    offset = 0.0
    result = DrillResult(scenario, urls, state or RunState(), bounds)
    async with httpx.AsyncClient() as client:

        async def take_scrape() -> None:
            result.scrapes.append([await scrape(client, url) for url in urls])

        for phase in scenario.phases:
            schedule += build_schedule(phase.workloads, offset)
            bounds.append((phase.name, offset, offset + phase.duration_seconds))
            actions.append(
                (offset, _phase_start(phase, router, urls, client, admin_token, take_scrape))
            )
            offset += phase.duration_seconds
        schedule = [
            replace(r, index=i) for i, r in enumerate(sorted(schedule, key=lambda r: r.at_seconds))
        ]
        actions.append((offset, take_scrape))
        await run_schedule(
            urls,
            schedule,
            router=router,
            max_in_flight=max_in_flight,
            actions=actions,
            state=result.state,
        )
        # NOTE: the last scrape ran at the end of the arrivals; take it again after the
        # stragglers finished so the last phase counts them.
        result.scrapes[-1] = [await scrape(client, url) for url in urls]
    return result


def check_real_time(scenario: Scenario) -> None:
    """Refuse, before anything starts, what a drill over HTTP cannot do: restart a replica
    (a bundled replica, or a server at a URL, is not ours to kill and start again), or put
    the virtual gateway in front of it (its clients reach the replicas directly)."""
    for i, phase in enumerate(scenario.phases):
        if phase.gateway_delay_seconds is not None:
            raise WorkloadError(
                f"phases[{i}] ({phase.name}).gateway",
                "the real-time drill has no gateway to delay; run this scenario on the "
                "virtual fleet (tailwatch scenario drill --virtual)",
            )
        if phase.restart:
            raise WorkloadError(
                f"phases[{i}] ({phase.name}).restart",
                f"replicas {list(phase.restart)} cannot be restarted by the real-time drill; "
                "run this scenario on the virtual fleet (tailwatch scenario drill --virtual)",
            )


def _instance_id(samples: Samples) -> str | None:
    ids = {
        dict(labels).get(INSTANCE_ID_LABEL)
        for name, labels in samples
        if name == ENGINE_INFO_SAMPLE
    }
    ids.discard(None)
    return ids.pop() if len(ids) == 1 else None


def _iso_utc(epoch_seconds: float) -> str:
    moment = datetime.fromtimestamp(epoch_seconds, UTC)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _phase_start(phase, router, urls, client, admin_token, take_scrape):
    async def start() -> None:
        await take_scrape()
        if phase.active_replicas is not None:
            router.set_active(phase.active_replicas)
        for change in phase.admin:
            await patch_knobs(client, urls[change.replica], dict(change.patch), admin_token)

    return start
