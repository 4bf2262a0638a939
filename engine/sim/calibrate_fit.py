"""Fit the step model's ``Efficiency`` to measured step times (numpy least squares).

Each measured step ``i`` has its batch priced by ``StepCostModel`` at the nominal peaks
with efficiency 1 and no overhead, which gives its FLOPs ``F_i`` and bytes ``B_i``; the
model is ``t_i = max(F_i * x, B_i * y) + o + n_i * p`` with ``x = 1 / (peak *
compute)``, ``y = 1 / (bandwidth * bandwidth_eff)``, ``o`` the step overhead and ``p`` the
overhead per scheduled request (``n_i`` of them). For a fixed assignment of steps to the
compute or the memory side that is linear in ``(x, y, o, p)``, so the fit
alternates: assign each step to the side its current prediction takes, solve the
weighted linear least squares, repeat until the assignment holds (it starts from the
best few of a log-spaced scan of the ratio ``y / x``, each point of which is a linear
fit, keeping the final fit of least Huber loss). Residuals are relative (a 2 ms decode
and a 400 ms prefill count alike) and Huber-weighted (iteratively reweighted), so a step
stalled by another process on a busy machine does not drag the fit. On step times the model itself generated the fit is exact.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from engine.errors import ConfigError

# NOTE: relative residuals beyond 10% count linearly, not squared (Huber's k): step-time
# noise on a quiet machine is a few percent, a preempted thread's stall far more.
HUBER_K = 0.10
MAX_ROUNDS = 50
SCAN_POINTS = 97
NUM_STARTS = 6


class FitError(ConfigError):
    """The measured steps cannot determine the factors (a degenerate grid)."""


@dataclass(frozen=True)
class StepSample:
    """One measured step: its priced FLOPs and bytes (at efficiency 1) and its seconds."""

    flops: float
    bytes: float
    seconds: float
    num_requests: int = 1
    weight: float = 1.0  # NOTE: e.g. 1 / steps of its grid cell, so every cell counts alike


@dataclass(frozen=True)
class RooflineFit:
    seconds_per_flop: float  # x
    seconds_per_byte: float  # y
    overhead_seconds: float  # o
    request_overhead_seconds: float  # p, per request in the step
    relative_residuals: tuple[float, ...]  # (predicted - measured) / measured, per step
    num_memory_bound: int
    # NOTE: True when no step came out memory-bound: the data then bound the bandwidth from
    # below (the slowest memory that still leaves every step compute-bound) but do not
    # determine it; likewise compute_bounded_only when no step is compute-bound.
    bandwidth_bounded_only: bool
    compute_bounded_only: bool

    def predict(self, flops: float, num_bytes: float, num_requests: int = 1) -> float:
        roofline = max(flops * self.seconds_per_flop, num_bytes * self.seconds_per_byte)
        return roofline + self.overhead_seconds + self.request_overhead_seconds * num_requests


def _check_design(samples: Sequence[StepSample]) -> None:
    if len(samples) < 3:
        raise FitError(f"{len(samples)} measured steps: the fit needs at least 3")
    flops = np.array([s.flops for s in samples])
    num_bytes = np.array([s.bytes for s in samples])
    seconds = np.array([s.seconds for s in samples])
    if not (np.all(np.isfinite(seconds)) and np.all(seconds > 0)):
        raise FitError("a measured step time is not a positive number")
    if np.any(flops <= 0) or np.any(num_bytes <= 0):
        raise FitError("a measured step computed nothing (an empty batch)")
    shapes = {
        (round(f), round(b), s.num_requests)
        for f, b, s in zip(flops, num_bytes, samples, strict=True)
    }
    if len(shapes) < 4:
        raise FitError(
            f"the grid has {len(shapes)} distinct batch shapes, fewer than the 4 factors "
            "(compute, bandwidth, step and request overhead); give more prefill and decode sizes"
        )
    ratio = flops / num_bytes
    if ratio.max() / ratio.min() < 1.0 + 1e-9:
        raise FitError(
            "every step of the grid has the same FLOPs per byte: compute and memory time "
            "cannot be told apart; mix prefill chunks (compute-heavy) with decodes "
            "(memory-heavy)"
        )


def _solve(
    columns: list[np.ndarray], seconds: np.ndarray, weights: np.ndarray
) -> tuple[np.ndarray, float]:
    """Weighted least squares of ``seconds`` on ``columns``; (coefficients, loss)."""
    design = np.stack(columns, axis=1) * weights[:, None]
    target = seconds * weights
    coefficients, *_ = np.linalg.lstsq(design, target, rcond=None)
    residual = design @ coefficients - target
    return coefficients, float(residual @ residual)


def _fit_columns(
    columns: dict[str, np.ndarray], seconds: np.ndarray, weights: np.ndarray
) -> dict[str, float]:
    """Weighted least squares on the named columns; an overhead term that comes out
    negative is dropped (no overhead) and the rest refitted. Missing names are 0."""
    names = list(columns)
    while True:
        coefficients, _loss = _solve([columns[n] for n in names], seconds, weights)
        fitted = dict(zip(names, (float(c) for c in coefficients), strict=True))
        negative = [n for n in ("overhead", "per_request") if fitted.get(n, 0.0) < 0]
        if not negative:
            return fitted
        names.remove(negative[0])


def _fit_assignment(
    flops: np.ndarray,
    num_bytes: np.ndarray,
    num_requests: np.ndarray,
    seconds: np.ndarray,
    weights: np.ndarray,
    memory_bound: np.ndarray,
) -> tuple[float, float, float, float]:
    """(x, y, o, p) for a fixed compute/memory assignment (NaN for a side no step is on)."""
    columns = {}
    if not memory_bound.all():
        columns["x"] = np.where(memory_bound, 0.0, flops)
    if memory_bound.any():
        columns["y"] = np.where(memory_bound, num_bytes, 0.0)
    columns["overhead"] = np.ones_like(seconds)
    # NOTE: with one request in every step a per-request cost is the step overhead
    if np.ptp(num_requests) > 0:
        columns["per_request"] = num_requests
    fitted = _fit_columns(columns, seconds, weights)
    # NOTE: a side whose time per unit comes out negative is not shown by these steps
    # (noise on a tiny grid, say): fit every step to the other side instead
    if "x" in fitted and "y" in fitted and min(fitted["x"], fitted["y"]) <= 0:
        side = np.full_like(memory_bound, fitted["x"] <= 0)
        return _fit_assignment(flops, num_bytes, num_requests, seconds, weights, side)
    return (
        fitted.get("x", np.nan),
        fitted.get("y", np.nan),
        fitted.get("overhead", 0.0),
        fitted.get("per_request", 0.0),
    )


def _scan_ratio(flops, num_bytes, num_requests, seconds, weights) -> list[np.ndarray]:
    """Memory-bound assignments to start from: those of the best fits over a log scan of
    the ratio y / x, best first, distinct (the alternation can stall in a local optimum,
    so several starts are tried)."""
    ratio = flops / num_bytes
    candidates: dict[bytes, tuple[float, np.ndarray]] = {}
    for r in np.geomspace(ratio.min() / 4, ratio.max() * 4, SCAN_POINTS):
        columns = {"x": np.maximum(flops, r * num_bytes), "overhead": np.ones_like(seconds)}
        if np.ptp(num_requests) > 0:
            columns["per_request"] = num_requests
        fitted = _fit_columns(columns, seconds, weights)
        if fitted["x"] <= 0:
            continue
        predicted = sum(fitted[n] * columns[n] for n in fitted)
        loss = float(np.sum(((predicted - seconds) * weights) ** 2))
        bound = r * num_bytes > flops
        key = bound.tobytes()
        if key not in candidates or loss < candidates[key][0]:
            candidates[key] = (loss, bound)
    ranked = [bound for _loss, bound in sorted(candidates.values(), key=lambda c: c[0])]
    return ranked[:NUM_STARTS] or [np.zeros_like(seconds, dtype=bool)]


def _memory_side(flops, num_bytes, x: float, y: float) -> np.ndarray:
    """Steps whose memory time exceeds their compute time (a tie, as on the bound a side
    with no steps is set to, is the compute side)."""
    return num_bytes * y > flops * x * (1 + 1e-9)


def _alternate(flops, num_bytes, num_requests, seconds, relative, memory_bound):
    """Assignment and Huber-weighted least squares in turn, from ``memory_bound``, until
    the assignment holds: (x, y, o, p, relative residuals, Huber loss)."""
    huber = np.ones_like(seconds)
    for _round in range(MAX_ROUNDS):
        x, y, o, p = _fit_assignment(
            flops, num_bytes, num_requests, seconds, relative * huber, memory_bound
        )
        if not (np.isnan(x) or x > 0) or not (np.isnan(y) or y > 0):
            raise FitError(
                "the fit gave a non-positive compute or memory time per unit: step times "
                "do not grow with the batch; give a grid with larger batches"
            )
        # NOTE: a side no step is on is bounded by the others: the slowest rate for which
        # every step stays on the side it was fitted on.
        if np.isnan(y):
            y = float(np.min(flops * x / num_bytes))
        if np.isnan(x):
            x = float(np.min(num_bytes * y / flops))
        predicted = np.maximum(flops * x, num_bytes * y) + o + p * num_requests
        residuals = (predicted - seconds) / seconds
        scale = np.abs(residuals) / HUBER_K
        new_huber = np.where(scale <= 1.0, 1.0, 1.0 / np.maximum(scale, 1e-300))
        new_bound = _memory_side(flops, num_bytes, x, y)
        if np.array_equal(new_bound, memory_bound) and np.allclose(new_huber, huber, rtol=1e-9):
            break
        memory_bound, huber = new_bound, new_huber
    # NOTE: Huber's loss of the residuals in units of k, each step by its cell weight
    scale = np.abs(residuals) / HUBER_K
    weight = (relative * seconds) ** 2
    loss = float(np.sum(weight * np.where(scale <= 1, scale**2 / 2, scale - 0.5)))
    return x, y, o, p, residuals, loss


def fit_roofline(samples: Sequence[StepSample]) -> RooflineFit:
    """The Huber-weighted least-squares roofline of ``samples``; ``FitError`` for a grid
    that cannot determine it (see the module docstring)."""
    _check_design(samples)
    flops = np.array([s.flops for s in samples], dtype=float)
    num_bytes = np.array([s.bytes for s in samples], dtype=float)
    seconds = np.array([s.seconds for s in samples], dtype=float)
    num_requests = np.array([s.num_requests for s in samples], dtype=float)
    # NOTE: weights that make residuals relative to each step (least squares squares them,
    # hence the square root of each sample's own weight)
    relative = np.sqrt(np.array([s.weight for s in samples], dtype=float)) / seconds
    best = None
    for start in _scan_ratio(flops, num_bytes, num_requests, seconds, relative):
        fitted = _alternate(flops, num_bytes, num_requests, seconds, relative, start)
        if best is None or fitted[-1] < best[-1]:
            best = fitted
    x, y, o, p, residuals, _loss = best
    num_memory = int(np.count_nonzero(_memory_side(flops, num_bytes, x, y)))
    return RooflineFit(
        seconds_per_flop=float(x),
        seconds_per_byte=float(y),
        overhead_seconds=float(o),
        request_overhead_seconds=float(p),
        relative_residuals=tuple(float(r) for r in residuals),
        num_memory_bound=num_memory,
        bandwidth_bounded_only=num_memory == 0,
        compute_bounded_only=num_memory == len(samples),
    )
