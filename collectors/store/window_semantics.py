"""How the store's windows read: the semantics option, and what a bucket-layout change does.

Two semantics (``semantics=`` on every window and series read of :class:`Store`):

- ``"exact"`` (the default): per series, the increase from its last snapshot at or before
  the window's start to its last at or before its end, resets corrected, no extrapolation.
  With edges aligned to scrapes this is the exact number of observations in the window.
- ``"prometheus-2"`` / ``"prometheus-3"``: what ``sum by (le) (increase(<f>_bucket[w]))``
  (or ``sum(increase(<counter>[w]))``) evaluated at the window's end gives on a Prometheus
  2.x / 3.x holding the same samples: only the samples inside the range (``[t - w, t]``, 3.x
  ``(t - w, t]``), each bucket series extrapolated on its own (``slo.extrapolated_increase``),
  then added by ``le``. So an exported recording rule and Tailwatch's own evaluator agree.
  Raw snapshots only (the edges' samples are needed); a window older than the raw retention
  is refused.

A series whose bucket layout changes inside a window (a restart with new buckets) is refused
on both semantics with :class:`LayoutChangeError`, which names the target and the wall-clock
interval of the change. NOTE: why refuse rather than merge. ``le`` counts of different layouts
cannot be added bucket by bucket (Prometheus's ``sum by (le)`` does so into a union of bounds
and its monotonicity fix then reshapes the counts: a quantile from nowhere). The counts at the
bounds both layouts share could be added, but the quantile would then be interpolated over
silently coarser buckets and the result would look as precise as any other. Returning only the
latest segment would answer a different window than the one asked. The error says where the
change lies (``first_new_seconds``), so a caller that wants the latest segment asks for the
window from there, and knows that it did.
"""

from __future__ import annotations

import enum
import math
from typing import NamedTuple

from sqlalchemy import select
from sqlalchemy.orm import Session

from collectors.store.models import Series, Target
from slo import LayoutMismatchError, RangeSemantics
from slo.window import format_utc


class WindowSemantics(enum.Enum):
    """Which samples a window takes, and whether it extrapolates."""

    EXACT = "exact"
    PROMETHEUS_2 = "prometheus-2"
    PROMETHEUS_3 = "prometheus-3"

    @property
    def range_semantics(self) -> RangeSemantics | None:
        """The Prometheus range rule imitated; ``None`` for the exact window."""
        return _RANGE_RULES.get(self)


_RANGE_RULES = {
    WindowSemantics.PROMETHEUS_2: RangeSemantics.PROMETHEUS_2,
    WindowSemantics.PROMETHEUS_3: RangeSemantics.PROMETHEUS_3,
}


def parse_semantics(value: object) -> WindowSemantics:
    """``value`` (a :class:`WindowSemantics`, ``slo.RangeSemantics`` or one of their strings)
    as a :class:`WindowSemantics`; a clear ``ValueError`` naming the value otherwise."""
    if isinstance(value, WindowSemantics):
        return value
    if isinstance(value, RangeSemantics):
        return WindowSemantics(value.value)
    try:
        return WindowSemantics(value)
    except ValueError:
        raise ValueError(
            f"semantics: expected 'exact' (last snapshot at or before each edge, no "
            f"extrapolation), 'prometheus-2' (Prometheus 2.x increase over [t - w, t]) or "
            f"'prometheus-3' (3.x, over (t - w, t]), got {value!r}"
        ) from None


def require_finite_edges(start: float, end: float, semantics: WindowSemantics) -> None:
    """A Prometheus range is evaluated at ``end`` over ``end - start``, on an integer
    millisecond clock: all three must be finite in milliseconds (the exact window takes any
    bounds: nothing lies outside an infinite one)."""
    if semantics is WindowSemantics.EXACT:
        return
    if not all(math.isfinite(x * 1000) for x in (start, end, end - start)):
        raise ValueError(
            f"semantics={semantics.value!r} needs a finite start and end (Unix seconds, "
            f"within ±1e305), got start={start!r} end={end!r}"
        )


