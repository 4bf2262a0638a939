"""``tailwatch up --demo``: steady traffic from three tenants, and a mini-incident drill each
cycle, rotating through three of the scenarios in ``loadgen/scenarios``.

A cycle is one scenario run by the load generator (``loadgen.drill.run_drill``) against the
replicas, so it is bounded: a steady ``baseline``, the ``perturbation`` and a ``recovery``
that undoes it. The perturbations are the shipped scenarios' own, through the engines' admin
API or a change of traffic:

- ``overload``: every step pinned at 25 ms and 4 sequences per step (a GPU-bound decode),
  arrivals up to 25 req/s: the queue grows, TTFT becomes queueing, past the bound 429s.
- ``slow-replica`` (three replicas or more): replica 1 sleeps 80 ms after every step.
- ``prefix-break``: a per-request salt at the top of the shared prompt, so no block is shared.

Every baseline first puts the knobs back to what the replicas started with, so a cycle cut
short (a stop mid-drill) never leaves the next one perturbed; the demo's stop does the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import math
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from loadgen.admin import patch_knobs, read_knobs
from loadgen.drill import run_drill
from loadgen.scenario import Scenario, parse_scenario

TENANTS = {"acme": 2, "globex": 1, "initech": 1}
#: The steady traffic: chat with a shared 160-token system prompt (two prompt families).
STEADY = {
    "name": "chat",
    "rate": 2.0,
    "tenants": TENANTS,
    "prompt_tokens": 200,
    "output_tokens": {"kind": "uniform", "min": 8, "max": 24},
    "prefix": {"groups": 2, "share": 1.0, "tokens": 160},
}
BASELINE_SECONDS = 60.0
PERTURBATION_SECONDS = 45.0
RECOVERY_SECONDS = 45.0
#: A shorter cycle, "baseline,perturbation,recovery" seconds (the fresh-clone test's knob).
CYCLE_ENV = "TAILWATCH_DEMO_CYCLE_SECONDS"
MAX_PHASE_SECONDS = 3600.0
#: The longest first baseline when ``tailwatch up`` proposes SLOs from it
#: (``tailwatch.up_slos``): the steady 2 req/s gives the 100 first tokens a p99 needs in
#: ~50 s, which Poisson arrivals and the first scrape make a coin toss at 60 s; 90 s makes it
#: near certain. The first drill starts sooner once the SLOs are proposed
#: (:func:`first_baseline_left`).
CALIBRATION_BASELINE_SECONDS = 90.0
#: Once the calibration has ended, the first baseline runs at least this much longer: the
#: collector restarts to alert on the proposed SLOs and scrapes again before the drill.
SETTLE_AFTER_CALIBRATION_SECONDS = 10.0
#: The fault knobs a drill may set, at their normal values.
NORMAL_FAULTS = {"step_delay_seconds": 0.0}


@dataclass(frozen=True)
class Incident:
    name: str
    expects: dict[str, Any]
    min_replicas: int = 1


INCIDENTS = (
    Incident(
        "overload",
        {
            "signal": "queue_time_mean_ms",
            "change": "rise",
            "alert": "queue-growth",
            "triage_cause": "overload",
        },
    ),
    Incident(
        "slow-replica",
        {
            "signal": "e2e_p50_skew",
            "change": "rise",
            "replica": 1,
            "alert": "replica-imbalance",
            "triage_cause": "slow-replica",
        },
        # NOTE: the rule compares a replica with the fleet median, and the median of two is
        # their mean: one slow replica of two can never be twice it. Three at least.
        min_replicas=3,
    ),
    Incident(
        "prefix-break",
        {
            "signal": "prefix_hit_rate",
            "change": "fall",
            "alert": "prefix-hit-drop",
            "triage_cause": "prefix-break",
        },
    ),
)


def cycle_scenario(
    incident: Incident,
    replicas: int,
    normal: dict[str, Any],
    durations: tuple[float, float, float] = (
        BASELINE_SECONDS,
        PERTURBATION_SECONDS,
        RECOVERY_SECONDS,
    ),
) -> Scenario:
    """One demo cycle as a scenario: the baseline restores ``normal`` knobs on every replica,
    the perturbation applies ``incident``'s, the recovery undoes them; ``durations`` are the
    three phases' seconds (the end-to-end test runs a shorter cycle)."""
    everyone = range(replicas)
    restore = [{"replica": r, "patch": dict(normal)} for r in everyone]
    baseline_seconds, perturbation_seconds, recovery_seconds = durations
    perturbation: dict[str, Any] = {"name": "perturbation", "duration": perturbation_seconds}
    recovery: dict[str, Any] = {"name": "recovery", "duration": recovery_seconds}
    if incident.name == "overload":
        overloaded = {"step_delay_seconds": 0.025, "max_num_seqs": 4}
        perturbation["admin"] = [{"replica": r, "patch": overloaded} for r in everyone]
        perturbation["change"] = {"chat": {"rate": 25.0}}
        recovery["admin"] = restore
        recovery["change"] = {"chat": {"rate": STEADY["rate"]}}
    elif incident.name == "slow-replica":
        perturbation["admin"] = [{"replica": 1, "patch": {"step_delay_seconds": 0.08}}]
        recovery["admin"] = restore
    elif incident.name == "prefix-break":
        perturbation["change"] = {"chat": {"prefix": {"salt_per_request": True}}}
        recovery["change"] = {"chat": {"prefix": {"salt_per_request": False}}}
    else:
        raise ValueError(f"no demo incident {incident.name!r}")
    raw = {
        "name": f"demo-{incident.name}",
        "description": f"tailwatch up --demo: the {incident.name} drill",
        "teaches": f"see loadgen/scenarios/{incident.name}.yaml",
        "replicas": replicas,
        "routing": "round-robin",
        "workloads": [STEADY],
        "phases": [
            {"name": "baseline", "duration": baseline_seconds, "admin": restore},
            perturbation,
            recovery,
        ],
        "expects": incident.expects,
    }
    return parse_scenario(raw, f"demo-{incident.name}")


