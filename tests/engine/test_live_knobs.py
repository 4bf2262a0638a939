"""Live knob changes between steps, and the KV block reservation behind them."""

from __future__ import annotations

import asyncio
import time

import pytest

from engine.async_engine import AsyncEngine, EngineDrainingError, QueueFullError
from engine.block_pool import BlockPool
from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams

PARAMS = SamplingParams(max_tokens=12, temperature=0.0, ignore_eos=True)


def test_reservation_takes_free_blocks_now_and_held_ones_as_they_free():
    pool = BlockPool(10)
    held = pool.get_new_blocks(6)
    pool.set_num_reserved(8)
    assert len(pool.reserved_blocks) == 4 and pool.num_free_blocks == 0
    assert pool.usage == 1.0  # all usable blocks are held
    pool.free_blocks(held[:3])
    assert len(pool.reserved_blocks) == 7 and pool.num_free_blocks == 0
    pool.free_blocks(held[3:])
    assert len(pool.reserved_blocks) == 8 and pool.num_free_blocks == 2
    pool.set_num_reserved(0)
    assert pool.num_free_blocks == 10 and pool.usage == 0.0
    with pytest.raises(ValueError, match="cannot reserve 10 of 10"):
        pool.set_num_reserved(10)


@pytest.fixture
def engine() -> LLMEngine:
    return LLMEngine(EngineConfig(max_model_len=128, num_gpu_blocks=64, max_num_seqs=8))


def test_update_knobs_validates_all_or_nothing(engine):
    before = engine.knobs()
    limits_before = engine.scheduler.limits
    with pytest.raises(ConfigError, match="max_model_len: cannot be changed while running"):
        engine.update_knobs({"max_model_len": 64})
    with pytest.raises(ConfigError, match="max_num_seqs=0"):
        engine.update_knobs({"max_num_seqs": 0, "max_num_batched_tokens": 64})
    with pytest.raises(ConfigError, match="enable_prefix_caching='yes'"):
        engine.update_knobs({"enable_prefix_caching": "yes"})
    with pytest.raises(ConfigError, match=r"max_model_len=128: the KV pool holds only 64"):
        engine.update_knobs({"num_usable_gpu_blocks": 4})
    with pytest.raises(ConfigError, match="only 64 blocks"):
        engine.update_knobs({"num_usable_gpu_blocks": 65})
    assert engine.knobs() == before
    assert engine.scheduler.limits is limits_before  # never half replaced


def test_lowering_max_num_seqs_caps_running(engine):
    changes = engine.update_knobs({"max_num_seqs": 2, "max_num_batched_tokens": 64})
    assert {c.knob: (c.old_value, c.new_value) for c in changes} == {
        "max_num_seqs": (8, 2),
        "max_num_batched_tokens": (2048, 64),
    }
    assert engine.config.max_num_seqs == 8  # the given config is never written to
    assert engine.scheduler.limits == engine.live_config.scheduler_limits()
    for i in range(5):
        engine.add_request(f"request {i}", PARAMS)
    peak = 0
    while engine.has_unfinished_requests():
        engine.step()
        peak = max(peak, engine.stats().num_running)
    assert peak == 2


def test_shrinking_the_kv_budget_forces_preemption_and_release_restores(engine):
    engine.update_knobs({"num_usable_gpu_blocks": 8})
    assert engine.knobs()["num_usable_gpu_blocks"] == 8
    for i in range(6):
        engine.add_request(f"pressure {i} " * 4, SamplingParams(max_tokens=40, ignore_eos=True))
    usages = []
    while engine.has_unfinished_requests():
        engine.step()
        usages.append(engine.stats().kv_cache_usage)
    assert engine.stats().num_preemptions_total > 0
    assert max(usages) > 0.9
    engine.update_knobs({"num_usable_gpu_blocks": 64})
    assert engine.scheduler.kv_cache.num_free_blocks == 64


def test_prefix_caching_can_be_switched_off_and_on(engine):
    prompt = "a shared prefix that spans several blocks of tokens " * 2
    engine.update_knobs({"enable_prefix_caching": False})
    for _ in range(2):
        engine.add_request(prompt, PARAMS)
        while engine.has_unfinished_requests():
            engine.step()
    assert engine.stats().prefix_cache_hits_tokens == 0
    engine.update_knobs({"enable_prefix_caching": True})
    for _ in range(2):
        engine.add_request(prompt, PARAMS)
        while engine.has_unfinished_requests():
            engine.step()
    assert engine.stats().prefix_cache_hits_tokens > 0


def _collect(async_engine, prompt, params=PARAMS, **kw):
    async def run():
        return [o async for o in async_engine.generate(prompt, params, **kw)]

    return run()