class SeriesName(NamedTuple):
    """What an error says about a stored series."""

    family: str
    target: str


class LayoutChangeError(LayoutMismatchError):
    """A series' bucket layout changed inside the window asked for.

    The change lies between ``last_old_seconds`` (the last snapshot in the old layout, or the
    start of the minute holding the change once raw snapshots are past retention) and
    ``first_new_seconds``; ``left`` and ``right`` are the old and new layouts. An exact or
    ``prometheus-2`` window that starts at ``first_new_seconds`` reads the new layout only (a
    ``prometheus-3`` range leaves its start out: start it just before).
    """

    def __init__(
        self,
        series: SeriesName,
        last_old_seconds: float,
        first_new_seconds: float,
        left: tuple[float, ...],
        right: tuple[float, ...],
        *,
        is_exact: bool = True,
    ) -> None:
        where = "" if is_exact else " (within that minute; its raw snapshots are past retention)"
        super().__init__(
            f"the bucket layout of {series.family} on target {series.target!r} changed between "
            f"{format_utc(last_old_seconds)} and {format_utc(first_new_seconds)}{where}, from "
            f"{describe_layout(left)} to {describe_layout(right)}: counts of two layouts cannot "
            f"be added. Ask for the new layout from its first snapshot "
            f"({format_utc(first_new_seconds)}) on, or for the old one up to its last "
            f"({format_utc(last_old_seconds)})",
            left,
            right,
        )
        self.family = series.family
        self.target = series.target
        self.last_old_seconds = last_old_seconds
        self.first_new_seconds = first_new_seconds


def layouts_differ_error(
    first: SeriesName, left: tuple[float, ...], second: SeriesName, right: tuple[float, ...]
) -> LayoutMismatchError:
    """Two selected series (not one that changed) carry different layouts."""
    return LayoutMismatchError(
        f"selected series of {first.family} have different bucket layouts: target "
        f"{first.target!r} has {describe_layout(left)}, target {second.target!r} has "
        f"{describe_layout(right)}; merge only series with the same buckets (narrow the "
        "selector, e.g. by target)",
        left,
        right,
    )


def describe_layout(bounds: tuple[float, ...]) -> str:
    """``bounds`` in a few words: ``4 bounds (0.1, 0.5, 1, +Inf)``, long ones elided."""
    shown = [_bound(b) for b in bounds]
    if len(shown) > 6:
        shown = [*shown[:3], "…", *shown[-2:]]
    return f"{len(bounds)} bounds ({', '.join(shown)})"


def series_name(session: Session, sid: int) -> SeriesName:
    """The family and owning target of series ``sid``."""
    family, target = session.execute(
        select(Series.family, Target.name)
        .join(Target, Target.id == Series.target_id)
        .where(Series.id == sid)
    ).one()
    return SeriesName(family, target)


def _bound(bound: float) -> str:
    return "+Inf" if bound == math.inf else f"{bound:g}"


#: Most steps one series query may return (a 30-day range at 1-minute steps is 43 200).
MAX_STEPS = 200_000


def step_bounds(start: float, end: float, step_seconds: float) -> list[float]:
    """``start, start + step, ...`` up to ``end``: the edges of the steps of a series query
    (step ``k`` covers ``(bounds[k], bounds[k + 1]]``)."""
    if not (math.isfinite(start) and math.isfinite(end)):
        raise ValueError(f"start and end must be finite, got start={start!r} end={end!r}")
    if not (math.isfinite(step_seconds) and step_seconds > 0):
        raise ValueError(f"step_seconds: expected a number > 0, got {step_seconds!r}")
    count = math.floor((end - start) / step_seconds + 1e-9)
    if count > MAX_STEPS:
        raise ValueError(
            f"step_seconds={step_seconds:g} over {end - start:g} s gives {count} steps "
            f"(at most {MAX_STEPS}); use a longer step"
        )
    return [start + k * step_seconds for k in range(max(count, 0) + 1)]
