"""Where a sweep's points are measured: a simulated engine in virtual time, a bundled engine
started per knob value, or a running engine whose knob is PATCHed per value and put back
(``loadgen.lab_sweep`` drives them). ``Target.at(value)`` gives a ``measure(schedule)``
returning (``loadgen.summary.summarize``'s summary, the per-request results)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

from loadgen.errors import TargetError
from loadgen.lab_plan import SweepPlan
from loadgen.record import RequestResult
from loadgen.summary import summarize
from loadgen.workload import ScheduledRequest

Measure = Callable[[list[ScheduledRequest]], tuple[dict[str, Any], list[RequestResult]]]


@dataclass
class Target:
    """Where points are measured: ``at(value)`` gives a ``measure(schedule)`` with the knob
    at ``value`` (and undoes what it did on exit)."""

    plan: SweepPlan
    knobs: dict[str, Any]
    simulated: bool

    @classmethod
    def open(cls, plan: SweepPlan) -> Target:
        if plan.url is not None:
            from loadgen.lab_knobs import check_values

            knobs = _run(_read_knobs(plan))
            if plan.knob not in knobs:
                raise TargetError(f"{plan.url}/admin/config has no knob {plan.knob!r}")
            check_values(str(knobs.get("model", "tiny")), _scheduler_knobs(knobs), plan.knob,
                         list(plan.values))  # fmt: skip
            return cls(plan, knobs, str(knobs.get("model", "")).startswith("sim:"))
        from engine.config import EngineConfig

        config = EngineConfig(model=plan.engine or "tiny", **plan.engine_knobs)
        return cls(plan, config.to_dict(), plan.engine is not None and "sim:" in plan.engine)

    @contextmanager
    def at(self, value: Any) -> Iterator[Measure]:
        plan = self.plan
        if plan.is_simulated_offline:
            yield self._offline(value)
        elif plan.url is None:
            from loadgen.replicas import bundled_replicas

            knobs = {**plan.engine_knobs, "model": plan.engine, plan.knob: value}
            with bundled_replicas(1, knobs) as urls:
                yield self._real_time(urls)
        else:
            yield from self._patched(value)

    def _patched(self, value: Any) -> Iterator[Measure]:
        plan = self.plan
        assert plan.url is not None
        from loadgen.admin import patch_knobs

        original = self.knobs[plan.knob]
        try:
            _run(_with_client(lambda c: patch_knobs(c, plan.url, {plan.knob: value},
                                                    plan.admin_token)))  # fmt: skip
            yield self._real_time([plan.url])
        finally:
            # NOTE: put back even on Ctrl-C or an error, in a fresh event loop of its own
            _run(_with_client(lambda c: patch_knobs(c, plan.url, {plan.knob: original},
                                                    plan.admin_token)))  # fmt: skip

    def _offline(self, value: Any) -> Measure:
        from engine.config import EngineConfig
        from engine.sim.offline import Arrival, run_open_loop

        plan = self.plan
        config = EngineConfig(**{**plan.engine_knobs, "model": plan.engine, plan.knob: value})

        def measure(schedule: list[ScheduledRequest]) -> tuple[dict[str, Any], list]:
            arrivals = [
                Arrival(r.at_seconds, r.prompt_token_ids, r.max_tokens, str(r.index))
                for r in schedule
            ]
            run = run_open_loop(config, arrivals)
            done = {int(r.request_id): r for r in run.results}
            results = [_offline_result(r, done.get(r.index)) for r in schedule]
            return summarize(results, max(run.simulated_seconds, 1e-9), plan.objectives), results

        return measure

    def _real_time(self, urls: list[str]) -> Measure:
        from loadgen.runner import run_schedule

        plan = self.plan

        def measure(schedule: list[ScheduledRequest]) -> tuple[dict[str, Any], list]:
            state = _run(
                run_schedule(urls, schedule, route=plan.route, max_in_flight=plan.max_in_flight)
            )
            duration = max(state.duration_seconds, 1e-9)
            return summarize(state.results, duration, plan.objectives), state.results

        return measure


def _offline_result(request: ScheduledRequest, result: Any) -> RequestResult:
    """A simulated request as the load generator's client would have recorded it."""
    base = RequestResult(
        index=request.index,
        scheduled_seconds=request.at_seconds,
        sent_seconds=request.at_seconds,
        prompt_tokens=len(request.prompt_token_ids),
        tenant=request.tenant,
        priority=request.priority,
        stream=request.stream,
    )
    if result is None:  # NOTE: run_open_loop finishes every request; kept for safety
        return replace(base, error="not finished by the simulation")
    return replace(
        base,
        ttft_seconds=result.ttft_seconds,
        e2e_seconds=result.e2e_seconds,
        itl_seconds=list(result.itl_seconds),
        output_tokens=result.num_output_tokens,
        status=200,
        finish_reason=result.finish_reason or "",
    )


def _scheduler_knobs(knobs: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("max_num_seqs", "max_num_batched_tokens", "max_model_len", "enable_chunked_prefill")
    return {k: knobs[k] for k in keep if k in knobs}


def _run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


async def _with_client(call: Callable[[Any], Any]) -> Any:
    import httpx

    async with httpx.AsyncClient() as client:
        return await call(client)


async def _read_knobs(plan: SweepPlan) -> dict[str, Any]:
    from loadgen.admin import ADMIN_TOKEN_ENV, read_knobs

    knobs = await _with_client(lambda c: read_knobs(c, plan.url, plan.admin_token))
    if knobs is None:
        raise TargetError(
            f"cannot read {plan.url}/admin/config: the admin API is off or the token is "
            f"missing or wrong (set {ADMIN_TOKEN_ENV} to the server's admin token)"
        )
    return knobs
