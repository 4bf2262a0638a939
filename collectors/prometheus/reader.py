"""``PrometheusReader``: the :class:`~collectors.store.protocols.MetricsReader` over a
Prometheus-compatible HTTP API, pushing every read down to the server; nothing is copied.

How each read is answered (the PromQL is in :mod:`collectors.prometheus.queries`):

- ``histogram_window`` / ``histogram_series`` / ``quantile_series``: per target,
  ``increase(<engine metric>_bucket{…}[w])`` summed by ``le`` (and ``_sum``), an instant query
  at the window's end or a ``query_range`` with ``step = w`` for a step series; the targets'
  histograms are merged here (their layouts checked), and quantiles come from
  ``slo.histogram_quantile`` over those buckets, never from PromQL's ``histogram_quantile``.
- ``counter_window`` / ``counter_series``: ``sum by (instance) (increase(…[w]))``, likewise.
- ``samples`` / ``snapshots`` / ``scrapes``: the stored samples of the range (range-vector
  instant queries; ``up`` for scrapes); ``series``: ``/api/v1/series``; ``exemplars``:
  ``/api/v1/query_exemplars``.

Canonical families are resolved to the engine metric names the server holds
(``/api/v1/label/__name__/values``, refreshed every ``names_max_age_seconds``) through the
dialect table (:mod:`collectors.prometheus.names`).

Semantics. A server answers with its own range rule, and :attr:`PrometheusReader.semantics`
says which: ``prometheus-2`` or ``prometheus-3`` from ``/api/v1/status/buildinfo``'s version,
``exact`` for VictoriaMetrics (its ``increase`` does not extrapolate and starts from the last
sample before the range: the store's exact window). A read asking for ``semantics="exact"``
(every reader's default) gets the server's semantics; asking for another Prometheus rule than
the server's is refused with a ``ValueError``, since no query can give it.
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import httpx

from collectors import canonical as c
from collectors.canonical import Kind, Labels
from collectors.prometheus import queries as q
from collectors.prometheus.api import PrometheusAPI, PrometheusSourceError, answer_points, point
from collectors.prometheus.kept import KeptAnswers, Rows
from collectors.prometheus.names import (
    TARGET_LABEL,
    Source,
    quote,
    raw_labels,
    raw_matchers,
    raw_metrics,
    resolve,
)
from collectors.prometheus.readings import ReadingTimes
from collectors.prometheus.recorded import RecordedReads
from collectors.prometheus.rows import fleet_histogram as _fleet_histogram
from collectors.prometheus.rows import histograms_by_target as _histograms_by_target
from collectors.prometheus.rows import target_of as _target
from collectors.store.catalog import RAW_KIND
from collectors.store.records import (
    ScrapeStatus,
    SemanticsMismatchError,
    SeriesInfo,
    StoredExemplar,
)
from collectors.store.step_reads import StepReads
from collectors.store.window_semantics import (
    LayoutChangeError,
    SeriesName,
    WindowSemantics,
    layouts_differ_error,
    parse_semantics,
)
from slo import ClassicHistogram, HistogramSnapshot, Sample, merge_histograms, parse_le
from slo.window import samples_in_range

logger = logging.getLogger("tailwatch.prometheus")
T = TypeVar("T")

#: How long the server's metric names are reused before they are asked for again.
NAMES_MAX_AGE_SECONDS = 60.0
#: How far back ``series`` and open-ended ``scrapes`` look: a server answers for a range.
SERIES_LOOKBACK_SECONDS = 7 * 86400.0
#: Longest range one raw read asks for (``--query.max-samples`` bounds what one query loads).
RAW_CHUNK_SECONDS = 3600.0
#: Most evaluation times one ``query_range`` asks for (Prometheus refuses over 11 000).
MAX_POINTS_PER_QUERY = 10_000
#: How much of a range already found to hold one layout is checked again with the part after
#: it: samples arrive late (scrape duration, remote write), so the last minutes may have grown.
LAYOUT_RECHECK_SECONDS = 60.0
#: Most ``series`` answers kept (per family and selector) until the names are read again.
SERIES_CACHED = 256
#: Ranges remembered per metric and selector as holding one layout.
LAYOUT_RANGES_KEPT = 8
#: Ranges longer than this have their layout checked from a row per bucket series (one pass
#: on the server); shorter ones on the server (three passes, a row per ``le`` back).
LAYOUT_ROWS_SECONDS = 3600.0
DOWN_ERROR = "down in Prometheus (up=0)"
UP = "up"
#: A probe only VictoriaMetrics answers (Prometheus, Thanos and Mimir say 404).
VICTORIAMETRICS_PROBE = "status/active_queries"


class PrometheusReader(RecordedReads, ReadingTimes, StepReads):
    """Stored metrics read from the server at ``url`` (``http://prometheus:9090``, Thanos
    Query's URL, ``http://mimir/prometheus``, ``http://victoriametrics:8428``).

    ``match``: matchers added to every query (``job="vllm"``), to read one part of a shared
    server. ``headers``: sent with every request (``Authorization``, Mimir's
    ``X-Scope-OrgID``). ``semantics``: the server's range rule when its build information
    cannot say (Thanos and Mimir report their own versions); found from the server when
    ``None``. ``clock``: wall time, against which a step is old enough for its answer to be
    kept (``collectors.prometheus.kept``).

    Safe to read from several threads at once: the evaluator reads
    :attr:`concurrent_reads` rules at a time, as the server answers queries in parallel."""

    #: How many rules the evaluator reads at once over this reader.
    concurrent_reads = 4
    #: The answers of final steps are kept by the reader itself (``collectors.prometheus
    #: .kept``): the evaluator does not keep them again (``alerts.kept_steps``).
    keeps_final_answers = True

    def __init__(
        self,
        url: str,
        *,
        match: str = "",
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        client: httpx.Client | None = None,
        semantics: str | WindowSemantics | None = None,
        names_max_age_seconds: float = NAMES_MAX_AGE_SECONDS,
        series_lookback_seconds: float = SERIES_LOOKBACK_SECONDS,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.api = PrometheusAPI(url, headers, timeout, client)
        self.match = _matchers_of(match)
        self._semantics = None if semantics is None else parse_semantics(semantics)
        self._is_victoriametrics: bool | None = None
        self._names: set[str] = set()
        self._names_at = -math.inf
        self._held: dict[tuple[str, str], bool] = {}
        self._layouts: dict[tuple[str, str], list[_Layout]] = {}
        self._series: dict[tuple[str, tuple[tuple[str, str], ...]], list[SeriesInfo]] = {}
        self.layout_recheck_seconds = LAYOUT_RECHECK_SECONDS
        self.layout_rows_seconds = LAYOUT_ROWS_SECONDS
        self.names_max_age_seconds = names_max_age_seconds
        self.series_lookback_seconds = series_lookback_seconds
        self.kept = KeptAnswers(clock)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.api.close()

    def __enter__(self) -> PrometheusReader:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- what the server is ----------------------------------------------------------------

    @property
    def semantics(self) -> WindowSemantics:
        """The range rule the server's windows follow (see the module docstring)."""
        if self._semantics is None:
            self._semantics = self._detect_semantics()
        return self._semantics

    @property
    def is_victoriametrics(self) -> bool:
        if self._is_victoriametrics is None:
            self._is_victoriametrics = self.api.answers(VICTORIAMETRICS_PROBE)
        return self._is_victoriametrics

    def _detect_semantics(self) -> WindowSemantics:
        if self.is_victoriametrics:
            return WindowSemantics.EXACT
        version = self.api.build_info().get("version", "")
        major = version.split(".", 1)[0]
        if major == "3":
            return WindowSemantics.PROMETHEUS_3
        if major != "2":
            logger.warning(
                "%s reports version %r: windows read as Prometheus 2.x's; give semantics= "
                "when the server evaluates like Prometheus 3",
                self.api.url,
                version,
            )
        return WindowSemantics.PROMETHEUS_2

    def metric_names(self) -> set[str]:
        """Every metric name the server holds (cached ``names_max_age_seconds``)."""
        now = time.monotonic()
        if now - self._names_at > self.names_max_age_seconds:
            match = [f"{{{self.match}}}"] if self.match else []
            self._names = set(self.api.label_values("__name__", match))
            self._names_at = now
            self._held.clear()
            self._series.clear()
        return self._names

    def raw_family_names(self) -> list[str]:
        """The raw families the server holds, as the store would keep them: ``raw:`` + each
        metric name no dialect rule maps (a mapped histogram's ``_bucket``, ``_sum`` and
        ``_count`` included), sorted."""
        names = self.metric_names()
        mapped = {s.metric for family in c.FAMILIES for s in resolve(family, names)}
        parts = {f"{m}{suffix}" for m in mapped for suffix in ("_bucket", "_sum", "_count")}
        return sorted(c.RAW_PREFIX + n for n in names if n not in mapped | parts)

    # -- series and raw readings -------------------------------------------------------------

    def series(self, family: str, labels: Mapping[str, str] | None = None) -> list[SeriesInfo]:
        """The series of ``family`` the server held over the last ``series_lookback_seconds``
        whose labels include every pair in ``labels``; kept as long as the metric names (a
        cycle asks for the same ones several times: 2,500 label sets at 500 replicas), so a
        new replica's series are seen within ``names_max_age_seconds``, as a new name is."""
        self.metric_names()  # NOTE: refreshing the names empties this cache
        key = (family, tuple(sorted((labels or {}).items())))
        found = self._series.get(key)
        if found is None:
            found = self._read_series(family, labels)
            with self._lock:
                if len(self._series) >= SERIES_CACHED:
                    self._series.clear()
                self._series[key] = found
        return list(found)

    def _read_series(self, family: str, labels: Mapping[str, str] | None) -> list[SeriesInfo]:
        now = time.time()
        if family.startswith(c.RAW_PREFIX):
            return [
                SeriesInfo(family, key, RAW_KIND, frozenset())
                for key in self._raw_series(family, labels, now)
            ]
        out: dict[Labels, SeriesInfo] = {}
        for source, matchers in self._sources(family, labels):
            # NOTE: a histogram's series are its _count's: one per series, not one per bucket
            # (23 times fewer label sets from a vLLM fleet's TTFT)
            name = source.metric + ("_count" if _is_histogram(source) else "")
            if source.rule.from_sum:
                name = source.metric + "_sum"
            found = self.api.series(
                [q.selector(name, matchers)], now - self.series_lookback_seconds, now
            )
            for item in found:
                key = source.canonical(item)
                if key not in out:  # NOTE: a current name wins over a renamed one
                    out[key] = SeriesInfo(family, key, source.kind.value, source.flags)
        return list(out.values())

    def samples(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[Sample]]:
        """Counter or gauge readings with ``start <= t <= end``, per series, in time order.
        A raw family (``RAW_PREFIX`` + a sample name) reads that sample's stored values as
        they are, from ``series_lookback_seconds`` ago at the earliest."""
        if family.startswith(c.RAW_PREFIX):
            return self._raw_samples(family, labels, start, end)
        # NOTE: every selected series answers, with no readings where the range has none
        out: dict[Labels, list[Sample]] = {i.labels: [] for i in self.series(family, labels)}
        filled: set[Labels] = set()
        for source, matchers in self._sources(family, labels):
            if _is_histogram(source):
                continue
            name = source.metric + ("_sum" if source.rule.from_sum else "")
            for series_labels, points in self._raw(re.escape(name), matchers, start, end):
                key = source.canonical(series_labels)
                if key not in filled:  # NOTE: a current name wins over a renamed one
                    filled.add(key)
                    out[key] = [Sample(t, v * source.scale) for t, v in points]
        return out

    def snapshots(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[HistogramSnapshot]]:
        """Histogram snapshots with ``start <= t <= end``, per series, in time order."""
        out: dict[Labels, list[HistogramSnapshot]] = {}
        for source, matchers in self._sources(family, labels):
            if not _is_histogram(source):
                continue
            pattern = f"{re.escape(source.metric)}_(bucket|sum)"
            rows: dict[Labels, dict[float, tuple[list[tuple[float, float]], list[float]]]] = {}
            for series_labels, points in self._raw(pattern, matchers, start, end):
                key = source.canonical(series_labels)
                bound = parse_le(series_labels.get(c.LABEL_LE, ""))
                for t, v in points:
                    buckets, sums = rows.setdefault(key, {}).setdefault(t, ([], []))
                    if bound is not None:
                        scaled = bound * source.scale if math.isfinite(bound) else bound
                        buckets.append((scaled, v))
                    else:
                        sums.append(v * source.scale)
            for key, by_time in rows.items():
                if key in out:
                    continue
                out[key] = [
                    HistogramSnapshot(t, ClassicHistogram.from_buckets(b, s[0] if s else None))
                    for t, (b, s) in sorted(by_time.items())
                    if b
                ]
        return out

    def exemplars(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> list[StoredExemplar]:
        """The server's exemplars of the range (``/api/v1/query_exemplars``; Prometheus keeps
        them only in memory, with ``--enable-feature=exemplar-storage``). A server without the
        API (VictoriaMetrics) has none to give."""
        return [e for found in self._exemplars(family, labels, start, end).values() for e in found]

    def exemplars_by_target(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[str, list[StoredExemplar]]:
        """:meth:`exemplars` of each target of the selection, from one request (triage's
        slowest requests of every replica)."""
        return {
            t: found for t, found in sorted(self._exemplars(family, labels, start, end).items())
        }

    def _exemplars(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[str, list[StoredExemplar]]:
        out: dict[str, list[StoredExemplar]] = {}
        for source, matchers in self._sources(family, labels):
            if not _is_histogram(source) or self.is_victoriametrics:
                continue
            expr = q.selector(source.metric + "_bucket", matchers)
            params = {"query": expr, "start": f"{start:.3f}", "end": f"{end:.3f}"}
            data = self.api.get_json("POST", "query_exemplars", params, expr)
            for group in data if isinstance(data, list) else ():
                series = dict(group.get("seriesLabels") or {})
                bound = parse_le(series.get(c.LABEL_LE, ""))
                found = out.setdefault(_target(series), [])
                for item in group.get("exemplars") or ():
                    scaled = bound * source.scale if bound and math.isfinite(bound) else bound
                    found.append(
                        StoredExemplar(
                            math.inf if scaled is None else scaled,
                            float(item.get("value", math.nan)) * source.scale,
                            c.labels_key(dict(item.get("labels") or {})),
                        )
                    )
        return out

    def scrapes(
        self, target: str, start: float = -math.inf, end: float = math.inf
    ) -> list[ScrapeStatus]:
        """``up`` of ``target`` (its ``instance``) with ``start <= t <= end``, oldest first;
        open edges reach back ``series_lookback_seconds`` and up to now."""
        if not start <= end:
            return []
        now = time.time()
        start, end = max(start, now - self.series_lookback_seconds), min(end, now)
        matchers = ",".join(x for x in (f"{TARGET_LABEL}={quote(target)}", self.match) if x)
        out = []
        for _, points in self._raw(UP, matchers, start, end):
            out += [ScrapeStatus(t, v == 1, "" if v == 1 else DOWN_ERROR) for t, v in points]
        return sorted(out)

    def _raw_series(
        self, family: str, labels: Mapping[str, str] | None, now: float
    ) -> dict[Labels, str]:
        """The series of raw ``family`` the server held over the lookback: their labels as
        the store keeps them, each with the spelling that answers for it (the name as exposed
        wins over Prometheus 2.x's ``_`` spelling, as a current name over a renamed one)."""
        out: dict[Labels, str] = {}
        matchers = raw_matchers(labels, self.match)
        for metric in raw_metrics(family.removeprefix(c.RAW_PREFIX), self.metric_names()):
            found = self.api.series(
                [q.selector(metric, matchers)], now - self.series_lookback_seconds, now
            )
            for item in found:
                out.setdefault(raw_labels(item), metric)
        return out

    def _raw_samples(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[Sample]]:
        now = time.time()
        chosen = self._raw_series(family, labels, now)
        out: dict[Labels, list[Sample]] = {key: [] for key in chosen}
        start = max(start, now - self.series_lookback_seconds)
        matchers = raw_matchers(labels, self.match)
        for metric in dict.fromkeys(chosen.values()):
            for series_labels, points in self._raw(re.escape(metric), matchers, start, end):
                key = raw_labels(series_labels)
                if chosen.get(key) == metric:
                    out[key] = [Sample(t, v) for t, v in points]
        return out

    # -- the window engine (StepReads' primitives) -----------------------------------------

    def _histogram_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,  # NOTE: the server keeps its own data; nothing to choose
        mode: WindowSemantics,
    ) -> list[ClassicHistogram | None]:
        fleet = self._fleet_histograms(family, labels, bounds, mode)
        if fleet is not None:
            return fleet
        steps = self._target_histograms(family, labels, bounds, mode, merged=True)
        return [_merge(family, sorted(step.items())) for step in steps]

    def _fleet_histograms(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        mode: WindowSemantics,
    ) -> list[ClassicHistogram | None] | None:
        """The merged histogram of each step summed on the server (one series per bucket
        comes back, whatever the fleet's size), when one source answers and every target's
        layout is one; ``None`` when the per-target read must decide (several sources, where
        a current name wins target by target, or a layout check that failed)."""
        self._answering(mode)
        if len(bounds) < 2:
            return []
        _require_finite(bounds)
        sources = self._meaningful_sources(family, labels)
        if len(sources) != 1:
            return None if sources else [None] * (len(bounds) - 1)
        ((source, matchers),) = sources
        if not self._one_layout(source, matchers, bounds):
            return None
        expr = q.fleet_histogram_window(source.metric, matchers, bounds[1] - bounds[0])
        use = functools.partial(_fleet_histogram, scale=source.scale)
        answers = self._evaluate(expr, bounds, use, "fleet")
        return [answers.get(k) for k in range(len(bounds) - 1)]

    def _one_layout(self, source: Source, matchers: str, bounds: Sequence[float]) -> bool:
        """Whether, over the whole of ``bounds``, every selected target kept one bucket layout
        and all hold the same one. Ranges found so are remembered (a few per metric and
        selector: the current windows and the baselines before them), so that a read inside
        one sends no check, and the next evaluation's window checks only its part after the
        range it extends (compared with the layout remembered)."""
        start, end = bounds[0], bounds[-1]
        with self._lock:
            known = list(self._layouts.get((source.metric, matchers), ()))
        if any(k.start <= start and end <= k.end for k in known):
            return True
        extended = next((k for k in known if k.start <= start <= k.end), None)
        extended = extended or next((k for k in known if k.start <= end <= k.end), None)
        low, high = start, end
        if extended is not None and extended.start <= start:
            low = max(start, extended.end - self.layout_recheck_seconds)
        elif extended is not None:
            high = min(end, extended.start + self.layout_recheck_seconds)
        layout = self._layout_over(source, matchers, low, high)
        if layout is None:
            return False
        if extended is not None and layout and extended.bounds and layout != extended.bounds:
            return False
        # NOTE: ranges that overlap and hold one layout make one (the range extended among
        # them): each target kept one layout across both (a change would lie inside one of
        # them), so a baseline read after the window that checked its times sends no check
        merged = _Layout(start, end, layout)
        with self._lock:
            kept = []
            for k in self._layouts.get((source.metric, matchers), ()):
                if k.start <= merged.end and merged.start <= k.end and _same_layout(k, merged):
                    merged = _Layout(
                        min(k.start, merged.start),
                        max(k.end, merged.end),
                        merged.bounds or k.bounds,
                    )
                else:
                    kept.append(k)
            self._layouts[(source.metric, matchers)] = [*kept, merged][-LAYOUT_RANGES_KEPT:]
        return True

    def _layout_over(
        self, source: Source, matchers: str, start: float, end: float
    ) -> frozenset[str] | None:
        """The ``le``s every selected target held over ``[start, end]``; ``None`` when a
        target's layout changed (its buckets hold different numbers of samples) or the
        targets' layouts differ (the buckets are not held by as many series each). A long
        range (a first read) is one ``count_over_time`` pass whose rows, one per bucket
        series, are checked here; a short one (the part after a range already checked, each
        evaluation) is checked on the server, which sends back a row per ``le`` and only the
        failures: three passes over minutes of samples cost the server less than a row per
        series of a large fleet costs to decode, every cycle (``q.layout_check``)."""
        if end <= start:
            return frozenset()
        per_series = end - start > self.layout_rows_seconds
        expr = q.layout_check(source.metric, matchers, end - start, per_series=per_series)
        counts: dict[str, set[float]] = {}
        held: dict[str, float] = {}
        for labels, value in self._evaluate(expr, [start, end]).get(0, []):
            le = labels.get(c.LABEL_LE, "")
            if le == q.LAYOUT_CHANGED_ROW:
                return None
            if per_series:
                counts.setdefault(_target(labels), set()).add(value)
                held[le] = held.get(le, 0.0) + 1.0
            else:
                held[le] = value
        if any(len(v) > 1 for v in counts.values()) or len(set(held.values())) > 1:
            return None
        return frozenset(held)

    def _histogram_steps_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
        targets: Sequence[str] | None = None,
    ) -> list[dict[str, ClassicHistogram]]:
        """One query per source for every target (``targets``: those only, one regex
        matcher): the server groups by ``instance``."""
        if targets is not None and not targets:
            return [{} for _ in bounds[1:]]
        return self._target_histograms(family, labels, bounds, mode, False, targets)

    def _target_histograms(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        mode: WindowSemantics,
        merged: bool,
        targets: Sequence[str] | None = None,
    ) -> list[dict[str, ClassicHistogram]]:
        """Per step, each target's histogram. ``merged``: the targets will be added up, so
        the whole selection must hold one meaning; else each target must. ``targets``: only
        those (an ``instance=~…`` matcher added)."""
        self._answering(mode)
        if len(bounds) < 2:
            return []
        _require_finite(bounds)
        steps: list[dict[str, list[ClassicHistogram]]] = [{} for _ in bounds[1:]]
        current: list[set[str]] = [set() for _ in bounds[1:]]
        meanings: dict[str, set[frozenset[str]]] = {}
        for source, matchers in self._selected_sources(family, labels, merged):
            if targets is not None:
                matchers = ",".join(x for x in (matchers, _targets_matcher(targets)) if x)
            expr = q.histogram_window(source.metric, matchers, bounds[1] - bounds[0])
            use = functools.partial(_histograms_by_target, scale=source.scale)
            answers = self._evaluate(expr, bounds, use, "by-target")
            for k, per_target in answers.items():
                for target, histogram in sorted(per_target.items()):
                    if histogram is None:
                        self._raise_layout_change(source, family, labels, target, bounds, k)
                        continue
                    if source.is_renamed and target in current[k]:
                        continue  # NOTE: the current name wins, as in a scrape
                    if not source.is_renamed:
                        current[k].add(target)
                    meanings.setdefault(target, set()).add(source.flags)
                    steps[k].setdefault(target, []).append(histogram)
        _one_meaning_each(family, meanings)
        return [
            {
                t: merged
                for t, items in step.items()
                if (merged := _merge(family, [(t, h) for h in items]))
            }
            for step in steps
        ]

    def _counter_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[float | None]:
        self._answering(mode)
        if len(bounds) < 2:
            return []
        _require_finite(bounds)
        sources = self._meaningful_sources(family, labels)
        if len(sources) == 1:  # NOTE: summed on the server: one value a step comes back
            ((source, matchers),) = sources
            metric = source.metric + ("_sum" if source.rule.from_sum else "")
            expr = q.fleet_counter_window(metric, matchers, bounds[1] - bounds[0])
            out: list[float | None] = [None] * (len(bounds) - 1)
            for k, total in self._evaluate(expr, bounds, _total, "total").items():
                out[k] = total * source.scale
            return out
        steps = self._target_counters(family, labels, bounds, mode, merged=True)
        # NOTE: summed in target order, so the float sum is the same whichever read asked
        return [sum(v for _, v in sorted(step.items())) if step else None for step in steps]

    def _counter_steps_by_target(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,
        mode: WindowSemantics,
    ) -> list[dict[str, float]]:
        return self._target_counters(family, labels, bounds, mode, merged=False)

    def _target_counters(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        mode: WindowSemantics,
        merged: bool,
    ) -> list[dict[str, float]]:
        """Per step, each target's increase; ``merged`` as :meth:`_target_histograms`."""
        self._answering(mode)
        if len(bounds) < 2:
            return []
        _require_finite(bounds)
        steps: list[dict[str, float]] = [{} for _ in bounds[1:]]
        current: list[set[str]] = [set() for _ in bounds[1:]]
        meanings: dict[str, set[frozenset[str]]] = {}
        for source, matchers in self._selected_sources(family, labels, merged):
            metric = source.metric + ("_sum" if source.rule.from_sum else "")
            expr = q.counter_window(metric, matchers, bounds[1] - bounds[0])
            renamed, scale, seen = source.is_renamed, source.scale, set()
            for k, by_target in self._evaluate(expr, bounds, _by_target, "by-target").items():
                step, here = steps[k], current[k]
                seen.update(by_target)
                if not step and not renamed and scale == 1.0:  # NOTE: the usual case, whole
                    step.update(by_target)
                    here.update(by_target)
                    continue
                for target, value in by_target.items():
                    if renamed and target in here:
                        continue
                    if not renamed:
                        here.add(target)
                    step[target] = step.get(target, 0.0) + value * scale
            for target in seen:
                meanings.setdefault(target, set()).add(source.flags)
        _one_meaning_each(family, meanings)
        return steps

    def _selected_sources(
        self, family: str, labels: Mapping[str, str] | None, merged: bool
    ) -> list[tuple[Source, str]]:
        """The sources a read uses: for a ``merged`` read, one meaning over the whole
        selection (:meth:`_meaningful_sources`); else every source that holds series, each
        target checked on its own (:func:`_one_meaning_each`)."""
        if merged:
            return self._meaningful_sources(family, labels)
        return self._held_sources(family, labels)

    def _held_sources(
        self, family: str, labels: Mapping[str, str] | None
    ) -> list[tuple[Source, str]]:
        """:meth:`_sources`; where their semantic flags differ, those the server holds
        series of."""
        sources = self._sources(family, labels)
        if len({s.flags for s, _ in sources}) < 2:
            return sources
        now = time.time()
        return [(s, m) for s, m in sources if self._has_series(s, m, now)]

    def histogram_means_by_target(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[str, tuple[float, float]] | None:
        """Each target's observed sum and count of ``family`` over ``(start, end]``: its
        window's ``sum_value`` and ``cumulative_counts[-1]``, from ``_sum`` and the ``+Inf``
        bucket alone (two series a target instead of every bucket: what a mean needs, and
        nothing a bucket layout changes). ``None`` where one read cannot say (several names
        for the family, a histogram made from sums): read the windows instead."""
        self._answering(WindowSemantics.EXACT)
        if not (math.isfinite(start) and math.isfinite(end)) or end <= start:
            return None
        sources = self._held_sources(family, labels)
        if len(sources) != 1 or not _is_histogram(sources[0][0]) or sources[0][0].rule.from_sum:
            return None
        ((source, matchers),) = sources
        expr = q.histogram_means(source.metric, matchers, end - start)
        rows = self._evaluate(expr, [start, end]).get(0, [])
        sums: dict[str, float] = {}
        counts: dict[str, float] = {}
        for row_labels, value in rows:
            target = _target(row_labels)
            if row_labels.get(c.LABEL_LE) == q.SUM_ROW:
                sums[target] = value * source.scale
            else:
                counts[target] = value
        return {t: (sums.get(t, math.nan), n) for t, n in counts.items()}

    def gauge_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
        step: float,
        across: str,
    ) -> list[tuple[float, float]] | None:
        """A gauge averaged per step ``(t - step, t]`` within each series, then summed
        (``across="sum"``) or maxed (``"max"``) across series, on the server: ``(t, value)``
        per step end ``t`` (a multiple of ``step``; the first and last steps cut at ``start``
        and ``end``), steps without readings left out. The console's ``gauge_frame`` in one
        ``query_range`` instead of every reading copied. ``None`` where it cannot: another
        ``across``, or several metric names selected (a current name wins over a renamed one
        series by series, which the raw readings decide)."""
        if across not in ("sum", "max") or not (math.isfinite(start) and math.isfinite(end)):
            return None
        if not (step > 0 and math.isfinite(step)) or end <= start:
            return []
        sources = self._held_sources(family, labels)
        if not sources:
            return []
        if len(sources) != 1 or sources[0][0].kind is not Kind.GAUGE:
            return None
        ((source, matchers),) = sources
        metric = source.metric + ("_sum" if source.rule.from_sum else "")

        def mean_over(width: float) -> str:  # NOTE: 1 ms short: (t - width, t] on any server
            return q.gauge_across(across, metric, matchers, width - 0.001)

        first, last = math.floor(start / step) * step + step, math.ceil(end / step) * step
        ends = [first + step * k for k in range(round((last - first) / step) + 1)]
        full = [e for e in ends if e - step >= start and e <= end]
        out: dict[float, float] = {}
        for e in {ends[0], ends[-1]} - set(full):  # NOTE: a step cut at start or end
            low, high = max(e - step, start), min(e, end)
            if high - low > 0.001:
                for _, value in self._evaluate(mean_over(high - low), [low, high]).get(0, []):
                    out[e] = value
        if full:
            bounds = [full[0] - step, *full]
            for k, rows in self._evaluate(mean_over(step), bounds).items():
                out[bounds[k + 1]] = rows[0][1]
        return [(t, v * source.scale) for t, v in sorted(out.items()) if not math.isnan(v)]

    def scrapes_by_target(
        self, targets: Sequence[str], start: float = -math.inf, end: float = math.inf
    ) -> dict[str, list[ScrapeStatus]]:
        """:meth:`scrapes` of each of ``targets`` from one query of ``up``."""
        if not start <= end or not targets:
            return {t: [] for t in targets}
        now = time.time()
        start, end = max(start, now - self.series_lookback_seconds), min(end, now)
        matchers = ",".join(x for x in (_targets_matcher(targets), self.match) if x)
        out: dict[str, list[ScrapeStatus]] = {t: [] for t in targets}
        for labels, points in self._raw(UP, matchers, start, end):
            target = _target(labels)
            if target in out:
                out[target] += [
                    ScrapeStatus(t, v == 1, "" if v == 1 else DOWN_ERROR) for t, v in points
                ]
        return {t: sorted(v) for t, v in out.items()}

    # -- helpers ---------------------------------------------------------------------------

    def _answering(self, mode: WindowSemantics) -> WindowSemantics:
        own = self.semantics
        if mode is WindowSemantics.EXACT or mode is own:
            return own
        raise ValueError(
            f"semantics={mode.value!r}: {self.api.url} evaluates windows as {own.value!r}, and "
            f"no query gives another server's range rule; ask for {own.value!r} (or 'exact', "
            "this reader's default, which reads as the server does)"
        )

    def _sources(self, family: str, labels: Mapping[str, str] | None) -> list[tuple[Source, str]]:
        """The sources of ``family`` on the server with the matchers each gets for ``labels``."""
        out: list[tuple[Source, str]] = []
        if family not in c.FAMILIES:
            return out  # NOTE: as the store: a family nothing maps has no series (NVML's GPU
            # families are the collector's own; the dialect table maps none onto them)
        for source in resolve(family, self.metric_names()):
            matchers = source.matchers(labels, self.match)
            if matchers is not None:
                out.append((source, matchers))
        return out

    def _meaningful_sources(
        self, family: str, labels: Mapping[str, str] | None
    ) -> list[tuple[Source, str]]:
        """:meth:`_sources`, refused (:class:`SemanticsMismatchError`) when series of
        different semantic flags are selected: adding them would mix two measurements."""
        sources = self._held_sources(family, labels)
        _one_meaning_each(family, {"": {s.flags for s, _ in sources}})
        return sources

    def _has_series(self, source: Source, matchers: str, now: float) -> bool:
        """Whether the server holds series of ``source`` for ``matchers`` (kept as long as
        the metric names are)."""
        self.metric_names()  # NOTE: refreshing the names empties this cache
        key = (source.metric, matchers)
        held = self._held.get(key)
        if held is None:
            name = source.metric + ("_count" if _is_histogram(source) else "")
            name = source.metric + "_sum" if source.rule.from_sum else name
            start = now - self.series_lookback_seconds
            held = self._held[key] = bool(self.api.series([q.selector(name, matchers)], start, now))
        return held

    def _evaluate(
        self,
        expr: str,
        bounds: Sequence[float],
        use: Callable[[Rows], T] = list,  # type: ignore[assignment]
        use_name: str = "rows",
    ) -> dict[int, T]:
        """``use`` of ``expr``'s rows (labels, value) at each ``bounds[k + 1]``, for the
        steps with rows; the answers of steps that are kept (made once, per ``use_name``) are
        not asked for again (``collectors.prometheus.kept``)."""
        return self.kept.evaluate(expr, bounds, lambda part: self._ask(expr, part), use, use_name)

    def _ask(self, expr: str, bounds: Sequence[float]) -> dict[int, Rows]:
        """``expr`` at each ``bounds[k + 1]``, from the server."""
        extra = {"nocache": "1"} if self.is_victoriametrics else {}
        out: dict[int, Rows] = {}
        if len(bounds) == 2:
            _, result = self.api.query(expr, bounds[1], **extra)
            rows = [(dict(r.get("metric") or {}), point(r.get("value"), expr)[1]) for r in result]
            return {0: rows} if rows else {}
        step = bounds[1] - bounds[0]
        for low in range(1, len(bounds), MAX_POINTS_PER_QUERY):
            high = min(low + MAX_POINTS_PER_QUERY, len(bounds)) - 1
            for r in self.api.query_range(expr, bounds[low], bounds[high], step, **extra):
                labels = dict(r.get("metric") or {})
                for t, v in answer_points(r.get("values"), expr):
                    k = round((t - bounds[1]) / step)
                    if 0 <= k < len(bounds) - 1:
                        out.setdefault(k, []).append((labels, v))
        return out

    def _raw(
        self, pattern: str, matchers: str, start: float, end: float
    ) -> list[tuple[dict[str, str], list[tuple[float, float]]]]:
        """Stored samples of the matching series with ``start <= t <= end``, NaN (staleness
        markers) dropped, read in chunks of ``RAW_CHUNK_SECONDS``; each chunk keeps
        ``(low, high]`` whatever the server's range rule."""
        if not (start <= end and math.isfinite(start) and math.isfinite(end)):
            return []
        series: dict[tuple[tuple[str, str], ...], dict[float, float]] = {}
        low = start - 0.001
        while low < end:
            high = min(end, low + RAW_CHUNK_SECONDS)
            expr = q.raw_range(pattern, matchers, high - low)
            _, result = self.api.query(expr, high)
            for r in result:
                labels = tuple(sorted(dict(r.get("metric") or {}).items()))
                for value in r.get("values") or ():
                    t, v = point(value, expr)
                    if low < t <= high and start <= t and not math.isnan(v):
                        series.setdefault(labels, {})[t] = v
            low = high
        # NOTE: chunks are read oldest first and a series' values come in time order: each
        # series' points are inserted in order already
        return [(dict(k), list(points.items())) for k, points in sorted(series.items())]

    def _raise_layout_change(
        self,
        source: Source,
        family: str,
        labels: Mapping[str, str] | None,
        target: str,
        bounds: Sequence[float],
        k: int,
    ) -> None:
        """Find where ``target``'s layout changed in step ``k`` from its raw snapshots."""
        a, b = bounds[k], bounds[k + 1]
        chosen = {**(labels or {}), c.LABEL_TARGET: target}
        rule = self.semantics.range_semantics
        for snaps in self.snapshots(family, chosen, a - 300.0, b).values():
            inside = snaps if rule is None else samples_in_range(snaps, b, b - a, rule)
            for previous, current in itertools.pairwise(inside):
                left, right = previous.histogram.upper_bounds, current.histogram.upper_bounds
                if left != right and (rule is not None or current.timestamp_seconds > a):
                    raise LayoutChangeError(
                        SeriesName(family, target),
                        previous.timestamp_seconds,
                        current.timestamp_seconds,
                        left,
                        right,
                    )
        raise PrometheusSourceError(
            f"{source.metric} on target {target!r}: its bucket series hold different numbers "
            f"of samples between {a:.3f} and {b:.3f}, but no change of layout was found"
        )


def _total(rows: Rows) -> float:
    return sum(v for _, v in rows)


def _by_target(rows: Rows) -> dict[str, float]:
    """A ``sum by (instance)`` answer as a value per target (one row a target)."""
    return {_target(labels): value for labels, value in rows}


@dataclass(frozen=True, slots=True)
class _Layout:
    """A range over which a metric's selected targets were found to hold one layout."""

    start: float
    end: float
    bounds: frozenset[str]


def _same_layout(a: _Layout, b: _Layout) -> bool:
    """Whether two ranges hold one layout (a range where nothing was held holds any)."""
    return not a.bounds or not b.bounds or a.bounds == b.bounds


def _merge(family: str, items: list[tuple[str, ClassicHistogram]]) -> ClassicHistogram | None:
    """``sum by (le)`` of the targets' histograms, refusing layouts that differ."""
    if not items:
        return None
    first_target, total = items[0]
    for target, histogram in items[1:]:
        if histogram.upper_bounds != total.upper_bounds:
            raise layouts_differ_error(
                SeriesName(family, first_target),
                total.upper_bounds,
                SeriesName(family, target),
                histogram.upper_bounds,
            )
        total = merge_histograms([total, histogram])
    return total


def _one_meaning_each(family: str, meanings: Mapping[str, set[frozenset[str]]]) -> None:
    """A :class:`SemanticsMismatchError` for a target (or the whole selection, keyed ``""``)
    whose series hold different meanings: adding them would mix two measurements."""
    for held in meanings.values():
        if len(held) > 1:
            described = sorted(",".join(sorted(f)) or "(none)" for f in held)
            raise SemanticsMismatchError(
                f"series of {family} selected with different semantic flags {described}; "
                "narrow the label selector (e.g. by target) so that one meaning is merged"
            )


def _require_finite(bounds: Sequence[float]) -> None:
    if not all(math.isfinite(x * 1000) for x in (bounds[0], bounds[-1], bounds[-1] - bounds[0])):
        raise ValueError(
            f"a window read from a server needs a finite start and end (Unix seconds), got "
            f"start={bounds[0]!r} end={bounds[-1]!r}"
        )


def _is_histogram(source: Source) -> bool:
    return source.kind is Kind.HISTOGRAM and not source.rule.from_sum


def _targets_matcher(targets: Sequence[str]) -> str:
    """``instance=~"a|b"``: exactly those targets (RE2 anchors the whole value)."""
    return f"{TARGET_LABEL}=~{quote('|'.join(re.escape(t) for t in targets))}"


def _matchers_of(match: str) -> str:
    """``{job="vllm"}`` or ``job="vllm"`` as bare matchers."""
    text = (match or "").strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    return text
