"""The traffic mix: each value's share of the requests (a tenant's, a model's, a route's) in
a rolling window, against the mix last recorded; a share that moved by ``min_shift`` or more
is a change.

The window is ``steps`` consecutive steps; each step's counts are added once, when the step
is complete. Until the window holds ``min_requests``, nothing is judged; the first window
that does is the reference (no change: nothing is known before it). When shares move, the
change is placed at the start of the first step whose share of that value went past half the
move, its ``after`` is the share from that step on, and the reference becomes the mix from
there: a shift is recorded once, not at every step while the window fills with it.

Pure state over counts: :class:`MixTracker` reads no clock and no store.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Mapping
from dataclasses import dataclass

from collectors.store.change_records import (
    FLEET_TARGET,
    ChangeEvent,
    ChangeKind,
    MixDimension,
    share_text,
)

#: The value counted for requests that name none (no tenant).
NO_VALUE = "(none)"


@dataclass(frozen=True)
class MixOptions:
    """``window_seconds`` long, in ``steps`` steps; a share that moves by ``min_shift`` (0..1)
    over a window of ``min_requests`` or more is a change."""

    window_seconds: float = 300.0
    steps: int = 6
    min_shift: float = 0.15
    min_requests: int = 50

    def __post_init__(self) -> None:
        if not (math.isfinite(self.window_seconds) and self.window_seconds > 0):
            raise ValueError(f"mix window_seconds={self.window_seconds!r}: must be > 0")
        if isinstance(self.steps, bool) or not isinstance(self.steps, int) or self.steps < 2:
            raise ValueError(f"mix steps={self.steps!r}: must be an integer >= 2")
        if not 0 < self.min_shift <= 1:
            raise ValueError(f"mix min_shift={self.min_shift!r}: must be in (0, 1]")
        if isinstance(self.min_requests, bool) or not isinstance(self.min_requests, int):
            raise ValueError(f"mix min_requests={self.min_requests!r}: must be an integer")
        if self.min_requests < 1:
            raise ValueError(f"mix min_requests={self.min_requests!r}: must be >= 1")

    @property
    def step_seconds(self) -> float:
        return self.window_seconds / self.steps


@dataclass(frozen=True)
class _Step:
    start: float
    counts: Mapping[str, float]

    @property
    def total(self) -> float:
        return sum(self.counts.values())


def _shares(steps: list[_Step]) -> dict[str, float]:
    pooled: collections.Counter[str] = collections.Counter()
    for step in steps:
        pooled.update(step.counts)
    total = sum(pooled.values())
    return {v: n / total for v, n in pooled.items()} if total > 0 else {}


class MixTracker:
    """The mix of one :class:`MixDimension` (see the module docstring)."""

    def __init__(self, dimension: MixDimension, options: MixOptions) -> None:
        self.dimension = dimension
        self.options = options
        self._steps: collections.deque[_Step] = collections.deque(maxlen=options.steps)
        self.reference: dict[str, float] | None = None

    def add_step(self, start: float, counts: Mapping[str, float]) -> list[ChangeEvent]:
        """Add the complete step that began at ``start`` (its counts per value) and return
        the changes it shows."""
        self._steps.append(_Step(start, {k: v for k, v in counts.items() if v > 0}))
        steps = list(self._steps)
        if sum(s.total for s in steps) < self.options.min_requests:
            return []
        shares = _shares(steps)
        if self.reference is None:
            self.reference = shares
            return []
        reference = self.reference
        moved = sorted(
            v
            for v in shares.keys() | reference.keys()
            if abs(shares.get(v, 0.0) - reference.get(v, 0.0)) >= self.options.min_shift
        )
        if not moved:
            return []
        events = []
        firsts = []
        for value in moved:
            before = reference.get(value, 0.0)
            half = (before + shares.get(value, 0.0)) / 2
            rising = shares.get(value, 0.0) > before
            first = next(
                i
                for i, s in enumerate(steps)
                if s.total > 0
                and ((s.counts.get(value, 0.0) / s.total >= half) if rising
                     else (s.counts.get(value, 0.0) / s.total <= half))
            )  # fmt: skip
            firsts.append(first)
            after = _shares(steps[first:]).get(value, 0.0)
            events.append(
                ChangeEvent(
                    steps[first].start,
                    FLEET_TARGET,
                    ChangeKind.TRAFFIC,
                    value,
                    share_text(before),
                    share_text(after),
                    self.dimension.value,
                )
            )
        self.reference = _shares(steps[min(firsts) :])
        return events