def cycle_durations(environ: Mapping[str, str]) -> tuple[float, float, float]:
    """The cycle's three phase seconds: the defaults, or ``TAILWATCH_DEMO_CYCLE_SECONDS``;
    ValueError naming the variable and the value when it is not three seconds in range."""
    raw = environ.get(CYCLE_ENV, "")
    if not raw.strip():
        return BASELINE_SECONDS, PERTURBATION_SECONDS, RECOVERY_SECONDS
    problem = (
        f"{CYCLE_ENV}={raw!r}: expected baseline,perturbation,recovery seconds, each above 0 "
        f"and at most {MAX_PHASE_SECONDS:.0f}, e.g. 8,20,8"
    )
    parts = raw.split(",")
    if len(parts) != 3:
        raise ValueError(problem)
    try:
        values = tuple(float(part) for part in parts)
    except ValueError:
        raise ValueError(problem) from None
    if not all(math.isfinite(v) and 0 < v <= MAX_PHASE_SECONDS for v in values):
        raise ValueError(problem)
    return values  # type: ignore[return-value]


def first_baseline_left(elapsed_seconds: float, baseline_seconds: float) -> float:
    """Seconds of baseline the first cycle still runs once the SLO calibration ended
    ``elapsed_seconds`` into the demo's traffic (SLOs proposed, or nothing could be, or
    :data:`CALIBRATION_BASELINE_SECONDS` came first): the cycle's own baseline counted from
    the traffic's start, and at least :data:`SETTLE_AFTER_CALIBRATION_SECONDS`."""
    return max(baseline_seconds - elapsed_seconds, SETTLE_AFTER_CALIBRATION_SECONDS)


def rotation(replicas: int) -> list[Incident]:
    return [i for i in INCIDENTS if replicas >= i.min_replicas]


