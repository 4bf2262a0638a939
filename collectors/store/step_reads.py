"""The window and step-series reads of :class:`~collectors.store.protocols.MetricsReader`,
derived once from two step primitives, for the SQL store's :class:`Windows` and the
in-memory fake alike.

A reader supplies ``_histogram_steps`` and ``_counter_steps`` (the merged histogram and the
counter increase of the selected series over each ``(bounds[i], bounds[i + 1]]``) and
``_quantile_steps``; this base turns them into one window (two bounds) or a step series
(``step_bounds``), with the argument checks of ``window_semantics``. How each reader
computes a step stays its own: the fake's from raw readings with ``slo``, the store's from
SQL, so the contract tests still compare two independent computations.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

from collectors.canonical import LABEL_TARGET
from collectors.store.records import (
    CounterStep,
    HistogramStep,
    QuantileStep,
    ScrapeStatus,
    quantile_steps,
)
from collectors.store.window_semantics import (
    WindowSemantics,
    parse_semantics,
    require_finite_edges,
    step_bounds,
)
from slo import SMALL_DELTA_TOLERANCE, ClassicHistogram

#: Step of the step-series reads when none is given: one minute, the roll-ups' grain.
DEFAULT_STEP_SECONDS = 60.0


class StepReads:
    """``histogram_window``, ``counter_window``, ``histogram_series``, ``quantile_series``
    and ``counter_series`` over the reader's step primitives."""

    #: The per-step quantile rule (``records.quantile_steps`` or its scalar twin).
    _quantile_steps: Callable[..., list[QuantileStep]] = staticmethod(quantile_steps)

    def _histogram_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[ClassicHistogram | None]:
        raise NotImplementedError

    def _counter_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[float | None]:
        raise NotImplementedError

    def _histogram_steps_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
        targets: Sequence[str] | None = None,
    ) -> list[dict[str, ClassicHistogram]]:
        """Per step, each target's histogram (a target without data in a step is left out);
        ``targets``: only those of the selection. This default reads each target in turn; a
        server answers all of them in one query (the Prometheus reader overrides it)."""
        chosen = self._targets(family, labels)
        if targets is not None:
            wanted = set(targets)
            chosen = [t for t in chosen if t in wanted]
        per_target = {
            target: self._histogram_steps(
                family, {**(labels or {}), LABEL_TARGET: target}, bounds, use_rollups, mode
            )
            for target in chosen
        }
        return [
            {t: steps[k] for t, steps in per_target.items() if steps[k] is not None}
            for k in range(len(bounds) - 1)
        ]

    def _counter_steps_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[dict[str, float]]:
        """Per step, each target's counter increase, as :meth:`_histogram_steps_by_target`."""
        per_target = {
            target: self._counter_steps(
                family, {**(labels or {}), LABEL_TARGET: target}, bounds, use_rollups, mode
            )
            for target in self._targets(family, labels)
        }
        return [
            {t: steps[k] for t, steps in per_target.items() if steps[k] is not None}
            for k in range(len(bounds) - 1)
        ]

    def scrapes_by_target(
        self, targets: Sequence[str], start: float = -math.inf, end: float = math.inf
    ) -> dict[str, list[ScrapeStatus]]:
        """A reader's ``scrapes`` of each of ``targets``."""
        return {t: self.scrapes(t, start, end) for t in targets}  # type: ignore[attr-defined]

    def _targets(self, family: str, labels: Mapping[str, str] | None) -> list[str]:
        """The targets of the selected series (a reader's ``series``)."""
        series = self.series(family, labels)  # type: ignore[attr-defined]
        return sorted({dict(info.labels).get(LABEL_TARGET, "") for info in series})

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
        """The distribution observed over [start, end] across the selected series, by the
        rule of :class:`~collectors.store.protocols.MetricsReader`."""
        mode = parse_semantics(semantics)
        require_finite_edges(start, end, mode)
        if not end > start:
            return None
        (result,) = self._histogram_steps(family, labels, [start, end], use_rollups, mode)
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
        (result,) = self._counter_steps(family, labels, [start, end], use_rollups, mode)
        return result

    def histogram_windows_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, ClassicHistogram]:
        """:meth:`histogram_window` of each target of the selection (by ``target``), in one
        read where the reader can: what a per-replica rule compares."""
        mode = parse_semantics(semantics)
        require_finite_edges(start, end, mode)
        if not end > start:
            return {}
        (result,) = self._histogram_steps_by_target(family, labels, [start, end], use_rollups, mode)
        return dict(sorted(result.items()))

    def counter_windows_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, float]:
        """:meth:`counter_window` of each target of the selection (by ``target``)."""
        mode = parse_semantics(semantics)
        require_finite_edges(start, end, mode)
        if not end > start:
            return {}
        (result,) = self._counter_steps_by_target(family, labels, [start, end], use_rollups, mode)
        return dict(sorted(result.items()))

    # -- step series ------------------------------------------------------------------------

    def histogram_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[HistogramStep]:
        """``HistogramStep(t, histogram_window(t - step, t))`` for ``t = start + step, ...``
        up to ``end``."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        steps = self._histogram_steps(family, labels, bounds, use_rollups, mode)
        return [HistogramStep(t, h) for t, h in zip(bounds[1:], steps, strict=True)]

    def quantile_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        qs: Sequence[float] = (0.5, 0.95, 0.99),
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
        small_delta_tolerance: float = SMALL_DELTA_TOLERANCE,
    ) -> list[QuantileStep]:
        """``slo.histogram_quantile`` of each ``q`` for each step of :meth:`histogram_series`
        (``None`` for a step without data)."""
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
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> list[CounterStep]:
        """``CounterStep(t, counter_window(t - step, t))`` per step, as :meth:`histogram_series`."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        steps = self._counter_steps(family, labels, bounds, use_rollups, mode)
        return [CounterStep(t, v) for t, v in zip(bounds[1:], steps, strict=True)]

    def histogram_series_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        targets: Sequence[str] | None = None,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, list[HistogramStep]]:
        """:meth:`histogram_series` of each target of the selection with data, or of each of
        ``targets`` (in that order), in one read where the reader can: the console's
        per-replica lines. A target has a ``None`` step where it had no data."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        steps = self._histogram_steps_by_target(
            family, labels, bounds, use_rollups, mode, targets=targets
        )
        held = sorted({t for step in steps for t in step}) if targets is None else targets
        return {
            t: [HistogramStep(at, step.get(t)) for at, step in zip(bounds[1:], steps, strict=True)]
            for t in held
        }

    def counter_series_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float = DEFAULT_STEP_SECONDS,
        *,
        use_rollups: bool = True,
        semantics: str | WindowSemantics = "exact",
    ) -> dict[str, list[CounterStep]]:
        """:meth:`counter_series` of each target of the selection (by ``target``); a target
        has a ``None`` step where it had no data."""
        mode = parse_semantics(semantics)
        bounds = step_bounds(start, end, step_seconds)
        steps = self._counter_steps_by_target(family, labels, bounds, use_rollups, mode)
        targets = sorted({t for step in steps for t in step})
        return {
            t: [CounterStep(at, step.get(t)) for at, step in zip(bounds[1:], steps, strict=True)]
            for t in targets
        }