def test_async_engine_admission_control_and_faults():
    async def scenario():
        engine = LLMEngine(EngineConfig(max_model_len=128, num_gpu_blocks=64, max_num_seqs=2))
        front = AsyncEngine(engine, max_waiting_requests=2, max_concurrency_per_tenant=1)
        front.start()
        try:
            await front.warm_up()
            assert front.is_ready
            changes = await front.update_knobs({"step_delay_seconds": 0.05})
            assert [c.knob for c in changes] == ["step_delay_seconds"]
            with pytest.raises(ConfigError, match="step_delay_seconds=-1"):
                await front.update_knobs({"step_delay_seconds": -1, "max_num_seqs": 1})
            assert front.knobs()["max_num_seqs"] == 2  # all or nothing
            long = SamplingParams(max_tokens=30, ignore_eos=True)
            tenant_task = asyncio.create_task(_collect(front, "t", long, tenant="acme"))
            await asyncio.sleep(0.2)
            with pytest.raises(QueueFullError) as rejected:
                await _collect(front, "one too many", tenant="acme")
            assert rejected.value.reason == "tenant_concurrency"
            tasks = [asyncio.create_task(_collect(front, f"p{i}", long)) for i in range(6)]
            results = await asyncio.gather(*tasks, tenant_task, return_exceptions=True)
            refused = [r for r in results if isinstance(r, QueueFullError)]
            served = [r for r in results if isinstance(r, list)]
            assert refused and all(r.retry_after_seconds >= 1 for r in refused)
            assert {r.reason for r in refused} == {"max_num_queued_reqs"}
            assert served and all(r[-1].finished and r[-1].num_output_tokens == 30 for r in served)
            assert len(refused) + len(served) == 7
            front.begin_drain()
            assert not front.is_ready
            with pytest.raises(EngineDrainingError):
                await _collect(front, "late")
        finally:
            front.shutdown()

    asyncio.run(scenario())


def test_admission_limits_change_live_all_or_nothing_and_are_recorded():
    async def scenario():
        engine = LLMEngine(EngineConfig(max_model_len=256, num_gpu_blocks=64, max_num_seqs=1))
        front = AsyncEngine(engine)
        front.start()
        try:
            await front.warm_up()
            assert front.knobs()["max_waiting_requests"] is None
            for bad in (0, -1, True, 1.5, "8"):
                with pytest.raises(ConfigError, match="max_waiting_requests="):
                    await front.update_knobs({"max_waiting_requests": bad, "max_num_seqs": 2})
                assert front.knobs()["max_num_seqs"] == 1  # all or nothing
            (change,) = await front.update_knobs({"max_waiting_requests": 1})
            assert (change.knob, change.old_value, change.new_value) == (
                "max_waiting_requests", None, 1,
            )  # fmt: skip
            assert list(front.events)[-1] == change
            long = SamplingParams(max_tokens=200, ignore_eos=True)

            async def until(condition) -> None:  # bounded: 10 s
                for _ in range(2000):
                    if condition():
                        return
                    await asyncio.sleep(0.005)

            # NOTE: an add the engine thread has not run yet counts as queued too
            running = asyncio.create_task(_collect(front, "runs", long))
            loop = front._loop
            await until(lambda: front.num_in_flight == 1 and not loop.num_pending_adds)
            await until(lambda: loop.num_waiting == 0)  # scheduled: it holds the one seq slot
            waiting = asyncio.create_task(_collect(front, "waits", long))
            await until(lambda: front._loop.num_waiting >= 1)
            with pytest.raises(QueueFullError) as refused:
                await _collect(front, "refused")
            assert refused.value.reason == "max_num_queued_reqs"
            await front.update_knobs({"max_waiting_requests": None})  # unbounded again
            admitted = await _collect(front, "admitted")
            assert admitted[-1].finished
            assert all(r[-1].finished for r in await asyncio.gather(running, waiting))
            assert front.max_waiting_requests is None
            assert await front.update_knobs({"max_waiting_requests": None}) == []  # no change
        finally:
            front.shutdown()

    asyncio.run(scenario())


def test_async_engine_abort_on_close_frees_blocks():
    async def scenario():
        engine = LLMEngine(EngineConfig(max_model_len=256, num_gpu_blocks=64))
        front = AsyncEngine(engine)
        front.start()
        try:
            stream = front.generate("stream me", SamplingParams(max_tokens=200, ignore_eos=True))
            async for out in stream:
                if out.num_output_tokens >= 3:
                    break
            await stream.aclose()
            for _ in range(100):
                if not engine.has_unfinished_requests():
                    break
                await asyncio.sleep(0.01)
            assert engine.stats().kv_cache_usage == 0.0 and front.num_in_flight == 0
        finally:
            front.shutdown()

    asyncio.run(scenario())


def test_prefill_seconds_per_token_slows_each_prefill_by_its_prompt_tokens():
    """The long-prompt drill's fault: a step that computes N prompt tokens takes at least
    N x the fault longer, before its tokens are delivered (a lower bound, so load-proof)."""

    async def scenario():
        engine = LLMEngine(EngineConfig(max_model_len=256, num_gpu_blocks=64, max_num_seqs=2))
        front = AsyncEngine(engine)
        front.start()
        try:
            await front.warm_up()
            for bad in (-1, 0.5, "fast", True):
                with pytest.raises(ConfigError, match="prefill_seconds_per_token="):
                    await front.update_knobs({"prefill_seconds_per_token": bad})
            changes = await front.update_knobs({"prefill_seconds_per_token": 0.002})
            assert [(c.knob, c.old_value, c.new_value) for c in changes] == [
                ("prefill_seconds_per_token", 0.0, 0.002)
            ]
            assert front.knobs()["prefill_seconds_per_token"] == 0.002
            prompt = "x" * 120  # byte-level: 120 prompt tokens (plus any specials)
            started = time.monotonic()
            outputs = await _collect(front, prompt, SamplingParams(max_tokens=1))
            assert outputs[-1].finished
            assert time.monotonic() - started >= 120 * 0.002
        finally:
            front.shutdown()

    asyncio.run(scenario())
