"""``tailwatch engine calibrate``: profile the torch engine, fit ``Efficiency``, validate.

1. ``describe_device``: the device's nominal peaks (a datasheet for a known GPU, else
   micro-benchmarks; ``engine.sim.calibrate_device``);
2. ``Profiler``: the real engine's steps timed over a grid of batch shapes
   (``engine.sim.calibrate_profile``);
3. ``fit_roofline``: the step model's compute and bandwidth shares of those peaks and its
   step and per-request overheads, by robust least squares (``engine.sim.calibrate_fit``,
   turned into ``Efficiency`` by ``engine.sim.calibrate_factors``);
4. the calibration saved as JSON (``engine.sim.calibration_file``), with the profiled
   steps' within-cell spread as the simulator's step noise (``engine.sim.step_noise``),
   then loaded back as ``sim:<model>@file:<path>`` for
5. the side-by-side validation (``engine.sim.calibrate_validate``; the real engine in
   real time, or on its thread's CPU clock with the ``cpu`` timer), whose table is saved
   into the file too.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import torch

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.sim.calibrate_device import DTYPE_NAMES, describe_device
from engine.sim.calibrate_factors import FIT_METHOD, fitted_efficiency, residual_summary
from engine.sim.calibrate_fit import RooflineFit, StepSample, fit_roofline
from engine.sim.calibrate_profile import (
    Grid,
    Profiler,
    RecordingRunner,
    StepRecord,
    cell_summary,
    estimated_steps,
)
from engine.sim.calibrate_validate import (
    DEFAULT_DURATION_SECONDS,
    DEFAULT_RATE,
    LatencySummary,
    Validation,
    bootstrap_intervals,
    run_on_cpu_clock,
    run_real_time,
    simulate,
    validation_schedule,
)
from engine.sim.calibration_file import Calibration, save_calibration
from engine.sim.step_cost import Efficiency, StepCostModel
from engine.sim.step_noise import StepNoise, within_cell_ratios
from engine.sim.target import is_simulated

# NOTE: "cpu" times each step by the engine thread's CPU time, which other processes on a
# busy machine do not inflate; it is the whole step's cost only when torch computes on
# that one thread (a CPU device, one torch thread).
TIMERS = {"wall": time.perf_counter, "cpu": time.thread_time}


def check_timer(timer: str, device_type: str, torch_threads: int) -> None:
    if timer not in TIMERS:
        raise ConfigError(f"timer={timer!r}: must be one of {', '.join(TIMERS)}")
    if timer == "cpu" and (device_type != "cpu" or torch_threads != 1):
        raise ConfigError(
            f"timer='cpu': counts only the engine thread's CPU time, which is a step's cost "
            f"only on a CPU with one torch thread (here {device_type}, {torch_threads} "
            "threads); use --torch-threads 1 on a CPU, or the wall timer"
        )


class Progress(Protocol):
    """What the CLI draws: one phase at a time, with a total and a count done."""

    def start(self, phase: str, total: int) -> None: ...

    def update(self, done: int) -> None: ...


class _Quiet:
    def start(self, phase: str, total: int) -> None:
        pass

    def update(self, done: int) -> None:
        pass


@dataclass(frozen=True)
class CalibrationRun:
    calibration: Calibration
    fit: RooflineFit
    records: tuple[StepRecord, ...]
    path: Path
    validation: Validation | None = None

    @property
    def sim_model_name(self) -> str:
        return f"sim:{self.calibration.model}@file:{self.path}"


def profile_and_fit(
    config: EngineConfig,
    grid: Grid,
    output: Path,
    progress: Progress | None = None,
    seed: int = 0,
    timer: str = "wall",
) -> tuple[CalibrationRun, LLMEngine]:
    """Steps 1-4 (see the module); returns the run and the warm engine (for validation)."""
    if is_simulated(config.model):
        raise ConfigError(
            f"model={config.model!r}: calibrate profiles the torch engine; give a preset or "
            "checkpoint (the simulator of it is the result)"
        )
    progress = progress or _Quiet()
    engine = LLMEngine(config)
    grid.check_fits(config, engine.num_gpu_blocks)
    device, dtype = engine.runner.device, engine.runner.dtype
    check_timer(timer, device.type, torch.get_num_threads())
    progress.start(f"measuring peaks of {device.type}", 1)
    spec = describe_device(device, dtype)
    progress.update(1)
    dtype_name = DTYPE_NAMES[dtype]
    nominal = StepCostModel(
        engine.model_config, spec.gpu_spec(dtype_name), dtype_name, Efficiency(1.0, 1.0, 0.0)
    )
    progress.start("profiling engine steps", estimated_steps(grid, config.max_num_batched_tokens))
    profiler = Profiler(engine, seed, lambda cell, n: progress.update(n), TIMERS[timer])
    records = profiler.profile(grid)
    engine.runner = profiler.recorder.runner  # NOTE: the engine as it was, for validation
    costs = [nominal.cost(r.batch, r.num_sampled) for r in records]
    pairs = list(zip(costs, records, strict=True))
    per_cell = collections.Counter(r.cell for r in records)
    fit = fit_roofline(
        [
            StepSample(c.flops, c.bytes, r.seconds, len(r.batch), 1 / per_cell[r.cell])
            for c, r in pairs
        ]
    )
    efficiency, spec, notes = fitted_efficiency(fit, spec)
    by_record = {id(r): fit.predict(c.flops, c.bytes, len(r.batch)) for c, r in pairs}
    calibration = Calibration(
        model=config.model,
        shape=engine.model_config,
        dtype=dtype_name,
        device=spec,
        efficiency=efficiency,
        engine_knobs=config.to_dict(),
        torch_version=torch.__version__,
        created=datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        fit={
            "method": FIT_METHOD,
            "timer": timer,
            "num_steps": len(records),
            "num_memory_bound_steps": fit.num_memory_bound,
            "residuals": residual_summary(fit.relative_residuals),
            "notes": notes,
        },
        grid=grid.as_dict(),
        cells=cell_summary(records, lambda r: by_record[id(r)]),
        # NOTE: residual r = (predicted - measured) / measured, so measured / predicted
        # = 1 / (1 + r); within its cell, the factor the simulator draws a step's time by
        step_noise=StepNoise.of_ratios(
            within_cell_ratios(
                [r.cell for r in records], [1 / (1 + r) for r in fit.relative_residuals]
            )
        ),
    )
    save_calibration(calibration, output)
    return CalibrationRun(calibration, fit, tuple(records), output), engine


def _step_errors(steps: list[tuple[float, float, float]], engine: LLMEngine) -> dict:
    """Median step-time errors of the validation's own steps (see ``Validation``); the CPU
    figure only where thread CPU time is a step's whole cost (a CPU, one torch thread)."""
    timed = [s for s in steps if s[0] > 0 and s[1] > 0]
    if not timed:
        return {}
    errors = {
        "step_error_wall": statistics.median(p / w - 1 for w, _c, p in timed),
        "wall_over_cpu": statistics.median(w / c for w, c, _p in timed),
    }
    if engine.runner.device.type == "cpu" and torch.get_num_threads() == 1:
        errors["step_error_cpu"] = statistics.median(p / c - 1 for _w, c, p in timed)
    return errors


