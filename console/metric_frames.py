"""Stored metrics as small, chart-ready DataFrames: merged percentiles with their bounds,
rates, gauges and histogram heatmaps, one row per step (already aggregated, so no chart ships
more than a few thousand points).

Pure reads through :class:`collectors.store.MetricsReader` (no Streamlit, no SQL): the
console's cache in :mod:`console.data` wraps these, and tests call them on any reader.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from collectors.store.protocols import MetricsReader
from collectors.store.records import HistogramStep, QuantileStep, quantile_steps
from slo import SMALL_DELTA_TOLERANCE, QuantileResult, merge_histograms

PERCENTILES = (0.5, 0.95, 0.99)
PERCENTILE_NAMES = {0.5: "p50", 0.95: "p95", 0.99: "p99"}
QUANTILE_COLUMNS = ["ts", "percentile", "seconds", "lower_seconds", "upper_seconds"]
#: Heatmap rows: per step and bucket, the observations in that bucket.
HEATMAP_COLUMNS = ["ts", "bucket", "lower", "upper", "count"]


def _ts(t: float) -> pd.Timestamp:
    return pd.Timestamp(t, unit="s", tz="UTC")


def _finite(x: float) -> float | None:
    return x if isinstance(x, int | float) and math.isfinite(x) else None


def window_percentiles(
    reader: MetricsReader, family: str, selector: Mapping[str, str], start: float, end: float
) -> dict[str, QuantileResult] | None:
    """p50/p95/p99 of ``family`` over ``[start, end]``, merged across the selected series
    (every replica the selector picks) by the store's window, each with the bucket interval
    holding the true value. ``None`` when no series has two snapshots in the window."""
    histogram = reader.histogram_window(family, dict(selector), start, end)
    if histogram is None:
        return None
    return {PERCENTILE_NAMES[q]: histogram.quantile(q) for q in PERCENTILES}


def window_total(
    reader: MetricsReader, family: str, selector: Mapping[str, str], start: float, end: float
) -> float | None:
    """Observations of a histogram family over the window (``None``: no data)."""
    histogram = reader.histogram_window(family, dict(selector), start, end)
    return None if histogram is None else histogram.total_count


def percentile_frame(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> pd.DataFrame:
    """Long frame ``ts, percentile, seconds, lower_seconds, upper_seconds`` from the store's
    ``quantile_series``; steps without observations and NaN values are left out (a gap)."""
    return percentile_rows(
        reader.quantile_series(family, dict(selector), start, end, PERCENTILES, step)
    )


def percentile_rows(steps: Iterable[QuantileStep]) -> pd.DataFrame:
    """:func:`percentile_frame`'s frame from quantile steps (``quantile_series``'s answer)."""
    rows = []
    for t, results in steps:
        if results is None:
            continue
        for q, result in zip(PERCENTILES, results, strict=True):
            value = _finite(result.value)
            if value is None:
                continue
            rows.append(
                (_ts(t), PERCENTILE_NAMES[q], value, _finite(result.lower_bound),
                 _finite(result.upper_bound))
            )  # fmt: skip
    return pd.DataFrame(rows, columns=QUANTILE_COLUMNS)


def step_percentiles(steps: Sequence[HistogramStep]) -> pd.DataFrame:
    """:func:`percentile_frame` from ``histogram_series`` steps, as ``quantile_series``
    computes it (``collectors.store.records.quantile_steps``, bit for bit)."""
    return percentile_rows(quantile_steps(steps, PERCENTILES, SMALL_DELTA_TOLERANCE))


def window_of_steps(steps: Sequence[HistogramStep]) -> dict[str, QuantileResult] | None:
    """:func:`window_percentiles` of the window the steps tile: exact windows add up, so the
    merged steps are the window's distribution (one read serves the chart and the figures)."""
    histograms = [h for _, h in steps if h is not None]
    if not histograms:
        return None
    histogram = merge_histograms(histograms)
    return {PERCENTILE_NAMES[q]: histogram.quantile(q) for q in PERCENTILES}


def window_sum_count(steps: Sequence[HistogramStep]) -> tuple[float, float] | None:
    """The window's observed sum and count (the merged steps' ``_sum`` and ``+Inf`` count):
    their ratio is the mean; ``None`` without a histogram or when a step lacks its sum."""
    histograms = [h for _, h in steps if h is not None]
    if not histograms:
        return None
    histogram = merge_histograms(histograms)
    if histogram.sum_value is None:
        return None
    return histogram.sum_value, histogram.total_count


