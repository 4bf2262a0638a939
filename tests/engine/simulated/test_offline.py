"""The simulated engine end to end on a virtual clock: the real scheduler, KV pool and
metrics, simulated time. No wall-clock assertion: every time here is simulated."""

from __future__ import annotations

import statistics

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.metrics import EngineMetrics
from engine.sim.offline import run_open_loop
from engine.sim.workload import RequestShape, poisson_schedule

SIM_8B_H100 = "sim:llama-3.1-8b@h100"


def _sample_total(metrics: EngineMetrics, name: str) -> float:
    return sum(
        s.value for family in metrics.registry.collect() for s in family.samples if s.name == name
    )


def _quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_every_request_completes_and_the_metrics_agree():
    arrivals = poisson_schedule(8, 10, [RequestShape(600, 64), RequestShape(100, 32)], seed=3)
    config = EngineConfig(model=SIM_8B_H100, max_model_len=1024)
    metrics = EngineMetrics(SIM_8B_H100, config.to_dict())
    run = run_open_loop(config, arrivals, observers=[metrics])
    assert sorted(r.request_id for r in run.results) == sorted(a.request_id for a in arrivals)
    by_id = {a.request_id: a for a in arrivals}
    for result in run.results:
        assert result.finish_reason == "length"
        assert result.num_output_tokens == by_id[result.request_id].max_tokens
        assert len(result.itl_seconds) == result.num_output_tokens - 1
        assert 0 < result.ttft_seconds <= result.e2e_seconds
    num_tokens = sum(r.num_output_tokens for r in run.results)
    assert _sample_total(metrics, "vllm:request_success_total") == len(arrivals)
    assert _sample_total(metrics, "vllm:generation_tokens_total") == num_tokens
    assert _sample_total(metrics, "vllm:time_to_first_token_seconds_count") == len(arrivals)
    assert _sample_total(metrics, "vllm:time_to_first_token_seconds_sum") == pytest.approx(
        sum(r.ttft_seconds for r in run.results)
    )
    # the simulated clock ran about as long as the schedule, not as long as the test
    assert run.simulated_seconds >= arrivals[-1].time_seconds


def test_steps_fill_part_of_the_simulated_time_at_gpu_scale():
    arrivals = poisson_schedule(2, 5, [RequestShape(200, 16)], seed=4)
    run = run_open_loop(EngineConfig(model=SIM_8B_H100, max_model_len=512), arrivals)
    busy = sum(run.step_seconds)
    assert 0 < busy <= run.simulated_seconds
    # each request's decode steps are a few ms on an H100: far below a second in total
    assert max(r.e2e_seconds for r in run.results) < 1.0


def test_runs_are_reproducible():
    arrivals = poisson_schedule(5, 4, [RequestShape(300, 20)], seed=5)
    config = EngineConfig(model=SIM_8B_H100, max_model_len=512)
    assert run_open_loop(config, arrivals) == run_open_loop(config, arrivals)


def test_a_small_kv_pool_preempts_and_still_completes_everything():
    # 40 blocks x 16 = 640 tokens for requests that grow to 400 each: they cannot all fit.
    arrivals = poisson_schedule(50, 0.5, [RequestShape(200, 200)], seed=6)
    config = EngineConfig(model=SIM_8B_H100, max_model_len=512, num_gpu_blocks=40)
    run = run_open_loop(config, arrivals)
    assert run.num_preemptions > 0
    assert any(r.num_preemptions for r in run.results)
    assert len(run.results) == len(arrivals)
    assert all(r.num_output_tokens == 200 for r in run.results)


def test_q13_smaller_token_budget_lowers_itl_p99_and_raises_long_prompt_ttft():
    """Chunked prefill's trade-off (seed question Q13) for an 8B model on an H100: a small
    ``max_num_batched_tokens`` keeps decodes from waiting behind a long prefill (lower ITL
    p99) but spreads each long prompt over more steps (higher TTFT)."""
    mix = [RequestShape(4000, 64, 0.3), RequestShape(256, 128, 0.7)]
    arrivals = poisson_schedule(10, 8, mix, seed=1)
    figures = {}
    for budget in (512, 8192):
        config = EngineConfig(model=SIM_8B_H100, max_num_batched_tokens=budget, max_model_len=8192)
        run = run_open_loop(config, arrivals)
        assert len(run.results) == len(arrivals)
        itl = [x for r in run.results for x in r.itl_seconds]
        long_ttft = [r.ttft_seconds for r in run.results if r.num_prompt_tokens >= 4000]
        figures[budget] = (_quantile(itl, 0.99), statistics.median(long_ttft))
    (itl_small, ttft_small), (itl_large, ttft_large) = figures[512], figures[8192]
    assert itl_small < itl_large
    assert ttft_small > ttft_large


def test_a_torch_model_is_refused_offline():
    with pytest.raises(ConfigError, match="sim: model"):
        run_open_loop(EngineConfig(model="tiny"), [])


def test_logprobs_are_refused_not_silently_dropped():
    from engine.errors import RequestError
    from engine.llm_engine import LLMEngine
    from engine.sampling_params import SamplingParams
    from engine.sim.runner import VirtualClock

    engine = LLMEngine(EngineConfig(model=SIM_8B_H100, num_gpu_blocks=200), VirtualClock())
    with pytest.raises(RequestError, match=r"logprobs=1: .* is simulated"):
        engine.add_request([1, 2, 3], SamplingParams(logprobs=1))
    assert not engine.has_unfinished_requests()