def validate(
    run: CalibrationRun,
    engine: LLMEngine,
    rate: float = DEFAULT_RATE,
    duration_seconds: float | None = None,
    progress: Progress | None = None,
    seed: int = 1,
    sleep: Callable[[float], None] = time.sleep,
) -> CalibrationRun:
    """Step 5: the real engine and the simulator loaded from the file, on one schedule;
    the validation is written into the file as well. The real engine runs on the clock
    its steps were profiled on: the wall clock, or (``cpu`` timer) its thread's CPU time
    (``engine.sim.calibrate_validate``)."""
    progress = progress or _Quiet()
    calibration = run.calibration
    clock = calibration.fit.get("timer", "wall")
    check_timer(clock, engine.runner.device.type, torch.get_num_threads())
    if duration_seconds is None:
        duration_seconds = DEFAULT_DURATION_SECONDS[clock]
    arrivals = validation_schedule(rate, duration_seconds, seed)
    time_kind = "in real time" if clock == "wall" else "on its thread's CPU clock"
    progress.start(f"real engine, {len(arrivals)} requests {time_kind}", len(arrivals))
    model = StepCostModel(
        calibration.shape,
        calibration.device.gpu_spec(calibration.dtype),
        calibration.dtype,
        calibration.efficiency,
    )
    recorder = RecordingRunner(engine.runner)
    engine.runner = recorder  # type: ignore[assignment]
    steps: list[tuple[float, float, float]] = []

    def on_step(wall: float, cpu: float) -> None:
        if recorder.last_batch:
            predicted = model.cost(recorder.last_batch, recorder.last_num_sampled).step_seconds
            steps.append((wall, cpu, predicted))

    try:
        if clock == "cpu":
            results = run_on_cpu_clock(engine, arrivals, progress.update, on_step)
        else:
            results = run_real_time(engine, arrivals, sleep, progress.update, on_step)
    finally:
        engine.runner = recorder.runner
    real = LatencySummary.of(results)
    progress.start("calibrated simulator, virtual time", 1)
    sim_config = dataclasses.replace(
        engine.config, model=run.sim_model_name, device="auto", dtype="auto"
    )
    simulated = simulate(sim_config, arrivals)
    progress.update(1)
    validation = Validation(
        rate,
        duration_seconds,
        real,
        simulated,
        clock=clock,
        real_intervals=bootstrap_intervals(results),
        **_step_errors(steps, engine),
    )
    calibration = dataclasses.replace(calibration, validation=validation.as_dict())
    save_calibration(calibration, run.path)
    return dataclasses.replace(run, calibration=calibration, validation=validation)


def calibrate(
    config: EngineConfig,
    grid: Grid,
    output: Path,
    *,
    validation: bool = True,
    rate: float = DEFAULT_RATE,
    duration_seconds: float | None = None,
    torch_threads: int | None = None,
    timer: str = "wall",
    progress: Progress | None = None,
    on_fitted: Callable[[CalibrationRun], None] | None = None,
) -> CalibrationRun:
    """Profile, fit, save and (unless ``validation`` is off) validate; see the module."""
    if timer not in TIMERS:
        raise ConfigError(f"timer={timer!r}: must be one of {', '.join(TIMERS)}")
    threads_before = torch.get_num_threads()
    if torch_threads is not None:
        torch.set_num_threads(torch_threads)
    try:
        run, engine = profile_and_fit(config, grid, output, progress, timer=timer)
        if on_fitted is not None:
            on_fitted(run)
        if not validation:
            return run
        return validate(run, engine, rate, duration_seconds, progress)
    finally:
        torch.set_num_threads(threads_before)  # NOTE: the process's setting, as it was
