"""A calibrated simulator's step noise: deterministic per seed, the stored distribution
reproduced, off for a datasheet spec, the same on the fast path and the per-step path,
and carried by the calibration file (a bad one is one error naming the field)."""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.sim.calibration_file import load_calibration, save_calibration
from engine.sim.offline import run_open_loop
from engine.sim.runner import SimRunner
from engine.sim.step_cost import BatchItem
from engine.sim.step_noise import NUM_QUANTILES, StepNoise, within_cell_ratios
from engine.sim.workload import RequestShape, poisson_schedule
from tests.engine.simulated.test_calibrate_file import _calibration

NOISE = StepNoise.of_ratios([0.8, 0.9, 0.95, 1.0, 1.0, 1.02, 1.05, 1.1, 1.3, 2.0])


def test_quantiles_span_the_ratios_and_interpolate():
    noise = StepNoise.of_ratios([3.0, 1.0, 2.0])
    assert len(noise.quantiles) == NUM_QUANTILES
    assert noise.quantiles[0] == 1.0 and noise.quantiles[-1] == 3.0
    assert noise.quantiles[NUM_QUANTILES // 2] == 2.0
    assert noise.quantiles[25] == pytest.approx(1.5)
    assert StepNoise.of_ratios([1.25]).quantiles == (1.25,) * NUM_QUANTILES


def test_ratios_within_a_cell_drop_the_cells_own_error():
    cells = ["a", "a", "a", "b", "b"]
    # cell a is predicted 2x too fast throughout, cell b exactly: only the spread stays
    ratios = within_cell_ratios(cells, [1.8, 2.0, 2.4, 0.9, 1.1])
    assert ratios == pytest.approx([0.9, 1.0, 1.2, 0.9, 1.1])
    assert within_cell_ratios(["a"] * 3, [1.3] * 3) == [1.0] * 3
    with pytest.raises(ValueError, match="2 cells for 1 ratios"):
        within_cell_ratios(["a", "b"], [1.0])


def test_draws_are_a_function_of_seed_and_step():
    first = [NOISE.factor(7, i) for i in range(200)]
    assert first == [NOISE.factor(7, i) for i in range(200)]
    assert first != [NOISE.factor(8, i) for i in range(200)]
    assert all(NOISE.quantiles[0] <= f <= NOISE.quantiles[-1] for f in first)


def test_draws_reproduce_the_stored_distribution():
    draws = sorted(NOISE.factor(3, i) for i in range(20_000))
    n = len(draws)
    for k in (1, 10, 25, 50, 75, 90, 99):
        empirical = draws[k * n // 100]
        stored = NOISE.quantiles[k]
        # NOTE: between the neighbouring stored quantiles, as sampling error allows
        assert NOISE.quantiles[max(0, k - 2)] <= empirical <= NOISE.quantiles[min(100, k + 2)]
        assert empirical == pytest.approx(stored, rel=0.05)
    assert statistics.fmean(draws) == pytest.approx(statistics.fmean(NOISE.quantiles), rel=0.01)


@settings(max_examples=50, deadline=None)
@given(st.lists(st.floats(0.01, 100.0), min_size=1, max_size=50), st.integers(0, 2**63))
def test_any_ratios_give_draws_within_their_range(ratios, seed):
    noise = StepNoise.of_ratios(ratios)
    for i in range(20):
        assert min(ratios) * (1 - 1e-12) <= noise.factor(seed, i) <= max(ratios) * (1 + 1e-12)


@pytest.mark.parametrize(
    "quantiles, says",
    [
        ((), "quantiles: 0 given, need at least 2"),
        ((1.0,), "quantiles: 1 given, need at least 2"),
        ((1.0, 0.5), "quantiles[1]=0.5: below quantiles[0]"),
        ((0.0, 1.0), "quantiles[0]=0.0: must be a finite number > 0"),
        ((1.0, math.inf), "quantiles[1]=inf: must be a finite number > 0"),
        ((1.0, "2"), "quantiles[1]='2': expected a number"),
        ((True, 2.0), "quantiles[0]=True: expected a number"),
    ],
)
def test_bad_quantiles_are_one_config_error(quantiles, says):
    with pytest.raises(ConfigError) as raised:
        StepNoise(quantiles)
    assert str(raised.value) == says


def test_a_runner_without_noise_spends_exactly_the_predicted_time():
    engine = LLMEngine(EngineConfig(model="sim:llama-3.1-8b@h100"))
    runner = engine.simulation.runner
    assert runner.noise is None
    spent = []
    quiet = SimRunner(runner.cost_model, advance=spent.append)
    batch = [BatchItem(1, 100), BatchItem(64, 512)]
    cost = quiet.spend(batch, 2, 0.0)
    assert spent == [cost.step_seconds] == [runner.cost_model.cost(batch, 2).step_seconds]


def test_a_noisy_runner_scales_each_step_by_its_draw():
    spent = []
    engine = LLMEngine(EngineConfig(model="sim:llama-3.1-8b@h100"))
    model = engine.simulation.runner.cost_model
    runner = SimRunner(model, seed=5, advance=spent.append, noise=NOISE)
    batch = [BatchItem(1, 100)]
    for _ in range(4):
        runner.spend(batch, 1, 0.0)
    exact = model.cost(batch, 1).step_seconds
    assert spent == [pytest.approx(exact * NOISE.factor(5, i)) for i in range(4)]
    assert runner.last_cost.step_seconds == spent[-1]


def _noisy_file(tmp_path, noise: StepNoise | None = NOISE):
    path = tmp_path / "cal.json"
    save_calibration(_calibration(step_noise=noise), path)
    return f"sim:tiny@file:{path}"


def test_the_file_round_trips_its_noise_and_an_old_file_has_none(tmp_path):
    name = _noisy_file(tmp_path)
    path = tmp_path / "cal.json"
    assert load_calibration(path).step_noise == NOISE
    assert LLMEngine(EngineConfig(model=name)).simulation.runner.noise.noise == NOISE
    body = json.loads(path.read_text())
    del body["step_noise"]  # NOTE: a format-1 file written before step noise
    path.write_text(json.dumps(body))
    assert load_calibration(path).step_noise is None
    assert LLMEngine(EngineConfig(model=name)).simulation.runner.noise is None


@pytest.mark.parametrize(
    "noise, says",
    [
        ([1, 2], "step_noise=[1, 2]: expected an object"),
        ({"quantiles": "1,2"}, "step_noise.quantiles='1,2': expected a list"),
        ({"quantiles": [2, 1]}, "step_noise.quantiles[1]=1: below quantiles[0]"),
    ],
)
def test_a_bad_noise_in_the_file_is_one_error_naming_the_path(tmp_path, noise, says):
    _noisy_file(tmp_path)
    path = tmp_path / "cal.json"
    body = json.loads(path.read_text())
    body["step_noise"] = noise
    path.write_text(json.dumps(body))
    with pytest.raises(ConfigError) as raised:
        load_calibration(path)
    assert str(raised.value) == f"calibration file {path}: {says}"


def _arrivals():
    # NOTE: 600-token prompts chunked next to running decodes, and decode-only stretches
    return poisson_schedule(4, 4, [RequestShape(600, 24, 0.4), RequestShape(40, 48, 0.6)], seed=2)


def _run(name: str, seed: int = 0, fast: bool = True):
    config = EngineConfig(model=name, seed=seed, max_num_batched_tokens=256)
    return run_open_loop(config, _arrivals(), fast=fast)


def test_the_fast_path_draws_the_same_noise_as_the_per_step_path(tmp_path):
    name = _noisy_file(tmp_path)
    fast, slow = _run(name, fast=True), _run(name, fast=False)
    assert fast.num_fast_steps > 0
    assert fast.step_seconds == slow.step_seconds
    assert fast.results == slow.results


def test_noisy_runs_repeat_per_seed_and_differ_across_seeds(tmp_path):
    noisy = _noisy_file(tmp_path)
    first, again, other = _run(noisy, seed=1), _run(noisy, seed=1), _run(noisy, seed=2)
    assert first.step_seconds == again.step_seconds and first.results == again.results
    assert first.step_seconds != other.step_seconds


def test_each_step_is_its_predicted_time_times_its_draw(tmp_path):
    # NOTE: every request there at time 0, so the batches do not depend on step times
    arrivals = [dataclasses.replace(a, time_seconds=0.0) for a in _arrivals()]
    flat = tmp_path / "flat"
    flat.mkdir()
    config = EngineConfig(model=_noisy_file(tmp_path), seed=3, max_num_batched_tokens=256)
    noisy = run_open_loop(config, arrivals)
    exact = run_open_loop(dataclasses.replace(config, model=_noisy_file(flat, None)), arrivals)
    assert noisy.num_steps == exact.num_steps
    expected = [e * NOISE.factor(3, i) for i, e in enumerate(exact.step_seconds)]
    assert noisy.step_seconds == pytest.approx(expected, rel=1e-12)


def test_noise_of_ones_is_no_noise(tmp_path):
    flat = tmp_path / "flat"
    flat.mkdir()
    ones = StepNoise((1.0,) * NUM_QUANTILES)
    assert _run(_noisy_file(tmp_path, ones)) == _run(_noisy_file(flat, None))
