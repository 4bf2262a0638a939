"""Step-to-step noise of a calibrated simulator: the fit's own residuals, replayed.

A real engine's steps of one shape do not all take the same time (caches, allocator,
the OS); the roofline predicts one time per shape. ``tailwatch engine calibrate`` keeps
the empirical distribution of measured / predicted step seconds over its profiled steps
as ``NUM_QUANTILES`` evenly spaced quantiles, and a simulator loaded from that file
multiplies each step's predicted time by a draw from it. A draw is a pure function of
(seed, step index): the same seed gives the same run, and the offline fast path and the
per-step path, which spend the same steps in the same order, draw the same factors.
The ratios of a grid cell are not independent (a cell's shape can be mispredicted as a
whole); the draws are, which is the approximation. A spec without a calibration has no
noise, so datasheet simulations stay exactly deterministic.

The ratios are taken within each grid cell (``within_cell_ratios``): a step's measured /
predicted over its cell's median of it, so they hold the step-to-step spread and not
the fit's error on a whole shape, which the fit itself already minimised. Pooled over
all steps instead, the weighted fit's per-step ratios had a median of 1.03-1.30 (a cell
of many short steps counts once in the fit, each of its steps once here), which slowed
every simulated step by that much and the simulator's TTFT p50 by 10-40% more.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

NUM_QUANTILES = 101  # 0%, 1%, ..., 100%
_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
QUANTITY = "measured / predicted step seconds of the profiled steps"


def _unit(seed: int, index: int) -> float:
    """A uniform draw in [0, 1) from (seed, index): splitmix64 of their mix."""
    z = (seed * 0xD1B54A32D192ED03 + (index + 1) * _GOLDEN) & _MASK
    z ^= z >> 30
    z = (z * 0xBF58476D1CE4E5B9) & _MASK
    z ^= z >> 27
    z = (z * 0x94D049BB133111EB) & _MASK
    z ^= z >> 31
    return (z >> 11) / float(1 << 53)


@dataclass(frozen=True)
class StepNoise:
    """Evenly spaced quantiles (0 to 1) of the factor a step's predicted time is multiplied
    by; a draw interpolates between them (inverse transform sampling)."""

    quantiles: tuple[float, ...]

    def __post_init__(self) -> None:
        q = self.quantiles
        if len(q) < 2:
            raise ConfigError(f"quantiles: {len(q)} given, need at least 2")
        for i, value in enumerate(q):
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ConfigError(f"quantiles[{i}]={value!r}: expected a number")
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"quantiles[{i}]={value!r}: must be a finite number > 0")
            if i and value < q[i - 1]:
                raise ConfigError(f"quantiles[{i}]={value!r}: below quantiles[{i - 1}]")

    @classmethod
    def of_ratios(cls, ratios: Sequence[float], num_quantiles: int = NUM_QUANTILES) -> StepNoise:
        """The quantiles of ``ratios`` (measured / predicted), linearly interpolated."""
        ordered = sorted(ratios)
        if not ordered:
            raise ConfigError("step noise: no step ratios to take quantiles of")
        last = len(ordered) - 1
        values = []
        for k in range(num_quantiles):
            position = k * last / (num_quantiles - 1)
            low = int(position)
            high = min(low + 1, last)
            values.append(ordered[low] + (ordered[high] - ordered[low]) * (position - low))
        return cls(tuple(values))

    def factor(self, seed: int, index: int) -> float:
        """The factor of step ``index`` of a run seeded ``seed``."""
        q = self.quantiles
        position = _unit(seed, index) * (len(q) - 1)
        low = int(position)
        return q[low] + (q[low + 1] - q[low]) * (position - low)

    def to_json(self) -> dict[str, Any]:
        return {"quantity": QUANTITY, "quantiles": list(self.quantiles)}

    @classmethod
    def from_json(cls, body: Any) -> StepNoise:
        """From ``to_json``'s form; a ``ConfigError`` naming the bad field otherwise."""
        if not isinstance(body, dict):
            raise ConfigError(f"step_noise={body!r}: expected an object")
        quantiles = body.get("quantiles")
        if not isinstance(quantiles, list):
            raise ConfigError(f"step_noise.quantiles={quantiles!r}: expected a list")
        try:
            return cls(tuple(quantiles))
        except ConfigError as error:
            raise ConfigError(f"step_noise.{error}") from None


def within_cell_ratios(cells: Sequence[Hashable], ratios: Sequence[float]) -> list[float]:
    """Each step's ratio over the median ratio of its cell (``cells[i]`` is step ``i``'s)."""
    if len(cells) != len(ratios):
        raise ValueError(f"{len(cells)} cells for {len(ratios)} ratios")
    by_cell: defaultdict[Hashable, list[float]] = defaultdict(list)
    for cell, ratio in zip(cells, ratios, strict=True):
        by_cell[cell].append(ratio)
    medians = {cell: statistics.median(values) for cell, values in by_cell.items()}
    return [ratio / medians[cell] for cell, ratio in zip(cells, ratios, strict=True)]


class NoiseDraws:
    """One run's draws: the factor of each step in turn (``SimRunner.spend``)."""

    def __init__(self, noise: StepNoise, seed: int) -> None:
        self.noise, self.seed, self.num_steps = noise, seed, 0

    def next_factor(self) -> float:
        factor = self.noise.factor(self.seed, self.num_steps)
        self.num_steps += 1
        return factor
