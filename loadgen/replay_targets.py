"""Where a replay trace runs: a simulated engine in virtual time, the bundled engine in real
time, or a running server, each giving back one client-side ``RequestResult`` per request.

- ``sim:<model>@<gpu>``: one ``engine.sim.offline.run_open_loop`` per replica on its own
  virtual clock (``engine.sim.replicas.run_assigned``), so a window of any length replays
  in CPU seconds. A request the engine would refuse (prompt plus output past
  ``max_model_len``) is a failed result, as a server's 400 would be.
- ``tiny`` (or any bundled model name): ``loadgen.replicas.bundled_replicas`` (N replicas,
  in this process) with the candidate knobs, driven by ``loadgen.runner``.
- URLs: ``loadgen.runner`` against the running servers, whose own knobs are in force.

Each request carries its replica (``ScheduledRequest.replica``, from
``loadgen.replay_fleet``); the runner's router sends it there (``Router``'s ``assigned``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from collectors.request_records import RequestRecord
from loadgen.errors import WorkloadError
from loadgen.lab_knobs import check_engine
from loadgen.record import RequestResult
from loadgen.replicas import SERVE_KNOBS
from loadgen.routing import ASSIGNED, Router
from loadgen.runner import RunState, run_schedule
from loadgen.workload import ScheduledRequest

#: done, total → None: how a target reports progress.
Progress = Callable[[int, int], None]
TOO_LONG = "too_long"


@dataclass(frozen=True)
class TargetRun:
    """What a target measured: results in schedule order, how long the run lasted
    (virtual seconds for a simulation), and the knobs in force (None: not readable)."""

    results: list[RequestResult]
    duration_seconds: float
    knobs: Mapping[str, Any] | None
    interrupted: bool = False
    #: the engine's own records of the replayed requests (its spans), when captured
    server_records: Sequence[RequestRecord] | None = None
    #: prompt tokens the engine served from its prefix cache; None when it cannot say
    total_cached_tokens: int | None = None
    #: the same, per replica (index order); None when the target cannot say
    replica_cached_tokens: tuple[int | None, ...] | None = None


def is_sim_engine(engine: str) -> bool:
    from engine.sim.target import is_simulated

    return is_simulated(engine)


def check_knobs(engine: str, knobs: Mapping[str, Any]) -> None:
    """Refuse an unknown engine (``WorkloadError`` on ``engine``), an unknown knob, ``model`` (the engine is ``--engine``), a server-only knob
    for a virtual-time simulation, or a value the engine's config refuses; each a
    ``WorkloadError`` naming ``knob.<name>``."""
    from engine.config import EngineConfig

    engine_knobs = sorted(f.name for f in fields(EngineConfig) if f.name != "model")
    simulated = is_sim_engine(engine)
    allowed = engine_knobs if simulated else sorted({*engine_knobs, *SERVE_KNOBS})
    for name in knobs:
        if name == "model":
            raise WorkloadError("knob.model", "the engine is chosen with --engine, not a knob")
        if name in SERVE_KNOBS and simulated:
            raise WorkloadError(
                f"knob.{name}",
                "is the server's admission control; a virtual-time simulation has no server "
                "(replay on a bundled engine to study it)",
            )
        if name not in allowed:
            raise WorkloadError(f"knob.{name}", f"is not an engine knob; known: {allowed}")
    check_engine(engine)
    _engine_config(engine, {k: v for k, v in knobs.items() if k not in SERVE_KNOBS})


def _engine_config(engine: str, knobs: Mapping[str, Any]):
    from engine.config import EngineConfig
    from engine.errors import ConfigError

    try:
        return EngineConfig(model=engine, **knobs)
    except ConfigError as error:
        name = str(error).partition("=")[0]
        where = f"knob.{name}" if name in knobs else "engine"
        raise WorkloadError(where, str(error)) from None


def run_simulated(
    engine: str,
    knobs: Mapping[str, Any],
    schedule: Sequence[ScheduledRequest],
    progress: Progress | None = None,
    num_replicas: int = 1,
) -> TargetRun:
    """``schedule`` through ``num_replicas`` engines of ``engine`` (a ``sim:`` name), each
    request on its ``replica`` (None: 0), each replica on its own virtual clock."""
    from engine.sim.offline import Arrival
    from engine.sim.replicas import run_assigned

    config = _engine_config(engine, knobs)
    results = {r.index: _result(r) for r in schedule}
    arrivals, replicas = [], []
    for request in schedule:
        if len(request.prompt_token_ids) + request.max_tokens > config.max_model_len:
            result = results[request.index]
            result.status, result.error = 400, TOO_LONG
            continue
        arrivals.append(
            Arrival(
                request.at_seconds,
                request.prompt_token_ids,
                request.max_tokens,
                f"replay-{request.index}",
            )
        )
        replicas.append(request.replica or 0)
    total = len(schedule)
    tally = _Tally(total - len(arrivals), total, progress)
    counters = [_FinishCounter(tally) for _ in range(num_replicas)]
    runs = run_assigned(config, arrivals, replicas, num_replicas, [[c] for c in counters])
    for replica, run in enumerate(runs):
        for done in run.results:
            result = results[int(done.request_id.removeprefix("replay-"))]
            result.sent_seconds = done.arrival_time
            result.ttft_seconds = done.ttft_seconds
            result.e2e_seconds = done.e2e_seconds
            result.itl_seconds = list(done.itl_seconds)
            result.prompt_tokens = done.num_prompt_tokens
            result.output_tokens = done.num_output_tokens
            result.finish_reason = done.finish_reason or ""
            result.status = 200
            result.error = "" if done.finish_reason in ("length", "stop") else "engine_error"
            result.replica = f"sim-{replica}"
    in_force = {f.name: _json(getattr(config, f.name)) for f in fields(config)}
    per_replica = tuple(c.num_cached_tokens for c in counters)
    return TargetRun(
        [results[r.index] for r in schedule],
        max(run.simulated_seconds for run in runs),
        in_force,
        total_cached_tokens=sum(per_replica),
        replica_cached_tokens=per_replica,
    )


def _result(request: ScheduledRequest) -> RequestResult:
    return RequestResult(
        request.index, request.at_seconds, tenant=request.tenant, stream=request.stream
    )


def _json(value: Any) -> Any:
    return value if value is None or isinstance(value, bool | int | float | str) else str(value)


@dataclass
class _Tally:
    """Finished requests over every replica, reported as progress."""

    done: int
    total: int
    progress: Progress | None


class _FinishCounter:
    """A replica's engine observer: reports finished requests as progress (on the tally
    the replicas share) and counts their prefix-cache hits (``offline.RequestResult`` does
    not carry them)."""

    def __init__(self, tally: _Tally) -> None:
        self.tally = tally
        self.num_cached_tokens = 0

    def on_step(self, engine, outputs, handles) -> None:
        finished = [out for out in outputs if out.finished]
        self.num_cached_tokens += sum(out.num_cached_tokens for out in finished)
        if finished and self.tally.progress is not None:
            self.tally.done += len(finished)
            self.tally.progress(self.tally.done, self.tally.total)


def run_urls(
    urls: Sequence[str],
    schedule: Sequence[ScheduledRequest],
    progress: Progress | None = None,
    *,
    knobs: Mapping[str, Any] | None = None,
    max_in_flight: int = 256,
) -> TargetRun:
    """``schedule`` open-loop against running servers, in real time, each request to
    ``urls[request.replica]``."""
    total = len(schedule)
    state = RunState()

    def report(s: RunState) -> None:
        if progress is not None:
            progress(s.num_finished, total)

    async def go() -> None:
        await run_schedule(
            urls,
            schedule,
            router=Router(urls, ASSIGNED),
            max_in_flight=max_in_flight,
            state=state,
            on_progress=report,
        )

    try:
        asyncio.run(go())
    except KeyboardInterrupt:
        state.interrupted = True
    if knobs is None:
        knobs = _read_knobs(urls[0])
    return TargetRun(state.results, max(state.duration_seconds, 1e-9), knobs, state.interrupted)


def _read_knobs(url: str) -> Mapping[str, Any] | None:
    import httpx

    from loadgen.admin import read_knobs

    async def read() -> Mapping[str, Any] | None:
        async with httpx.AsyncClient() as client:
            return await read_knobs(client, url)

    return asyncio.run(read())


def run_bundled(
    engine: str,
    knobs: Mapping[str, Any],
    schedule: Sequence[ScheduledRequest],
    progress: Progress | None = None,
    num_replicas: int = 1,
) -> TargetRun:
    """``schedule`` against ``num_replicas`` bundled replicas of ``engine`` with ``knobs``,
    in real time, each request to its ``replica``, with every replica's request spans
    captured (``TargetRun.server_records``)."""
    from loadgen.replay_spans import SpanCapture
    from loadgen.replicas import bundled_replicas

    config = _engine_config(engine, {k: v for k, v in knobs.items() if k not in SERVE_KNOBS})
    in_force = {f.name: _json(getattr(config, f.name)) for f in fields(config)}
    in_force.update({k: v for k, v in knobs.items() if k in SERVE_KNOBS})
    captures = [SpanCapture(engine) for _ in range(num_replicas)]
    tracers = [capture.tracer for capture in captures]
    with bundled_replicas(num_replicas, {"model": engine, **knobs}, tracers=tracers) as urls:
        run = run_urls(urls, schedule, progress, knobs=in_force)
    per_replica = [capture.records() for capture in captures]
    records = [record for replica in per_replica for record in replica]
    cached = tuple(_cached(replica) for replica in per_replica)
    known = [c for c in cached if c is not None]
    return replace(
        run,
        server_records=records,
        total_cached_tokens=sum(known) if known else None,
        replica_cached_tokens=cached,
    )


def _cached(records: Sequence[RequestRecord]) -> int | None:
    counts = [r.cached_tokens for r in records if r.cached_tokens is not None]
    return sum(counts) if counts else None
