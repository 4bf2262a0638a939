"""Per-SLO figures for the SLOs page and the Overview: attainment over the range (exact from
request records where the metric allows, else estimated from histograms with its bounds),
budget remaining over the SLO's period, and the multi-window multi-burn-rate table with
which rows fire (``slo.evaluate_burn_rates``, the error ratios as ``alerts.rules.sli`` reads them,
so the table agrees with the burn-rate alerts).

Pure: a :class:`collectors.store.MetricsReader` in, plain data out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from alerts.rules import LATENCY_FAMILIES, ErrorSLI, LatencySLI, common_step, recorded_sli_ratios
from alerts.rules.read import LOOKBACK_SECONDS
from collectors.store.protocols import MetricsReader
from slo import (
    AttainmentEstimate,
    BurnRateCheck,
    ErrorRatioIndicator,
    LatencyIndicator,
    LatencyMetric,
    SLOSpec,
    budget_remaining,
    burn_rate_windows,
    evaluate_burn_rates,
    merge_histograms,
    objective_attainment,
)


@dataclass(frozen=True)
class SLOStatus:
    """One SLO over the console's range: ``attainment`` (NaN: no traffic), with its bounds
    ``[attainment_low, attainment_high]`` (equal when exact) and how it was read
    (``basis``); ``budget_remaining`` over the SLO's period; ``checks`` the MWMB rows."""

    spec: SLOSpec
    attainment: float
    attainment_low: float
    attainment_high: float
    basis: str
    budget_remaining: float
    checks: tuple[BurnRateCheck, ...]
    note: str = ""
    #: Where the burn-rate windows' error ratios came from: ``"recorded"`` (the server's SLI
    #: recording rules, ``tailwatch rules export``) or ``"computed"`` (the engines' series).
    windows_from: str = "computed"
    #: The console's fleet record ``budget_remaining`` was read from (``""``: the engines'
    #: own series), and its first sample in the period (Unix seconds).
    budget_record: str = ""
    budget_since_seconds: float = math.nan

    @property
    def firing_severities(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c.window.severity for c in self.checks if c.is_firing))


def slo_selector(spec: SLOSpec, base: Mapping[str, str]) -> dict[str, str]:
    """The metric selector of an SLO: its ``model``/``tenant`` on top of the page's filters."""
    chosen = dict(base)
    if spec.selector.model is not None:
        chosen["model"] = spec.selector.model
    if spec.selector.tenant is not None:
        chosen["tenant"] = spec.selector.tenant
    return chosen


def latency_family(spec: SLOSpec) -> str | None:
    """The histogram family of a latency SLO (``None``: TPOT, or an error-ratio SLO)."""
    indicator = spec.indicator
    if isinstance(indicator, LatencyIndicator):
        return LATENCY_FAMILIES.get(indicator.metric)
    return None


def _latency_window(reader, spec, selector, start, end):  # type: ignore[no-untyped-def]
    family = latency_family(spec)
    return None if family is None else reader.histogram_window(family, dict(selector), start, end)


def _error_increases(
    reader: MetricsReader, sli: ErrorSLI, selector: Mapping[str, str], start: float, end: float
) -> dict[str, float]:
    increases: dict[str, float] = {}
    for info in reader.series(sli.family, dict(selector)):
        value = dict(info.labels).get(sli.label)
        if value is None or value in increases:
            continue
        increase = reader.counter_window(sli.family, {**selector, sli.label: value}, start, end)
        if increase is not None:
            increases[value] = increase
    return increases


def _sli(spec: SLOSpec) -> LatencySLI | ErrorSLI:
    """The SLO's indicator as the burn-rate rules judge it (``alerts.rules.sli``)."""
    indicator = spec.indicator
    if isinstance(indicator, LatencyIndicator):
        return LatencySLI(indicator.metric, indicator.threshold_seconds)
    assert isinstance(indicator, ErrorRatioIndicator)
    return ErrorSLI(indicator)


