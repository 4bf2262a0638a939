"""Failure containment in the async front end, without HTTP: a step that raises fails
its batch through the abort path (invariants hold) or, where that cannot help, kills
the engine — and a dead engine still drains and answers every caller."""

from __future__ import annotations

import asyncio

import pytest

from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.step_failures import MAX_CONSECUTIVE_FAILED_STEPS, EngineDeadError, StepFailedError

PARAMS = SamplingParams(max_tokens=6, ignore_eos=True)


@pytest.fixture
def front():
    front = AsyncEngine(LLMEngine(EngineConfig(max_model_len=256, num_gpu_blocks=64)))
    yield front
    front.shutdown()


async def _outcome(front: AsyncEngine, prompt: str) -> str | type[BaseException]:
    try:
        text = ""
        async for out in front.generate(prompt, PARAMS):
            text += out.new_text
        return out.finish_reason or "none"
    except Exception as error:
        return type(error)


def _assert_engine_is_empty(front: AsyncEngine) -> None:
    engine = front.engine
    assert not engine.scheduler.requests and not engine.scheduler.running
    assert len(engine.scheduler.waiting) == 0
    pool = engine.scheduler.kv_cache.pool
    assert pool.num_free_blocks == pool.num_usable_blocks  # every KV block is back


def test_a_runner_that_raises_once_fails_that_batch_only(front, monkeypatch):
    execute = front.engine.runner.execute
    calls = {"n": 0}

    def flaky(output, *args):
        calls["n"] += 1
        if calls["n"] == 3:  # mid-decode, with KV blocks held by both requests
            raise RuntimeError("probability tensor contains either inf, nan or element < 0")
        return execute(output, *args)

    monkeypatch.setattr(front.engine.runner, "execute", flaky)

    async def scenario():
        front.start()
        first = await asyncio.gather(_outcome(front, "one"), _outcome(front, "two"))
        later = await asyncio.gather(_outcome(front, "three"), _outcome(front, "four"))
        return first, later

    first, later = asyncio.run(scenario())
    assert first == [StepFailedError, StepFailedError]
    assert later == ["length", "length"]
    assert front.loop_error is None
    _assert_engine_is_empty(front)


def test_a_schedule_that_always_raises_kills_the_engine_which_still_drains(front, monkeypatch):
    def broken():
        raise RuntimeError("the scheduler's invariants are broken")

    monkeypatch.setattr(front.engine.scheduler, "schedule", broken)

    async def scenario():
        front.start()
        outcome = await _outcome(front, "doomed")
        refused = await _outcome(front, "too late")
        num_aborted = await asyncio.wait_for(front.drain(timeout_seconds=1), timeout=30)
        return outcome, refused, num_aborted

    outcome, refused, num_aborted = asyncio.run(scenario())
    assert outcome is EngineDeadError and refused is EngineDeadError
    assert num_aborted == 0
    assert isinstance(front.loop_error, RuntimeError)
    assert front.failures.num_failed == MAX_CONSECUTIVE_FAILED_STEPS


def test_a_failing_abort_kills_the_engine_at_once(front, monkeypatch):
    monkeypatch.setattr(front.engine, "num_steps_to_fail", 1)

    def abort_fails(request_ids):
        raise RuntimeError("the block pool is corrupt")

    monkeypatch.setattr(front.engine, "fail", abort_fails)

    async def scenario():
        front.start()
        return await _outcome(front, "doomed")

    assert asyncio.run(scenario()) is EngineDeadError
    assert str(front.loop_error) == "the block pool is corrupt"
