"""The validation's workload, its CPU clock and its bootstrap intervals. No wall-clock
figure is asserted (CI is a busy machine): only what the clocks and draws must do."""

from __future__ import annotations

import math

import pytest
import torch

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.sim.calibrate import profile_and_fit, validate
from engine.sim.calibrate_profile import Grid
from engine.sim.calibrate_validate import (
    OUTPUT_TOKENS,
    PROMPT_TOKENS,
    ThreadCpuClock,
    bootstrap_intervals,
    run_on_cpu_clock,
    validation_schedule,
)
from engine.sim.calibration_file import load_calibration
from engine.sim.offline import Arrival, RequestResult


def test_the_schedule_is_seeded_and_its_lengths_stay_in_range():
    arrivals = validation_schedule(2.0, 60.0, seed=1)
    assert arrivals == validation_schedule(2.0, 60.0, seed=1)
    assert arrivals != validation_schedule(2.0, 60.0, seed=2)
    assert 80 < len(arrivals) < 160
    lengths = {len(a.prompt_token_ids) for a in arrivals}
    assert min(lengths) >= PROMPT_TOKENS[0] and max(lengths) <= PROMPT_TOKENS[1]
    assert len(lengths) > len(arrivals) * 0.8  # NOTE: a range, not a few classes
    assert all(OUTPUT_TOKENS[0] <= a.max_tokens <= OUTPUT_TOKENS[1] for a in arrivals)
    times = [a.time_seconds for a in arrivals]
    assert times == sorted(times) and times[0] > 0 and times[-1] < 60.0


def test_a_bad_rate_is_one_config_error():
    with pytest.raises(ConfigError, match=r"rate=0, duration=5: both must be > 0"):
        validation_schedule(0, 5)


def test_the_cpu_clock_jumps_when_advanced_and_never_runs_backwards():
    clock = ThreadCpuClock()
    first = clock()
    clock.advance(2.5)
    clock.advance(-1.0)  # NOTE: ignored, as a virtual clock ignores it
    second = clock()
    assert second >= first + 2.5
    assert clock() >= second


def test_the_cpu_clock_run_adds_each_request_at_its_arrival_and_restores_the_clocks():
    engine = LLMEngine(EngineConfig(model="tiny"))
    clocks = engine.clock, engine.scheduler.clock
    arrivals = [Arrival(t, (65, 66, 67), 3, f"r{i}") for i, t in enumerate((0.5, 0.5, 3.0))]
    results = {r.request_id: r for r in run_on_cpu_clock(engine, arrivals)}
    assert sorted(results) == ["r0", "r1", "r2"]
    assert results["r2"].arrival_time - results["r0"].arrival_time == pytest.approx(2.5)
    assert all(r.ttft_seconds > 0 and len(r.itl_seconds) == 2 for r in results.values())
    assert (engine.clock, engine.scheduler.clock) == clocks


def _result(i: int, ttft: float, itls: tuple[float, ...]) -> RequestResult:
    return RequestResult(f"r{i}", 0.0, 10, len(itls) + 1, ttft, ttft + sum(itls), itls, 0, "length")


def test_bootstrap_intervals_are_seeded_and_hold_the_figure():
    results = [_result(i, 0.01 * (1 + i % 17), (0.003 + 0.0001 * (i % 7),) * 5) for i in range(80)]
    intervals = bootstrap_intervals(results, resamples=100)
    assert intervals == bootstrap_intervals(results, resamples=100)
    assert set(intervals) == {"ttft_p50", "ttft_p99", "itl_p50", "itl_p99"}
    for low, high in intervals.values():
        assert 0 < low <= high
    low, high = intervals["ttft_p50"]
    assert low <= 0.09 <= high  # NOTE: the figure itself
    assert all(math.isnan(v) for pair in bootstrap_intervals([]).values() for v in pair)


def test_a_cpu_timer_calibration_validates_on_the_cpu_clock(tmp_path):
    grid = Grid((16, 64), (64,), (1, 4), (16, 48), decode_steps=2, repeats=1, warmup_steps=1)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        run, engine = profile_and_fit(
            EngineConfig(model="tiny"), grid, tmp_path / "cal.json", timer="cpu"
        )
        validation = validate(run, engine, rate=3, duration_seconds=2).validation
    finally:
        torch.set_num_threads(threads)
    assert validation.clock == "cpu"
    assert validation.real.requests == validation.simulated.requests > 0
    saved = load_calibration(tmp_path / "cal.json")
    assert saved.step_noise is not None and len(saved.step_noise.quantiles) == 101
    assert saved.validation["clock"] == "cpu"
    assert set(saved.validation["real_intervals"]) == set(saved.validation["relative_error"])