def _ratio_of(spec: SLOSpec, read: object) -> float:
    """The error ratio of one window's read: a merged histogram (latency) or the increases
    per label value (errors); NaN without traffic."""
    sli = _sli(spec)
    if isinstance(sli, LatencySLI):
        return math.nan if read is None else sli.error_ratio(read)[0]  # type: ignore[arg-type]
    return sli.error_ratio(read) if read else math.nan  # type: ignore[arg-type]


def _window_read(
    reader: MetricsReader, spec: SLOSpec, selector: Mapping[str, str], start: float, end: float
) -> object:
    indicator = spec.indicator
    if isinstance(indicator, LatencyIndicator):
        return _latency_window(reader, spec, selector, start, end)
    assert isinstance(indicator, ErrorRatioIndicator)
    return _error_increases(reader, ErrorSLI(indicator), selector, start, end)


def _stepped_reads(
    reader: MetricsReader,
    spec: SLOSpec,
    selector: Mapping[str, str],
    end: float,
    lengths: tuple[float, ...],
) -> dict[float, object] | None:
    """Every window ``[end - length, end]``'s read from one step-series read over the longest
    (as the burn-rate rules read them, ``alerts.rules.evaluate``): each window is the sum of its
    last steps (exact windows add up), so a roll-up minute is read once, not once per window.
    ``None`` when the lengths share no usable step (then read a window each)."""
    step = common_step(lengths)
    if step is None:
        return None
    start = end - max(lengths)
    indicator = spec.indicator
    if isinstance(indicator, LatencyIndicator):
        family = latency_family(spec)
        if family is None:
            return dict.fromkeys(lengths)
        steps = [h for _, h in reader.histogram_series(family, dict(selector), start, end, step)]
        return {n: _last(steps, n, step, merge_histograms) for n in lengths}
    assert isinstance(indicator, ErrorRatioIndicator)
    sli = ErrorSLI(indicator)
    out: dict[float, dict[str, float]] = {n: {} for n in lengths}
    seen: set[str] = set()
    for info in reader.series(sli.family, dict(selector)):
        value = dict(info.labels).get(sli.label)
        if value is None or value in seen:
            continue
        seen.add(value)
        labels = {**selector, sli.label: value}
        steps = [v for _, v in reader.counter_series(sli.family, labels, start, end, step)]
        for n in lengths:
            total = _last(steps, n, step, sum)
            if total is not None:
                out[n][value] = total
    return out  # type: ignore[return-value]


def _edged_reads(
    reader: MetricsReader,
    spec: SLOSpec,
    selector: Mapping[str, str],
    end: float,
    lengths: tuple[float, ...],
) -> dict[float, object] | None:
    """:func:`_stepped_reads` for an ``end`` off the minute (the 1 h range's 30 s steps):
    each window is its whole minutes, a suffix of one stepped read that ends on the minute
    (roll-ups), plus its two raw edges: the part before its first whole minute (a window
    each) and the part after the last (one window, shared). Without the split every step
    boundary would fall off the minute and be read raw."""
    last = math.floor(end / 60) * 60
    if any(n % 60 or n <= 60 for n in lengths):
        return None
    middle = _stepped_reads(reader, spec, selector, last, tuple(n - 60 for n in lengths))
    if middle is None:
        return None
    after = _window_read(reader, spec, selector, last, end)
    out = {}
    for n in lengths:
        first = math.ceil((end - n) / 60) * 60
        before = _window_read(reader, spec, selector, end - n, first)
        out[n] = _combine(spec, (before, middle[n - 60], after))
    return out


def _combine(spec: SLOSpec, reads: tuple[object, ...]) -> object:
    """Adjacent windows' reads added: merged histograms, or increases summed per value."""
    if isinstance(spec.indicator, LatencyIndicator):
        histograms = [r for r in reads if r is not None]
        return merge_histograms(histograms) if histograms else None
    total: dict[str, float] = {}
    for read in reads:
        for value, increase in (read or {}).items():  # type: ignore[attr-defined]
            total[value] = total.get(value, 0.0) + increase
    return total


