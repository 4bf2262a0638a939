"""What ``tailwatch engine calibrate`` draws: progress bars per phase and summary tables
(the fitted factors, the per-cell fit residuals, the validation's side-by-side table)."""

from __future__ import annotations

import math

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table


class RichProgress:
    """``engine.sim.calibrate.Progress`` as rich bars: one bar per phase."""

    def __init__(self, console: Console) -> None:
        self.bar = Progress(
            "[progress.description]{task.description}",
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        )
        self.task = None

    def __enter__(self) -> RichProgress:
        self.bar.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self._finish()
        self.bar.__exit__(*exc)

    def _finish(self) -> None:
        if self.task is not None:
            total = self.bar.tasks[self.task].total
            self.bar.update(self.task, completed=total)

    def start(self, phase: str, total: int) -> None:
        self._finish()
        self.task = self.bar.add_task(phase, total=max(total, 1))

    def update(self, done: int) -> None:
        if self.task is not None:
            total = self.bar.tasks[self.task].total or done
            # NOTE: the profile's step count is an estimate: grow the bar, never overflow it
            self.bar.update(self.task, completed=done, total=max(total, done))


def _ms(seconds: float) -> str:
    return "-" if math.isnan(seconds) else f"{seconds * 1000:.2f}"


def _pct(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 100:+.1f}%"


def print_fit(console: Console, run) -> None:
    calibration = run.calibration
    device, efficiency, fit = calibration.device, calibration.efficiency, calibration.fit
    table = Table(title=f"fit residuals: {fit['num_steps']} steps ({fit['timer']} timer)")
    for column in ("cell", "kind", "steps", "measured ms", "predicted ms", "error"):
        table.add_column(column, justify="left" if column in ("cell", "kind") else "right")
    for cell in calibration.cells:
        table.add_row(
            cell["cell"],
            cell["kind"],
            str(cell["steps"]),
            _ms(cell["measured_median_seconds"]),
            _ms(cell["predicted_median_seconds"]),
            _pct(cell["relative_error"]),
        )
    console.print(table)
    residuals = fit["residuals"]
    console.print(
        f"per-step |relative residual|: median {residuals['median_abs_relative'] * 100:.1f}%, "
        f"p90 {residuals['p90_abs_relative'] * 100:.1f}%, "
        f"max {residuals['max_abs_relative'] * 100:.1f}%; "
        f"{fit['num_memory_bound_steps']} of {fit['num_steps']} steps memory-bound"
    )
    factors = Table(title=f"fitted factors: {device.description}, {calibration.dtype}")
    for column in ("factor", "value", "of nominal"):
        factors.add_column(column, justify="right")
    factors.add_row(
        "compute", f"{efficiency.compute:.3f}", f"{device.peak_flops_per_second / 1e9:.1f} GFLOP/s"
    )
    factors.add_row(
        "bandwidth",
        f"{efficiency.bandwidth:.3f}",
        f"{device.memory_bandwidth_bytes_per_second / 1e9:.1f} GB/s",
    )
    factors.add_row("step overhead", f"{efficiency.step_overhead_seconds * 1000:.3f} ms", "")
    factors.add_row(
        "per-request overhead", f"{efficiency.request_overhead_seconds * 1e6:.1f} µs", ""
    )
    console.print(factors)
    noise = calibration.step_noise
    if noise is not None:
        q = noise.quantiles
        console.print(
            "step noise (measured / predicted, drawn per simulated step): "
            f"p1 {q[len(q) // 100]:.2f}, p50 {q[len(q) // 2]:.2f}, p99 {q[-1 - len(q) // 100]:.2f}"
        )
    for note in fit["notes"]:
        console.print(f"note: {note}")


def print_validation(console: Console, validation) -> None:
    clock = "the wall clock" if validation.clock == "wall" else "its thread's CPU clock"
    table = Table(
        title=(
            f"validation: {validation.real.requests} requests, Poisson "
            f"{validation.rate:g} req/s for {validation.duration_seconds:g} s, real engine on "
            f"{clock}"
        )
    )
    columns = ("metric", "real engine ms", "real 95% interval", "simulator ms", "error", "within")
    for column in columns:
        table.add_column(column, justify="right")
    for metric in ("ttft_p50", "ttft_p99", "itl_p50", "itl_p99"):
        error = validation.relative_error(metric)
        within = abs(error) <= validation.tolerance
        low, high = validation.interval_error(metric)
        table.add_row(
            metric.replace("_", " ").upper().replace(" P", " p"),
            _ms(getattr(validation.real, metric)),
            f"{_pct(low)} .. {_pct(high)}",
            _ms(getattr(validation.simulated, metric)),
            _pct(error),
            "[green]yes[/]" if within else "[red]no[/]",
        )
    console.print(table)
    console.print(
        "the validation's own steps, predicted vs measured (median): "
        f"wall {_pct(validation.step_error_wall)}, engine CPU {_pct(validation.step_error_cpu)}; "
        f"wall / CPU {validation.wall_over_cpu:.2f} (above 1: waiting for a core)"
    )
    misses = validation.misses()
    tolerance = f"{validation.tolerance * 100:.0f}%"
    if misses:
        console.print(f"[red]outside {tolerance}:[/] {', '.join(misses)}")
    else:
        console.print(f"[green]all four within {tolerance}[/]")
