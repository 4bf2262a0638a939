"""Windows and step series of the selected series: the reads the alert evaluator, triage
and the console ask for (``MetricsReader``), computed by
:class:`~collectors.store.step_engine.StepEngine`.

A window ``[start, end]`` (and each step ``(t - step, t]`` of a series query) is the sum of
the increases of consecutive snapshot pairs whose later snapshot lies in it, resets
corrected, summed across the selected series; the semantics option and the layout errors
are :mod:`collectors.store.window_semantics`.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy.orm import Session, sessionmaker

from collectors.store.catalog import Catalog
from collectors.store.reads import MetricReads
from collectors.store.records import SeriesInfo, quantile_steps, scalar_quantile_steps
from collectors.store.step_engine import StepEngine, rollup_coverage
from collectors.store.step_reads import StepReads
from collectors.store.window_semantics import WindowSemantics
from slo import ClassicHistogram


class Windows(StepReads):
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
        self._reads = MetricReads(sessions, catalog)

    def series(self, family: str, labels: Mapping[str, str] | None = None) -> list[SeriesInfo]:
        """The selected series (the per-target reads ask which targets they hold)."""
        return self._reads.series(family, labels)

    def _histogram_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[ClassicHistogram | None]:
        with self._sessions() as session:
            ids = self._catalog.mergeable_ids(session, family, labels)
            return self._engine.histogram_steps(session, ids, bounds, use_rollups, mode)

    def _counter_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[float | None]:
        with self._sessions() as session:
            ids = self._catalog.mergeable_ids(session, family, labels)
            return self._engine.counter_steps(session, ids, bounds, use_rollups, mode)

    def rollup_coverage(self) -> float:
        """Minutes ending at or before this time are read from roll-ups (``-inf``: none)."""
        with self._sessions() as session:
            return rollup_coverage(session)