def _last(values: list, length: float, step: float, add):  # type: ignore[no-untyped-def]
    """``add`` over the last ``length / step`` values that are not None (None: all are)."""
    chosen = [v for v in values[len(values) - round(length / step) :] if v is not None]
    return add(chosen) if chosen else None


def error_ratio(
    reader: MetricsReader, spec: SLOSpec, selector: Mapping[str, str], start: float, end: float
) -> float:
    """The SLO's error ratio over ``[start, end]`` as its burn-rate rule reads it (NaN: no
    traffic, or TPOT, which only request records measure)."""
    return _ratio_of(spec, _window_read(reader, spec, selector, start, end))


def _attainment(spec: SLOSpec, read: object) -> tuple[float, float, float, str]:
    indicator = spec.indicator
    if isinstance(indicator, LatencyIndicator):
        if read is None:
            return math.nan, math.nan, math.nan, "no data"
        estimate: AttainmentEstimate = objective_attainment(read, indicator.threshold_seconds)  # type: ignore[arg-type]
        basis = (
            "exact (threshold is a bucket bound)"
            if estimate.is_exact
            else "estimated from histogram buckets"
        )
        return estimate.attainment, estimate.lower_bound, estimate.upper_bound, basis
    value = 1.0 - _ratio_of(spec, read)
    return value, value, value, "exact (request counters)"


def slo_status(
    reader: MetricsReader,
    spec: SLOSpec,
    base: Mapping[str, str],
    start: float,
    end: float,
    step_seconds: float = 0.0,
) -> SLOStatus:
    """One SLO's figures over ``[start, end]`` and its burn-rate windows ending at ``end``.
    ``step_seconds``: the page's step; its range ends up to a step after the newest data
    (``console.filters.floor_to_step``), so a recorded ratio that new is the latest."""
    selector = slo_selector(spec, base)
    note = ""
    if spec.selector.route is not None:
        note = f"route {spec.selector.route!r} is not a metric label: all routes are counted"
    if isinstance(spec.indicator, LatencyIndicator) and spec.indicator.metric is LatencyMetric.TPOT:
        note = "TPOT has no histogram: see goodput from request records below"
    windows = burn_rate_windows(spec.period_days)
    lengths = {w.long_window_seconds for w in windows} | {w.short_window_seconds for w in windows}
    # NOTE: the windows of days over every bucket series are a large fleet's heaviest read;
    # where the server records them, they are read as the burn-rate rules read them.
    recorded = _recorded_ratios(reader, spec, base, sorted(lengths), end, step_seconds)
    window = None if recorded is None else _recorded_window(reader, spec, selector, start, end, step_seconds)  # fmt: skip
    if recorded is not None:
        ratios = recorded
        read = _window_read(reader, spec, selector, start, end) if window is None else window[0]
        value, low, high, basis = _attainment(spec, read)
        if window is not None:
            basis += f" (the server's record {window[1]}: its 5-minute rates, not the exact counts)"
    else:
        ratios, (value, low, high, basis) = _computed(reader, spec, selector, start, end, lengths)
    checks = evaluate_burn_rates(ratios, spec.target, windows)
    budget = _budget_remaining(reader, spec, selector, end, recorded is not None)
    from_ = "computed" if recorded is None else "recorded"
    return SLOStatus(spec, value, low, high, basis, budget[0], checks, note, from_, *budget[1:])


def _computed(
    reader: MetricsReader,
    spec: SLOSpec,
    selector: Mapping[str, str],
    start: float,
    end: float,
    lengths: set[float],
) -> tuple[dict[float, float], tuple[float, float, float, str]]:
    """Every burn-rate window's error ratio and the range's attainment, from the engines'
    series: one stepped read where the windows share a step, else a read per window."""
    # NOTE: the range's own window joins the stepped read when it is one more suffix of it.
    wanted = tuple(sorted(lengths | {end - start}))
    reads = (
        _stepped_reads(reader, spec, selector, end, wanted)
        if end % 60 == 0
        else _edged_reads(reader, spec, selector, end, wanted)
    )
    if reads is None:
        ratios = {w: error_ratio(reader, spec, selector, end - w, end) for w in sorted(lengths)}
        value, low, high, basis = _attainment(
            spec, _window_read(reader, spec, selector, start, end)
        )
    else:
        ratios = {w: _ratio_of(spec, reads[w]) for w in sorted(lengths)}
        value, low, high, basis = _attainment(spec, reads[end - start])
    return ratios, (value, low, high, basis)


