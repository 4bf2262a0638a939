"""Windows and step series of the selected series: the reads the alert evaluator, triage
and the console ask for (``MetricsReader``), computed by
:class:`~collectors.store.step_engine.StepEngine`.

A window ``[start, end]`` (and each step ``(t - step, t]`` of a series query) is the sum of
the increases of consecutive snapshot pairs whose later snapshot lies in it, resets
corrected, summed across the selected series; the semantics option and the layout errors
are :mod:`collectors.store.window_semantics`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from sqlalchemy.orm import Session, sessionmaker

from collectors.store.catalog import Catalog
from collectors.store.raw import MINUTE
from collectors.store.records import (
    CounterStep,
    HistogramStep,
    QuantileStep,
    quantile_steps,
    scalar_quantile_steps,
)
from collectors.store.step_engine import StepEngine, rollup_coverage
from collectors.store.window_semantics import (
    WindowSemantics,
    parse_semantics,
    require_finite_edges,
    step_bounds,
)
from slo import SMALL_DELTA_TOLERANCE, ClassicHistogram


class Windows:
    """Windows and step series of the selected series, exact or with Prometheus semantics.

    ``vectorised=False`` reads through the reference loops only (per-row Python sums and
    per-step scalar quantiles): the same figures, bit for bit, for the benchmark's side by
    side and the equivalence tests."""

    def __init__(
        self, sessions: sessionmaker[Session], catalog: Catalog, *, vectorised: bool = True
    ) -> None:
        self._sessions = sessions
        self._catalog = catalog
        self._engine = StepEngine(catalog, vectorised=vectorised)
        self._quantile_steps = quantile_steps if vectorised else scalar_quantile_steps

    # -- one window -------------------------------------------------------------------------

    def histogram_window(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> ClassicHistogram | None:
        """The distribution observed over [start, end] across the selected series (see
        :meth:`collectors.store.Store.histogram_window`)."""
        mode = parse_semantics(semantics)
        require_finite_edges(start, end, mode)
        if not end > start:
            return None
        with self._sessions() as session:
            ids = self._catalog.mergeable_ids(session, family, labels)
            (result,) = self._engine.histogram_steps(session, ids, [start, end], use_rollups, mode)
        return result

    def counter_window(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> float | None:
        """A counter's increase over [start, end] summed across the selected series."""
        mode = parse_semantics(semantics)
        require_finite_edges(start, end, mode)
        if not end > start:
            return None
        with self._sessions() as session:
            ids = self._catalog.mergeable_ids(session, family, labels)
            (result,) = self._engine.counter_steps(session, ids, [start, end], use_rollups, mode)
        return result

    # -- step series ------------------------------------------------------------------------

    def histogram_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = MINUTE,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[HistogramStep]:
        """``histogram_window(t - step, t)`` for ``t = start + step, ...`` up to ``end``."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        with self._sessions() as session:
            ids = self._catalog.mergeable_ids(session, family, labels)
            steps = self._engine.histogram_steps(session, ids, bounds, use_rollups, mode)
        return [HistogramStep(t, h) for t, h in zip(bounds[1:], steps, strict=True)]

    def quantile_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        qs: Sequence[float] = (0.5, 0.95, 0.99),
        step_seconds: float = MINUTE,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
        small_delta_tolerance: float = SMALL_DELTA_TOLERANCE,
    ) -> list[QuantileStep]:
        """``slo.histogram_quantile`` of each ``q`` for each step of :meth:`histogram_series`."""
        steps = self.histogram_series(
            family, labels, start, end, step_seconds, use_rollups=use_rollups, semantics=semantics
        )
        return self._quantile_steps(steps, qs, small_delta_tolerance)

    def counter_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = MINUTE,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[CounterStep]:
        """``counter_window(t - step, t)`` per step, as :meth:`histogram_series`."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        with self._sessions() as session:
            ids = self._catalog.mergeable_ids(session, family, labels)
            steps = self._engine.counter_steps(session, ids, bounds, use_rollups, mode)
        return [CounterStep(t, v) for t, v in zip(bounds[1:], steps, strict=True)]

    def rollup_coverage(self) -> float:
        """Minutes ending at or before this time are read from roll-ups (``-inf``: none)."""
        with self._sessions() as session:
            return rollup_coverage(session)

    # -- the engine -------------------------------------------------------------------------
