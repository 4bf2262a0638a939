"""From a roofline fit to the simulator's ``Efficiency`` on the profiled device's spec,
with the notes a reader of the calibration needs (a raised peak, a factor only bounded)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from engine.sim.calibrate_fit import RooflineFit
from engine.sim.calibration_file import DeviceSpec
from engine.sim.step_cost import Efficiency

FIT_METHOD = (
    "t = max(FLOPs / (peak * compute), bytes / (bandwidth * bandwidth_eff)) + overhead "
    "+ requests * request_overhead; "
    "alternating regime assignment with weighted linear least squares on relative "
    "residuals, Huber-reweighted (k = 0.1)"
)


def fitted_efficiency(
    fit: RooflineFit, device: DeviceSpec
) -> tuple[Efficiency, DeviceSpec, list[str]]:
    """The shares of the nominal peaks; a share above 1 raises that peak to the fitted
    rate (and says so), as a calibrated device is never faster than its spec."""
    notes = []
    compute_rate, memory_rate = 1 / fit.seconds_per_flop, 1 / fit.seconds_per_byte
    if compute_rate > device.peak_flops_per_second:
        notes.append(
            f"fitted compute rate {compute_rate:.3g} FLOP/s is above the nominal "
            f"{device.peak_flops_per_second:.3g}: nominal peak raised to it"
        )
        device = dataclasses.replace(device, peak_flops_per_second=compute_rate)
    if memory_rate > device.memory_bandwidth_bytes_per_second:
        notes.append(
            f"fitted memory rate {memory_rate:.3g} B/s is above the nominal "
            f"{device.memory_bandwidth_bytes_per_second:.3g} (the working set stays in "
            "cache): nominal bandwidth raised to it"
        )
        device = dataclasses.replace(device, memory_bandwidth_bytes_per_second=memory_rate)
    if fit.bandwidth_bounded_only:
        notes.append(
            "no profiled step was memory-bound: the bandwidth factor is only a lower bound "
            "(the least bandwidth that keeps every step compute-bound)"
        )
    if fit.compute_bounded_only:
        notes.append("no profiled step was compute-bound: the compute factor is a lower bound")
    efficiency = Efficiency(
        compute=min(1.0, compute_rate / device.peak_flops_per_second),
        bandwidth=min(1.0, memory_rate / device.memory_bandwidth_bytes_per_second),
        step_overhead_seconds=fit.overhead_seconds,
        request_overhead_seconds=fit.request_overhead_seconds,
    )
    return efficiency, device, notes


def residual_summary(residuals: Sequence[float]) -> dict[str, float]:
    magnitudes = sorted(abs(r) for r in residuals)
    n = len(magnitudes)
    return {
        "median_abs_relative": magnitudes[n // 2],
        "p90_abs_relative": magnitudes[min(n - 1, int(0.9 * n))],
        "max_abs_relative": magnitudes[-1],
        "mean_relative": sum(residuals) / n,
    }