def counter_rate_frame(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step: float,
    *,
    split_by: str | None = None,
    per_seconds: float = 1.0,
) -> pd.DataFrame:
    """``ts, series, rate``: a counter's increase per step over ``per_seconds`` (1: per second,
    60: per minute), summed across the selected series, or one series per value of the label
    ``split_by`` (e.g. ``code``)."""
    groups: dict[str, dict[str, str]] = {"all": dict(selector)}
    if split_by is not None:
        values = sorted(
            {dict(s.labels).get(split_by) for s in reader.series(family, dict(selector))} - {None}
        )
        groups = {v: {**selector, split_by: v} for v in values}  # type: ignore[misc]
    rows, recorded = [], set()
    for name, labels in groups.items():
        for t, increase in counter_steps(reader, family, labels, start, end, step, recorded):
            if increase is not None:
                rows.append((_ts(t), name, increase / step * per_seconds))
    return _recorded(pd.DataFrame(rows, columns=["ts", "series", "rate"]), recorded)


#: The key of a frame's ``attrs`` naming the server's records it was read from.
RECORDED = "recorded"


def _recorded(frame: pd.DataFrame, names: set[str]) -> pd.DataFrame:
    frame.attrs[RECORDED] = tuple(sorted(names))
    return frame


def counter_steps(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step: float,
    recorded: set[str] | None = None,
) -> list[tuple[float, float | None]]:
    """``counter_series``, from the server's record of the fleet's rate where it answers
    every step (``recorded_counter_series``: a day of a large fleet's counter reads a few
    series instead of every replica's; its name is added to ``recorded``)."""
    read = getattr(reader, "recorded_counter_series", None)
    found = None if read is None else read(family, dict(selector), start, end, step)
    if found is None:
        return list(reader.counter_series(family, dict(selector), start, end, step))
    if recorded is not None:
        recorded.add(found[1])
    return list(found[0])


#: Readings that stopped less than this before the range's end (or two steps, if longer)
#: have not stopped: a scrape interval, and the live view's end runs a step ahead of now.
QUIET_SECONDS = 120.0
#: How far before a range's start a reading is looked for (or two steps, if longer): the
#: one the range's first increase starts from (Prometheus's staleness is as long).
LOOKBACK_SECONDS = 300.0


@dataclass(frozen=True)
class DataSpan:
    """The part of a range ``[start, end]`` a family's readings cover, as its window counts
    them: from ``first_seconds``, the reading its first increase starts from (the last one
    before ``start`` when readings go back past it), to ``last_seconds``, the newest. ``starts_late``: the readings begin inside the range
    (a stack that started two minutes ago); ``ends_early``: they stop well before its end (a
    stack that stopped). A rate is an increase over :attr:`seconds`, never over the whole
    range: an hour holding two minutes of traffic is not a twentieth of the traffic."""

    first_seconds: float
    last_seconds: float
    starts_late: bool
    ends_early: bool
    #: The server's record whose steps found the span (``counter_steps``), if one did.
    recorded: str | None = None

    @property
    def seconds(self) -> float:
        return max(0.0, self.last_seconds - self.first_seconds)


def _reading_times(reader, family, selector, start, end) -> list[float]:  # type: ignore[no-untyped-def]
    series = reader.samples(family, dict(selector), start, end)
    return [float(t) for readings in series.values() for t, _ in readings]


def _latest_reading(reader, family, selector, start, end) -> float | None:  # type: ignore[no-untyped-def]
    """The latest reading in ``[start, end]``: the reader's one-row answer where it has one
    (``latest_reading_seconds``: a server), else from the readings."""
    latest = getattr(reader, "latest_reading_seconds", None)
    if latest is not None:
        return latest(family, dict(selector), start, end)
    times = _reading_times(reader, family, selector, start, end)
    return max(times) if times else None