class Demo:
    """The demo's traffic in a thread of its own (an asyncio loop), until :meth:`stop`."""

    def __init__(
        self,
        urls: list[str],
        token: str,
        say: Callable[[str], None],
        log_path: Path,
        *,
        min_first_baseline_seconds: float = 0.0,
    ) -> None:
        self.urls, self.token, self.say, self.log_path = urls, token, say, log_path
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="tailwatch-demo", daemon=True)
        self._normal: dict[str, Any] = dict(NORMAL_FAULTS)
        self.durations = cycle_durations(os.environ)
        #: The first cycle's longest baseline: at least ``min_first_baseline_seconds`` (the
        #: SLO calibration's clean traffic), else the cycle's own.
        self.first_baseline_seconds = max(self.durations[0], min_first_baseline_seconds)
        #: Set when the calibration has ended (:meth:`calibration_ended`); set from the
        #: start when the cycle's own baseline is long enough for it.
        self._calibrated = threading.Event()
        if self.first_baseline_seconds <= self.durations[0]:
            self._calibrated.set()

    def cycle_durations(self, number: int) -> tuple[float, float, float]:
        """Cycle ``number``'s (from 1) longest baseline, perturbation and recovery seconds."""
        if number == 1:
            return (self.first_baseline_seconds, *self.durations[1:])
        return self.durations

    def calibration_ended(self) -> None:
        """The SLO calibration is over (proposed, or gave up): the first drill may start
        after :func:`first_baseline_left` more seconds of baseline."""
        self._calibrated.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_seconds: float = 30.0) -> None:
        self._stop.set()
        self._thread.join(timeout_seconds)

    def _log(self, line: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.gmtime())
        with self.log_path.open("a", encoding="utf-8") as log:
            log.write(f"{stamp}Z {line}\n")

    def _run(self) -> None:
        try:
            asyncio.run(self._cycles())
        except Exception as error:  # NOTE: the stack stays up; the demo says why it stopped
            self.say(f"demo traffic stopped: {type(error).__name__}: {error}")
            self._log(f"stopped: {error!r}")

    async def _cycles(self) -> None:
        async with httpx.AsyncClient() as client:
            knobs = await read_knobs(client, self.urls[0], self.token) or {}
        self._normal["max_num_seqs"] = knobs.get("max_num_seqs", 256)
        try:
            drills = itertools.cycle(rotation(len(self.urls)))
            first = await self._calibration_traffic(rotation(len(self.urls))[0])
            for number, incident in enumerate(drills, start=1):
                if self._stop.is_set():
                    return
                await self._cycle(number, incident, first if number == 1 else None)
        finally:
            await self._restore()

    async def _calibration_traffic(self, incident: Incident) -> float | None:
        """The first cycle's baseline until the calibration ends (:meth:`calibration_ended`)
        or :data:`SETTLE_AFTER_CALIBRATION_SECONDS` before its longest; the baseline seconds
        the first cycle then still runs (``None``: no calibration, its own baseline)."""
        if self._calibrated.is_set():
            return None
        started = time.monotonic()
        longest = max(self.first_baseline_seconds - SETTLE_AFTER_CALIBRATION_SECONDS, 1.0)
        scenario = cycle_scenario(incident, len(self.urls), self._normal, (longest, 1.0, 1.0))
        scenario = dataclasses.replace(
            scenario,
            name=f"{scenario.name}-calibration",
            phases=(dataclasses.replace(scenario.phases[0], name="calibration"),),
        )
        self._log(f"calibration: steady traffic for at most {longest:.0f} s")
        traffic = asyncio.create_task(run_drill(scenario, self.urls, admin_token=self.token))
        while not traffic.done():
            if self._stop.is_set() or self._calibrated.is_set():
                traffic.cancel()
            await asyncio.wait({traffic}, timeout=0.5)
        with contextlib.suppress(asyncio.CancelledError):
            traffic.result()
        elapsed = time.monotonic() - started
        self._log(f"calibration: over after {elapsed:.0f} s")
        return first_baseline_left(elapsed, self.durations[0])

    async def _cycle(self, number: int, incident: Incident, baseline: float | None) -> None:
        durations = self.cycle_durations(number)
        if baseline is not None:
            durations = (baseline, *durations[1:])
        scenario = cycle_scenario(incident, len(self.urls), self._normal, durations)
        baseline_seconds, perturbation_seconds, _ = durations
        start = time.strftime("%H:%M:%S", time.gmtime(time.time() + baseline_seconds))
        self.say(
            f"demo: drill {number} '{incident.name}' — perturbation from {start} UTC for "
            f"{perturbation_seconds:.0f} s; watch for the {incident.expects['alert']} alert"
        )
        self._log(f"cycle {number}: {incident.name} starts")
        drill = asyncio.create_task(run_drill(scenario, self.urls, admin_token=self.token))
        while not drill.done():
            if self._stop.is_set():
                drill.cancel()
            await asyncio.wait({drill}, timeout=0.5)
        with contextlib.suppress(asyncio.CancelledError):
            result = drill.result()
            phases = {n: result.signal(n) for n in ("baseline", "perturbation", "recovery")}
            self._log(f"cycle {number}: {incident.name} done; {scenario.expects.signal}: {phases}")

    async def _restore(self) -> None:
        async with httpx.AsyncClient() as client:
            for url in self.urls:
                with contextlib.suppress(Exception):
                    await patch_knobs(client, url, dict(self._normal), self.token)