def _budget_remaining(
    reader: MetricsReader,
    spec: SLOSpec,
    selector: Mapping[str, str],
    end: float,
    from_records: bool,
) -> tuple[float, str, float]:
    """The error budget left over the SLO's period ending at ``end``, and the record it came
    from with its first sample in the period (``""``, NaN: from the engines' series). ``from_records``: the SLO's windows were
    read from the server's records, so a latency SLO's period is read from the console's
    fleet record where it covers the period's data (``recorded_histogram_window``): a
    30-day window of every replica's buckets is a large fleet's heaviest read."""
    start = end - spec.period_seconds
    family = latency_family(spec)
    read_recorded = getattr(reader, "recorded_histogram_window", None)
    answer = None
    if from_records and family is not None and read_recorded is not None:
        answer = read_recorded(family, dict(selector), start, end)
    if answer is None:
        period_ratio, record, first = error_ratio(reader, spec, selector, start, end), "", math.nan
    else:
        histogram, record, first = answer
        period_ratio = _ratio_of(spec, histogram)
    if math.isnan(period_ratio):
        return math.nan, record, first
    return budget_remaining(period_ratio, 1.0, spec.target), record, first


def _recorded_window(
    reader: MetricsReader,
    spec: SLOSpec,
    selector: Mapping[str, str],
    start: float,
    end: float,
    step_seconds: float,
) -> tuple[object, str] | None:
    """A latency SLO's histogram over ``[start, end]`` from the console's fleet record of its
    family (the reader's ``recorded_histogram_series`` at the page's step, the steps added:
    the steps the page's charts read), and the record's name; ``None`` where the record does
    not answer every step (a step under its 5-minute rate, a range not of whole steps): then
    the engines' series are read."""
    family = latency_family(spec)
    recorded = getattr(reader, "recorded_histogram_series", None)
    steps_in = (end - start) / step_seconds if step_seconds > 0 else 0.0
    if family is None or recorded is None or steps_in < 1 or steps_in != int(steps_in):
        return None
    answer = recorded(family, dict(selector), start, end, step_seconds)
    if answer is None:
        return None
    histograms = [h for _, h in answer[0] if h is not None]
    return (merge_histograms(histograms) if histograms else None), answer[1]


def _recorded_ratios(
    reader: MetricsReader,
    spec: SLOSpec,
    base: Mapping[str, str],
    lengths: list[float],
    end: float,
    step_seconds: float,
) -> dict[float, float] | None:
    """The burn-rate windows' error ratios from the server's SLI records, when the page shows
    the SLO's own selection (a record is the SLO's, not a filter's: with a model, tenant or
    replica chosen the windows are computed) and every window has one; else ``None``."""
    is_errors = isinstance(spec.indicator, ErrorRatioIndicator)
    if base or (latency_family(spec) is None and not is_errors):
        return None
    lookback = max(LOOKBACK_SECONDS, step_seconds)
    return recorded_sli_ratios(spec.name, _sli(spec), lengths, reader, end, lookback)


def latency_thresholds(specs: tuple[SLOSpec, ...]) -> dict[str, list[tuple[str, float]]]:
    """``{family: [(slo name, threshold seconds), ...]}`` of the latency SLOs: the rules
    drawn on percentile charts."""
    out: dict[str, list[tuple[str, float]]] = {}
    for spec in specs:
        family = latency_family(spec)
        if family is not None and isinstance(spec.indicator, LatencyIndicator):
            out.setdefault(family, []).append((spec.name, spec.indicator.threshold_seconds))
    return out
