"""``tailwatch engine calibrate`` end to end on a tiny grid, its option errors, and the
side-by-side validation's plumbing on an injected clock. No wall-clock accuracy is asserted:
that is the benchmark's (``python -m bench calibration``)."""

from __future__ import annotations

import json

import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.sim.calibrate import profile_and_fit, validate
from engine.sim.calibrate_profile import Grid
from engine.sim.calibrate_validate import MAX_IDLE_WAIT_SECONDS, run_real_time
from engine.sim.calibration_file import load_calibration
from engine.sim.offline import Arrival
from tailwatch.cli import app
from tailwatch.engine_cli import _sizes

TINY_GRID = [
    "--prefill-tokens",
    "16,64",
    "--prefill-contexts",
    "64",
    "--decode-batches",
    "1,4",
    "--decode-contexts",
    "16,48",
    "--decode-steps",
    "2",
    "--repeats",
    "1",
    "--warmup-steps",
    "1",
]


def _calibrate(*args: str):
    return CliRunner().invoke(app, ["engine", "calibrate", *args], catch_exceptions=False)


def test_calibrate_profiles_fits_and_writes_a_file_the_simulator_loads(tmp_path):
    output = tmp_path / "cal.json"
    result = _calibrate(*TINY_GRID, "--skip-validation", "--torch-threads", "1", "-o", str(output))
    assert result.exit_code == 0, result.output
    assert "fit residuals" in result.output and "fitted factors" in result.output
    assert f"--model sim:tiny@file:{output}" in result.output.replace("\n", "")
    calibration = load_calibration(output)
    assert calibration.model == "tiny" and calibration.dtype == "float32"
    assert calibration.device.type == "cpu" and calibration.device.torch_threads == 1
    assert calibration.validation is None
    body = json.loads(output.read_text())
    assert body["grid"]["prefill_tokens"] == [16, 64]
    assert body["engine_knobs"]["model"] == "tiny" and body["torch_version"]
    # every profiled step is in the fit, and every cell has its residual
    kinds = {(c["cell"], c["kind"]) for c in calibration.cells}
    assert ("prefill 16 x 64", "prefill") in kinds and ("decode 4 x 48", "decode") in kinds
    assert calibration.fit["num_steps"] == sum(c["steps"] for c in calibration.cells)
    engine = LLMEngine(EngineConfig(model=f"sim:tiny@file:{output}"))
    assert engine.simulation.runner.cost_model.efficiency == calibration.efficiency


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--prefill-tokens", "0,16"], "--prefill-tokens '0,16': sizes must be positive"),
        (["--decode-batches", "-4"], "--decode-batches '-4': sizes must be positive"),
        (["--decode-contexts", "a,b"], "--decode-contexts 'a,b': expected comma-separated"),
        (["--prefill-contexts", ","], "--prefill-contexts ',': sizes must be positive"),
        (["--decode-steps", "0"], "--decode-steps=0: must be > 0"),
        (["--repeats", "-1"], "--repeats=-1: must be > 0"),
        (["--warmup-steps", "-1"], "--warmup-steps=-1: must be >= 0"),
        (["--duration", "0"], "--duration=0.0: must be > 0"),
        (["--torch-threads", "0"], "--torch-threads=0: must be > 0"),
        (["-o", "/nonexistent-dir/cal.json"], "--output /nonexistent-dir/cal.json: directory"),
    ],
)
def test_option_errors_are_one_line_with_exit_code_2(args, says):
    result = _calibrate(*args)
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--decode-contexts", "4096"], "more than max_model_len=2048"),
        (["--prefill-tokens", "4096"], "prefill_tokens=4096: longer than every prefill"),
        (["--timer", "cpu", "--torch-threads", "2"], "timer='cpu'"),
        (["--timer", "gpu"], "timer='gpu': must be one of wall, cpu"),
        (["--model", "sim:llama-3.1-8b@h100"], "calibrate profiles the torch engine"),
    ],
)
def test_grid_and_engine_errors_are_clear_with_exit_code_2(tmp_path, args, says):
    result = _calibrate(*args, "--skip-validation", "-o", str(tmp_path / "c.json"))
    assert result.exit_code == 2
    assert says in " ".join(result.output.split())
    assert not (tmp_path / "c.json").exists()


class FakeClock:
    """A clock that moves only when slept on: the real-time loop's waits, made instant."""

    def __init__(self) -> None:
        self.now, self.sleeps = 100.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_real_time_run_adds_each_request_at_its_arrival():
    clock = FakeClock()
    engine = LLMEngine(EngineConfig(model="tiny"), clock=clock)
    arrivals = [Arrival(t, (65, 66, 67), 3, f"r{i}") for i, t in enumerate((0.5, 0.5, 3.0))]
    results = run_real_time(engine, arrivals, sleep=clock.sleep)
    assert sorted(r.request_id for r in results) == ["r0", "r1", "r2"]
    assert all(r.num_output_tokens == 3 and len(r.itl_seconds) == 2 for r in results)
    assert all(0 < s <= MAX_IDLE_WAIT_SECONDS for s in clock.sleeps)
    # the idle engine slept to each arrival, no further
    assert clock.now == pytest.approx(103.0)
    assert {round(r.arrival_time, 6) for r in results} == {100.5, 103.0}


def test_validation_runs_both_sides_and_saves_the_table(tmp_path):
    grid = Grid((16, 64), (64,), (1, 4), (16, 48), decode_steps=2, repeats=1, warmup_steps=1)
    run, engine = profile_and_fit(EngineConfig(model="tiny"), grid, tmp_path / "cal.json")
    clock = FakeClock()
    engine.clock = engine.scheduler.clock = clock  # NOTE: the real side on a frozen clock
    validated = validate(run, engine, rate=3, duration_seconds=2, sleep=clock.sleep)
    validation = validated.validation
    assert validation.real.requests == validation.simulated.requests > 0
    saved = load_calibration(tmp_path / "cal.json").validation
    assert saved["real"]["requests"] == validation.real.requests
    assert set(saved["relative_error"]) == {"ttft_p50", "ttft_p99", "itl_p50", "itl_p99"}


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(max_size=20)
    | st.lists(st.integers(-(2**70), 2**70), max_size=4).map(lambda xs: ",".join(map(str, xs)))
)
def test_any_size_list_is_accepted_whole_or_refused_with_exit_code_2(text):
    parse = _sizes("--prefill-tokens", "help").callback
    try:
        assert parse(text) == text
    except typer.Exit as exit_:
        assert exit_.exit_code == 2
    else:
        sizes = [int(part) for part in text.split(",") if part.strip()]
        assert sizes and min(sizes) >= 1


@settings(max_examples=60, deadline=None)
@given(
    sizes=st.lists(st.integers(-(2**40), 2**40), min_size=0, max_size=3),
    steps=st.integers(-(2**40), 2**40),
)
def test_a_grid_is_valid_or_one_config_error(sizes, steps):
    try:
        grid = Grid(tuple(sizes), (512,), (1,), (64,), decode_steps=steps)
    except ConfigError as error:
        assert "prefill_tokens" in str(error) or "decode_steps" in str(error)
    else:
        assert min(grid.prefill_tokens) >= 1 and max(grid.prefill_tokens) <= 512
        assert grid.decode_steps >= 1
        try:
            grid.check_fits(EngineConfig(), num_blocks=8192)
        except ConfigError as error:
            assert "max_model_len" in str(error)
