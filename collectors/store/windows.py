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

from collectors.canonical import LABEL_TARGET
from collectors.store.catalog import Catalog, SelectedSeries
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

    def _histogram_steps_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
        targets: Sequence[str] | None = None,
    ) -> list[dict[str, ClassicHistogram]]:
        """Per step, each target's histogram: one session, one selection of the family's
        series grouped by target and one plan for every target, instead of a read a target
        (each of which selected every series of the family again)."""
        read = self._engine.histogram_steps
        return self._steps_by_target(read, family, labels, bounds, use_rollups, mode, targets)

    def _counter_steps_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[dict[str, float]]:
        """Per step, each target's counter increase, as :meth:`_histogram_steps_by_target`."""
        read = self._engine.counter_steps
        return self._steps_by_target(read, family, labels, bounds, use_rollups, mode, None)

    def _steps_by_target(  # type: ignore[no-untyped-def]
        self, read, family, labels, bounds, use_rollups, mode, targets
    ) -> list[dict]:
        """Per step, each target's answer of ``read`` (the step engine's histogram or
        counter steps) over its own series, in one session and one plan."""
        with self._sessions() as session:
            grouped = self._by_target(session, family, labels, targets)
            plan = self._plan(session, bounds, use_rollups, mode)
            per_target = {
                target: read(session, ids, bounds, use_rollups, mode, plan)
                for target, ids in grouped.items()
            }
        return [
            {t: answers[k] for t, answers in per_target.items() if answers[k] is not None}
            for k in range(len(bounds) - 1)
        ]

    def _by_target(
        self,
        session: Session,
        family: str,
        labels: Mapping[str, str] | None,
        targets: Sequence[str] | None,
    ) -> dict[str, list[int]]:
        """The selected series' ids per target (of ``targets`` only, when given), targets in
        order; a target whose series hold different semantic flags raises, as a read of that
        target alone does (``Catalog.mergeable_ids``)."""
        wanted = None if targets is None else set(targets)
        grouped: dict[str, list[SelectedSeries]] = {}
        for chosen in self._catalog.select(session, family, labels):
            target = dict(chosen.info.labels).get(LABEL_TARGET)
            if target is not None and (wanted is None or target in wanted):
                grouped.setdefault(target, []).append(chosen)
        out = {}
        for target, series in sorted(grouped.items()):
            if len({s.info.flags for s in series}) > 1:
                self._catalog.mergeable_ids(session, family, {**(labels or {}), LABEL_TARGET: target})  # fmt: skip
            out[target] = [s.series_id for s in series]
        return out

    def _plan(
        self, session: Session, bounds: list[float], use_rollups: bool, mode: WindowSemantics
    ):  # type: ignore[no-untyped-def]
        if mode is not WindowSemantics.EXACT or len(bounds) < 2:
            return None
        return self._engine.plan(session, bounds, use_rollups)

    def rollup_coverage(self) -> float:
        """Minutes ending at or before this time are read from roll-ups (``-inf``: none)."""
        with self._sessions() as session:
            return rollup_coverage(session)
