"""The reader's reads of the console's fleet records (``collectors.prometheus.records``):
each chart step's fleet histogram, and one histogram over a long window (an SLO's error-budget
period), where the record answers them.

Mixed into :class:`collectors.prometheus.reader.PrometheusReader`, whose query and name
caches it uses: a record read is one series a bucket, whatever the size of the fleet.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping

from collectors.prometheus import queries as q
from collectors.prometheus import records
from collectors.prometheus.api import format_range
from collectors.prometheus.names import quote
from collectors.prometheus.rows import recorded_histogram
from collectors.store.records import HistogramStep
from collectors.store.window_semantics import step_bounds
from slo import ClassicHistogram

#: The resolution at which the first sample of a record in a window is looked for (a
#: subquery's step): the record's own rate window, so the answer is at most that late.
FIRST_SAMPLE_RESOLUTION_SECONDS = records.RATE_SECONDS
#: How long before a record's first sample the engines' readings may begin and the record
#: still count as covering them: its first rate needs two scrapes, and the first sample is
#: found to within :data:`FIRST_SAMPLE_RESOLUTION_SECONDS`.
COVERED_WITHIN_SECONDS = 2 * records.RATE_SECONDS


def _one_value(rows: list[tuple[dict[str, str], float]]) -> float:
    """An aggregated answer's one row's value."""
    return rows[0][1]


class RecordedReads:
    """Reads of the console's fleet records; the reader supplies ``match``,
    ``metric_names()``, ``_evaluate`` and ``_held_sources``."""

    def _record(
        self, family: str, labels: Mapping[str, str] | None, shortest_seconds: float
    ) -> tuple[str, str] | None:
        """The record of ``family``'s buckets and its matchers for ``labels``, where it can
        answer a read whose steps are ``shortest_seconds`` or longer: a record of the
        family, on a reader not limited by ``match`` (the record sums every job), no
        selector on a label the record does not keep (a replica), steps no shorter than
        the recorded rate."""
        chosen = dict(labels or {})
        usable = (
            family in records.FAMILIES
            and not self.match  # type: ignore[attr-defined]
            and shortest_seconds >= records.RATE_SECONDS
            and set(chosen) <= set(records.KEPT_LABELS)
        )
        name = records.fleet_record_name(family, "_bucket")
        if not usable or name not in self.metric_names():  # type: ignore[attr-defined]
            return None
        return name, ",".join(f"{k}={quote(v)}" for k, v in sorted(chosen.items()))

    def _series_record(
        self, name: str, labels: Mapping[str, str] | None, kept: set[str], step_seconds: float
    ) -> str | None:
        """The matchers for ``labels`` on the record ``name`` where it can answer a read of
        ``step_seconds`` steps: held by the server, a reader not limited by ``match``, no
        selector on a label the record does not keep (a replica), steps no shorter than the
        recorded rate."""
        chosen = dict(labels or {})
        usable = (
            not self.match  # type: ignore[attr-defined]
            and step_seconds >= records.RATE_SECONDS
            and set(chosen) <= kept
            and name in self.metric_names()  # type: ignore[attr-defined]
        )
        return ",".join(f"{k}={quote(v)}" for k, v in sorted(chosen.items())) if usable else None

    def _every_step(
        self, expr: str, start: float, end: float, step_seconds: float, scale: float
    ) -> list[tuple[float, float]] | None:
        """``expr``'s one value at each step end times ``scale``; ``None`` unless it has one
        at every step (a record that began or stopped inside the range does not answer it)."""
        bounds = step_bounds(start, end, step_seconds)
        if len(bounds) < 2:
            return None
        answers = self._evaluate(expr, bounds, _one_value, "recorded-value")  # type: ignore[attr-defined]
        if len(answers) < len(bounds) - 1:
            return None
        return [(t, answers[k] * scale) for k, t in enumerate(bounds[1:])]

    def recorded_counter_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float,
    ) -> tuple[list[tuple[float, float]], str] | None:
        """The fleet's increase of the counter ``family`` at each step, from the console's
        record of its rate (``records.COUNTER_FAMILIES``), and the record's name: the
        record's mean rate over the step times the step, close to the engines' increase and
        not equal to it. ``None`` where the record cannot answer (as
        :meth:`recorded_histogram_series`; a selector may also name the label the record
        breaks the counter down by), or misses a step."""
        if family not in records.COUNTER_FAMILIES:
            return None
        name = records.fleet_counter_record(family)
        split = records.COUNTER_FAMILIES[family]
        kept = set(records.KEPT_LABELS) | ({split} if split else set())
        matchers = self._series_record(name, labels, kept, step_seconds)
        if matchers is None:
            return None
        expr = f"sum(avg_over_time({q.selector(name, matchers)}[{format_range(step_seconds)}]))"
        steps = self._every_step(expr, start, end, step_seconds, step_seconds)
        return None if steps is None else (steps, name)

    def recorded_gauge_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float,
        across: str,
    ) -> tuple[list[tuple[float, float]], str] | None:
        """The gauge ``family`` at each step, from the console's record of it combined over
        the fleet (``records.GAUGE_FAMILIES``), and the record's name: the record's mean over
        the step (added up over models and tenants for ``sum``, the highest for ``max``).
        For ``sum`` that is the replicas' step means added up, as ``gauge_steps`` reads them;
        for ``max`` it is the fullest replica at each evaluation, averaged, which is at least
        the highest of the replicas' step means. ``None`` where the record cannot answer, the
        record combines otherwise than ``across``, or it misses a step."""
        if records.GAUGE_FAMILIES.get(family) != across:
            return None
        name = records.fleet_gauge_record(family)
        matchers = self._series_record(name, labels, set(records.KEPT_LABELS), step_seconds)
        if matchers is None:
            return None
        w = format_range(step_seconds)
        expr = f"{across}(avg_over_time({q.selector(name, matchers)}[{w}]))"
        steps = self._every_step(expr, start, end, step_seconds, 1.0)
        return None if steps is None else (steps, name)

    def _mean_rates(self, family: str, name: str, matchers: str, width_seconds: float) -> str:
        """The record's mean rate of each bucket, and of ``_sum``, over ``width``."""
        w = format_range(width_seconds)
        sums = q.selector(records.fleet_record_name(family, "_sum"), matchers)
        return (
            f"sum by (le) (avg_over_time({q.selector(name, matchers)}[{w}]))"
            f' or label_replace(sum(avg_over_time({sums}[{w}])), "le", "{q.SUM_ROW}", "", "")'
        )

    def recorded_histogram_series(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step_seconds: float,
    ) -> tuple[list[HistogramStep], str] | None:
        """The fleet's histogram at each step, from the console's recording rule of
        ``family`` (``collectors.prometheus.records``), and the record's name; ``None`` where
        the record cannot answer: no such record, a selector on a label it does not keep (a
        replica), a reader limited by ``match`` (the record sums every job), a step shorter
        than the recorded rate, or a step the record holds no sample in (a step it covers in
        part counts as if the rate held over all of it). Each step's counts are the record's
        mean rate over the step times the step: close to the engines' exact increase, not
        equal to it (so the evaluator never reads it), and nothing checks the replicas' bucket
        layouts (the server summed them)."""
        found = self._record(family, labels, step_seconds)
        if found is None:
            return None
        bounds = step_bounds(start, end, step_seconds)
        if len(bounds) < 2:
            return None
        name, matchers = found
        expr = self._mean_rates(family, name, matchers, step_seconds)
        use = functools.partial(recorded_histogram, step=step_seconds)
        answers = self._evaluate(expr, bounds, use, "recorded")  # type: ignore[attr-defined]
        if len(answers) < len(bounds) - 1:
            return None
        steps = [HistogramStep(t, answers[k]) for k, t in enumerate(bounds[1:])]
        return steps, name

    def recorded_histogram_window(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
    ) -> tuple[ClassicHistogram, str, float] | None:
        """The fleet's histogram over ``[start, end]`` from the console's record of
        ``family``, the record's name and the time of its first sample in the window: the
        record's mean rate over the part of the window it holds samples in, times that part.
        For a long window (an SLO's 30-day budget period) this reads one series a bucket
        instead of a window of every replica's buckets. ``None`` where the record cannot
        answer (as :meth:`recorded_histogram_series`), holds no sample in the window, or
        began after the engines' series did within it: a record exported after the history
        it would sum would leave that history out (backfill it, ``docs/prometheus.md``)."""
        if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
            return None
        found = self._record(family, labels, end - start)
        if found is None:
            return None
        name, matchers = found
        first = self._first_sample(name, matchers, start, end)
        if first is None or self._engines_read_before(family, labels, start, first):
            return None
        expr = self._mean_rates(family, name, matchers, end - start)
        rows = self._evaluate(expr, [start, end]).get(0, [])  # type: ignore[attr-defined]
        histogram = recorded_histogram(rows, max(end - first, 0.0))
        return None if histogram is None else (histogram, name, first)

    def _first_sample(self, name: str, matchers: str, start: float, end: float) -> float | None:
        """When the record's ``+Inf`` bucket first holds a sample in ``[start, end]``, to
        within :data:`FIRST_SAMPLE_RESOLUTION_SECONDS` (a subquery of its timestamps: one
        series, however long the window); ``start`` itself where a sample the subquery's
        first step looked back to is older."""
        inf = q.selector(name, ",".join(x for x in (matchers, 'le="+Inf"') if x))
        w = format_range(end - start)
        step = format_range(FIRST_SAMPLE_RESOLUTION_SECONDS)
        expr = f"min(min_over_time(timestamp({inf})[{w}:{step}]))"
        rows = self._evaluate(expr, [start, end]).get(0, [])  # type: ignore[attr-defined]
        found = [v for _, v in rows if math.isfinite(v)]
        return max(min(found), start) if found else None

    def _engines_read_before(
        self, family: str, labels: Mapping[str, str] | None, start: float, first: float
    ) -> bool:
        """Whether the engines' series of ``family`` hold readings in ``[start, first)``
        earlier than a record starting at ``first`` would cover."""
        until = first - COVERED_WITHIN_SECONDS
        if until <= start:
            return False
        for source, matchers in self._held_sources(family, labels):  # type: ignore[attr-defined]
            count = q.selector(source.metric + "_count", matchers)
            expr = f"count(count_over_time({count}[{format_range(until - start)}]))"
            if self._evaluate(expr, [start, until]).get(0):  # type: ignore[attr-defined]
                return True
        return False