def data_span(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> DataSpan | None:
    """Where in ``[start, end]`` the selected series of the counter ``family`` hold readings
    (see :class:`DataSpan`); ``None`` when no step has an increase. The steps
    (``counter_series``, roll-ups where they cover) find the first and last steps with data;
    only the readings around those two steps are read to place the ends to the scrape."""
    recorded: set[str] = set()
    steps = counter_steps(reader, family, selector, start, end, step, recorded)
    filled = [t for t, increase in steps if increase is not None]
    if not filled:
        return None
    # NOTE: a step's increase needs a reading before it, which lies in the step before:
    # the first reading is at most two steps before the first step with an increase.
    # NOTE: a window counts every pair of readings whose later one is inside it: the first
    # step with an increase holds the later reading of the first pair, whose earlier one is
    # up to a scrape interval before (and, with readings before the start, before it)
    lookback = max(2 * step, LOOKBACK_SECONDS)
    first = _latest_reading(reader, family, selector, start - lookback, start)
    if first is None:  # NOTE: no reading before the range: its first reading in the range
        head = _reading_times(reader, family, selector, max(start, filled[0] - lookback), filled[0])  # fmt: skip
        first = min(head) if head else filled[0] - step
    last = _latest_reading(reader, family, selector, filled[-1] - step, min(end, filled[-1]))
    last = min(end, filled[-1]) if last is None else last
    return DataSpan(
        first_seconds=first,
        last_seconds=max(first, last),
        starts_late=first > start,
        ends_early=last < end - max(2 * step, QUIET_SECONDS),
        recorded=min(recorded, default=None),
    )


def counter_increase_by(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    label: str,
    start: float,
    end: float,
    step: float | None = None,
) -> dict[str, float]:
    """A counter's increase over the window per value of ``label`` (e.g. ``code``).
    ``step``: the window's steps (a whole number of them), so that the server's record of
    the fleet's rate answers it where it covers every step (:func:`counter_steps`)."""
    values = sorted(
        {dict(s.labels).get(label) for s in reader.series(family, dict(selector))} - {None}
    )
    read = None if step is None else getattr(reader, "recorded_counter_series", None)
    out = {}
    for value in values:
        chosen = {**selector, label: value}
        found = None if read is None else read(family, chosen, start, end, step)
        if found is not None:
            out[value] = sum(v for _, v in found[0])  # type: ignore[index]
            continue
        increase = reader.counter_window(family, chosen, start, end)  # type: ignore[arg-type]
        if increase is not None:
            out[value] = increase  # type: ignore[index]
    return out


def gauge_frame(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step: float,
    *,
    across: str = "sum",
) -> pd.DataFrame:
    """``ts, value``: a gauge averaged per step ``(t - step, t]`` within each series (the
    store's step convention), then summed (``across="sum"``, e.g. requests running) or maxed
    (``"max"``, e.g. KV usage) across series. A reader over a server does it there
    (``gauge_steps``); whole-minute steps read the store's gauge roll-ups where they cover (a
    reader with ``gauge_minutes``), raw readings elsewhere."""
    recorded = getattr(reader, "recorded_gauge_steps", None)  # a server's record of the fleet
    found = None if recorded is None else recorded(family, dict(selector), start, end, step, across)  # fmt: skip
    pushed = getattr(reader, "gauge_steps", None)  # a server's: averaged and added there
    steps = found[0] if found is not None else None
    if steps is None and pushed is not None:
        steps = pushed(family, dict(selector), start, end, step, across)
    if steps is not None:
        frame = pd.DataFrame(steps, columns=["t", "value"])
        frame["ts"] = pd.to_datetime(frame["t"], unit="s", utc=True)
        return _recorded(frame[["ts", "value"]], {found[1]} if found is not None else set())
    per_series = [
        means.rename(str(labels))
        for labels, means in _gauge_step_means(reader, family, dict(selector), start, end, step)
    ]
    if not per_series:
        return pd.DataFrame(columns=["ts", "value"])
    wide = pd.concat(per_series, axis=1)
    combined = wide.sum(axis=1, min_count=1) if across == "sum" else wide.max(axis=1)
    out = combined.dropna().reset_index()
    out.columns = ["t", "value"]
    out["ts"] = pd.to_datetime(out["t"], unit="s", utc=True)
    return out[["ts", "value"]]


def _step_end(t: np.ndarray, step: float) -> np.ndarray:
    """The end of the step ``(k * step, (k + 1) * step]`` holding each ``t``."""
    return np.ceil(t / step) * step


def _gauge_step_means(reader, family, selector, start, end, step):  # type: ignore[no-untyped-def]
    """Per series ``(labels, mean per step end)``, from roll-up minutes (their sums and counts)
    up to the store's roll-up coverage and raw readings after it."""
    raw_from = start
    sums: dict = {}
    minutes_of = getattr(reader, "gauge_minutes", None)
    if minutes_of is not None and step % 60 == 0 and start % 60 == 0:
        covered = reader.rollup_coverage()  # type: ignore[attr-defined]
        if covered >= end:
            raw_from = end
        elif covered == -math.inf:  # nothing rolled up yet: every reading is raw
            raw_from = start
        else:
            raw_from = max(start, math.floor(covered / 60) * 60)
        for labels, minutes in minutes_of(family, selector, start, raw_from).items():
            if minutes:
                m = np.array([x.start_seconds + 60.0 for x in minutes])
                n = np.array([float(x.samples) for x in minutes])
                total = np.array([x.avg * x.samples for x in minutes])
                sums[labels] = [pd.DataFrame({"bin": _step_end(m, step), "sum": total, "n": n})]
    if raw_from < end:
        for labels, samples in reader.samples(family, selector, raw_from, end).items():
            frame = pd.DataFrame(samples, columns=["t", "value"])
            frame = frame[frame["t"] > raw_from]  # NOTE: (raw_from, end], as the roll-ups
            if frame.empty:
                continue
            part = pd.DataFrame(
                {"bin": _step_end(frame["t"].to_numpy(), step), "sum": frame["value"], "n": 1.0}
            )
            sums.setdefault(labels, []).append(part)
    for labels, parts in sums.items():
        grouped = pd.concat(parts).groupby("bin")[["sum", "n"]].sum()
        yield labels, grouped["sum"] / grouped["n"]


def ratio_frame(
    reader: MetricsReader,
    numerator: str,
    denominator: str,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> pd.DataFrame:
    """``ts, value``: increase(numerator) / increase(denominator) per step (e.g. prefix hit
    rate); steps with no denominator are left out."""
    recorded: set[str] = set()
    top = dict(counter_steps(reader, numerator, selector, start, end, step, recorded))
    rows = []
    for t, bottom in counter_steps(reader, denominator, selector, start, end, step, recorded):
        hits = top.get(t)
        if bottom and hits is not None:
            rows.append((_ts(t), hits / bottom))
    return _recorded(pd.DataFrame(rows, columns=["ts", "value"]), recorded)


def heatmap_frame(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step: float,
) -> pd.DataFrame:
    """Grafana-style heatmap cells from the stored buckets: per step and bucket
    ``(lower, upper]``, the observations that fell in it (cumulative counts differenced).
    The ``+Inf`` bucket is labelled ``> highest bound``; empty cells are left out."""
    return heatmap_cells(reader.histogram_series(family, dict(selector), start, end, step))


def heatmap_cells(steps: Iterable[HistogramStep]) -> pd.DataFrame:
    """:func:`heatmap_frame`'s cells from ``histogram_series`` steps."""
    rows = []
    for t, histogram in steps:
        if histogram is None:
            continue
        lower = 0.0
        previous = 0.0
        for upper, cumulative in zip(
            histogram.upper_bounds, histogram.cumulative_counts, strict=True
        ):
            count = max(0.0, cumulative - previous)
            previous = max(previous, cumulative)
            if count > 0:
                label = f"> {lower:g}" if math.isinf(upper) else f"≤ {upper:g}"
                rows.append((_ts(t), label, lower, upper, count))
            lower = upper
    return pd.DataFrame(rows, columns=HEATMAP_COLUMNS)


def label_values(reader: MetricsReader, families: Sequence[str], label: str) -> list[str]:
    """The values of ``label`` on the stored series of ``families``, sorted."""
    found: set[str] = set()
    for family in families:
        for info in reader.series(family):
            value = dict(info.labels).get(label)
            if value:
                found.add(value)
    return sorted(found)


#: The most series a per-label breakdown draws (a chart with more lines is unreadable).
MAX_BREAKDOWN_SERIES = 16


def quantile_by_label(
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    label: str,
    values: Sequence[str],
    start: float,
    end: float,
    step: float,
    q: float = 0.99,
) -> pd.DataFrame:
    """``ts, series, ms``: quantile ``q`` of ``family`` per value of ``label`` (e.g. per
    target: "p99 tripled on replica 3"), each over its own series only; at most
    :data:`MAX_BREAKDOWN_SERIES` values, in order."""
    rows = []
    for value in list(values)[:MAX_BREAKDOWN_SERIES]:
        labels = {**selector, label: value}
        for t, results in reader.quantile_series(family, labels, start, end, (q,), step):
            if results is not None and _finite(results[0].value) is not None:
                rows.append((_ts(t), value, results[0].value * 1000.0))
    return pd.DataFrame(rows, columns=["ts", "series", "ms"])


def quantile_by_label_steps(
    per_value: Mapping[str, Sequence[HistogramStep]], q: float = 0.99
) -> pd.DataFrame:
    """:func:`quantile_by_label`'s frame from each value's ``histogram_series`` steps, with
    the quantiles ``quantile_series`` takes (``quantile_steps``, bit for bit)."""
    rows = []
    for value, steps in per_value.items():
        for t, results in quantile_steps(steps, (q,), SMALL_DELTA_TOLERANCE):
            if results is not None and _finite(results[0].value) is not None:
                rows.append((_ts(t), value, results[0].value * 1000.0))
    return pd.DataFrame(rows, columns=["ts", "series", "ms"])


def merged_steps(per_value: Mapping[str, Sequence[HistogramStep]]) -> list[HistogramStep] | None:
    """The step histograms of all the values' series together: per step the values' counts
    added (exact windows add up). ``None`` when the steps or a step's layouts differ (then
    let the store merge them)."""
    series = list(per_value.values())
    if not series or any(len(s) != len(series[0]) for s in series):
        return None
    out = []
    for i, (t, _) in enumerate(series[0]):
        present = [s[i].histogram for s in series if s[i].histogram is not None]
        if any(s[i].t != t for s in series):
            return None
        if any(h.upper_bounds != present[0].upper_bounds for h in present):
            return None
        out.append(HistogramStep(t, merge_histograms(present) if present else None))
    return out
