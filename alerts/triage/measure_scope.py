"""One scope's :class:`~alerts.triage.data.Measurements` over one window, read through the
:class:`~collectors.store.MetricsReader` protocol plus that scope's request records.

Which source each figure uses:

- quantiles (TTFT p95, ITL p99, e2e p50, prompt length p95) come from the merged histogram,
  unless its rank falls in the lowest bucket (which starts at 0) or in ``+Inf``: then the
  histogram cannot place the value (vLLM's e2e and queue buckets start at 0.3 s, so every
  ``tiny`` request lands in the first one) and the request records' exact values are used,
  with a note saying so;
- the TTFT split (TTFT, queue and prefill means) comes from the request records when there
  are enough of them: per request, the three phases belong to the same requests, whereas the
  three histograms observe at different moments (queue time when a request is scheduled,
  TTFT at its first token), so a window's queue share can exceed 1; without records, from
  the histograms' ``_sum / _count``;
- counts from counter increases (adapter loads and their seconds too), KV usage (max),
  waiting (mean) and the process's start time (the latest) from gauge readings; grammar
  compile seconds from the compile histogram's sum;
- the batch (requests running, mean) and GPU utilisation (NVML's, mean) from gauge readings,
  the speculative decoding's draft and accepted tokens from counter increases (vLLM), its
  acceptance rate from the gauge's readings (SGLang: mean over series).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from alerts.triage.data import Measure, Measurements, Source, TimeWindow
from collectors import canonical as c
from collectors.request_records import RequestRecord
from collectors.store.protocols import MetricsReader
from collectors.store.records import SemanticsMismatchError
from slo import ClassicHistogram, LayoutMismatchError
from slo.window import format_utc

#: Fewer request records than this are not used in place of a histogram.
MIN_RECORDS = 5
CODE_TOO_MANY_REQUESTS = "429"
FINISHED_LENGTH = "length"  # the finished_reason of a request cut at max_tokens


@dataclass(frozen=True)
class Scope:
    """What to read: a label selector (``None``: the fleet) and the scope's request records."""

    selector: Mapping[str, str] | None
    records: Sequence[RequestRecord]


def exact_quantile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q``-quantile: the smallest value with at least ``q * n`` values at
    or below it (the "exact quantile" that ``slo``'s bucket interval brackets)."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = max(1, math.ceil(q * len(ordered)))
    return ordered[rank - 1]


def _field(records: Sequence[RequestRecord], read: Callable[[RequestRecord], float | None]):
    values = [read(r) for r in records]
    return [float(v) for v in values if v is not None and math.isfinite(v)]


class _Reader:
    def __init__(self, metrics: MetricsReader, scope: Scope, window: TimeWindow) -> None:
        self.metrics, self.scope, self.window = metrics, scope, window
        self._readings: dict[str, dict[tuple, list]] = {}

    def readings(self, family: str) -> dict[tuple, list]:
        """``family``'s readings from one window's length before the window to its end, per
        series (read once: the gauges, the backlog and the coverage all use them)."""
        if family not in self._readings:
            start, end = self.window.start_seconds, self.window.end_seconds
            lookback = start - self.window.duration_seconds
            self._readings[family] = self.metrics.samples(
                family, self.scope.selector, lookback, end
            )
        return self._readings[family]

    def histogram(self, family: str) -> tuple[ClassicHistogram | None, str]:
        try:
            h = self.metrics.histogram_window(
                family, self.scope.selector, self.window.start_seconds, self.window.end_seconds
            )
        except (LayoutMismatchError, SemanticsMismatchError) as error:
            return None, f"{family}: not merged ({error})"
        if h is None or h.total_count <= 0:
            return None, ""
        return h, ""

    def counter(self, family: str, selector: Mapping[str, str] | None = None) -> float | None:
        labels = dict(self.scope.selector or {}) | dict(selector or {})
        try:
            return self.metrics.counter_window(
                family, labels or None, self.window.start_seconds, self.window.end_seconds
            )
        except SemanticsMismatchError:
            return None

    def gauge(self, family: str) -> dict[tuple, list[float]]:
        # NOTE: (start, end], as counter and histogram windows count: a reading at the start
        # belongs to the window before.
        start = self.window.start_seconds
        series = self.readings(family).items()
        return {k: [x for t, x in v if t > start and math.isfinite(x)] for k, v in series}

    def covered_seconds(self, family: str) -> tuple[float, str]:
        """How much of the window ``family``'s readings cover: all of it, unless the scope's
        first reading comes inside the window (nothing was scraped before it: a fleet that
        began then); then from that reading to the end, and that reading's time."""
        start, end = self.window.start_seconds, self.window.end_seconds
        series = self.readings(family).values()
        first = min((t for readings in series for t, _ in readings), default=start)
        if first <= start or first >= end:
            return self.window.duration_seconds, ""
        return end - first, format_utc(first)

    def in_system_change(self) -> float | None:
        """Requests running + waiting at the window's end minus at its start, summed over the
        scope's series (each side the last reading at or before it; a series first read
        inside the window, a replica that joined, starts from 0); ``None`` without readings."""
        start, end = self.window.start_seconds, self.window.end_seconds
        change, seen = 0.0, False
        for family in (c.REQUESTS_RUNNING, c.REQUESTS_WAITING):
            for readings in self.readings(family).values():
                finite = [(t, x) for t, x in readings if math.isfinite(x)]
                inside = [x for t, x in finite if start < t <= end]
                if not inside:
                    continue
                before = [x for t, x in finite if t <= start]
                change += inside[-1] - (before[-1] if before else 0.0)
                seen = True
        return change if seen else None

    def quantile(
        self,
        family: str,
        q: float,
        read: Callable[[RequestRecord], float | None],
        records_what: str = "",
    ) -> Measure:
        h, why = self.histogram(family)
        exact = _field(self.scope.records, read)
        if h is not None:
            result = h.quantile(q)
            coarse = result.in_inf_bucket or result.lower_bound == 0
            if not coarse and math.isfinite(result.value):
                return Measure(result.value, Source.HISTOGRAM)
            bucket = f"[{result.lower_bound:g}, {result.upper_bound:g}]"
            if len(exact) < MIN_RECORDS:
                return Measure(
                    result.value, Source.HISTOGRAM, f"coarse: the rank falls in bucket {bucket}"
                )
            why = f"histogram too coarse (rank in bucket {bucket})"
        if len(exact) < MIN_RECORDS:
            return Measure(note=why)
        note = f"exact values of {len(exact)} request records{records_what}"
        return Measure(
            exact_quantile(exact, q), Source.REQUEST_RECORDS, f"{why}; {note}" if why else note
        )

    def mean(self, family: str, read: Callable[[RequestRecord], float | None]) -> Measure:
        h, why = self.histogram(family)
        if h is not None and h.sum_value is not None:
            return Measure(h.sum_value / h.total_count, Source.HISTOGRAM)
        exact = _field(self.scope.records, read)
        if len(exact) >= MIN_RECORDS:
            return Measure(statistics.fmean(exact), Source.REQUEST_RECORDS)
        return Measure(note=why)


def _ttft_split(reader: _Reader) -> tuple[Measure, Measure, Measure]:
    records = [
        r
        for r in reader.scope.records
        if all(
            v is not None and math.isfinite(v)
            for v in (r.ttft_seconds, r.queue_seconds, r.prefill_seconds)
        )
    ]
    if len(records) >= MIN_RECORDS:
        note = f"the same {len(records)} request records for all three phases"
        return tuple(  # type: ignore[return-value]
            Measure(
                statistics.fmean(getattr(r, name) for r in records), Source.REQUEST_RECORDS, note
            )
            for name in ("ttft_seconds", "queue_seconds", "prefill_seconds")
        )
    return (
        reader.mean(c.TTFT_SECONDS, lambda r: r.ttft_seconds),
        reader.mean(c.QUEUE_SECONDS, lambda r: r.queue_seconds),
        reader.mean(c.PREFILL_SECONDS, lambda r: r.prefill_seconds),
    )


def _counter_measure(value: float | None) -> Measure:
    return Measure() if value is None else Measure(value, Source.COUNTER)


def _arrivals(reader: _Reader, responses: float | None, finished: float | None) -> Measure:
    """Responses (429s included) over the window, plus the requests that arrived but had not
    finished by its end (the change in running + waiting), so that a queue building up under
    overload counts as arrivals, not as the completions a saturated server keeps at capacity;
    finished requests when there is no response counter; the request records only when no
    counter exists (NOTE: records may be sampled by tracing, counters are not)."""
    seconds = reader.window.duration_seconds
    counters = ((responses, "HTTP responses", c.HTTP_RESPONSES_TOTAL),)
    counters += ((finished, "finished requests", c.REQUESTS_TOTAL),)
    for value, what, family in counters:
        if value is not None:
            covered, since = reader.covered_seconds(family)
            notes = [f"from {what}"]
            backlog = reader.in_system_change()
            if backlog is not None:
                notes[0] += f" and the change in requests running + waiting ({backlog:+g})"
                value = max(0.0, value + backlog)
            if covered < seconds:
                notes.append(f"over the {covered:g} s since its first reading ({since})")
            return Measure(value / covered, Source.COUNTER, "; ".join(notes))
    if len(reader.scope.records) >= MIN_RECORDS:
        return Measure(len(reader.scope.records) / seconds, Source.REQUEST_RECORDS)
    return Measure()


def _seconds_spent(reader: _Reader, family: str) -> Measure:
    """A histogram's sum over the window: the seconds its observations took in all."""
    h, why = reader.histogram(family)
    if h is None or h.sum_value is None:
        return Measure(note=why)
    return Measure(h.sum_value, Source.HISTOGRAM)


def measure_scope(metrics: MetricsReader, scope: Scope, window: TimeWindow) -> Measurements:
    """The measurements of ``scope`` over ``window`` (see the module docstring)."""
    reader = _Reader(metrics, scope, window)
    ttft, queue, prefill = _ttft_split(reader)
    finished = reader.counter(c.REQUESTS_TOTAL)
    responses = reader.counter(c.HTTP_RESPONSES_TOTAL)
    rejected = reader.counter(c.HTTP_RESPONSES_TOTAL, {c.LABEL_CODE: CODE_TOO_MANY_REQUESTS})
    kv = [max(v) for v in reader.gauge(c.KV_CACHE_USAGE).values() if v]
    waiting = [statistics.fmean(v) for v in reader.gauge(c.REQUESTS_WAITING).values() if v]
    started = [max(v) for v in reader.gauge(c.ENGINE_START_TIME_SECONDS).values() if v]
    structured = reader.counter(c.STRUCTURED_OUTPUT_FINISHED_TOTAL)
    # NOTE: no "length" series yet (none was cut) is none cut, where structured ones finished
    cut = reader.counter(
        c.STRUCTURED_OUTPUT_FINISHED_TOTAL, {c.LABEL_FINISHED_REASON: FINISHED_LENGTH}
    )
    if cut is None and structured is not None:
        cut = 0.0
    running = [statistics.fmean(v) for v in reader.gauge(c.REQUESTS_RUNNING).values() if v]
    # NOTE: NVML's readings belong to a host's pseudo-target (``nvml:<host>``), not to an
    # engine's, so a replica's scope finds none: the fleet's mean over its GPUs only
    busy = [statistics.fmean(v) for v in reader.gauge(c.GPU_UTILIZATION).values() if v]
    accept = [statistics.fmean(v) for v in reader.gauge(c.SPEC_ACCEPT_RATE).values() if v]
    num_requests = _counter_measure(finished)
    if finished is None and len(scope.records) >= MIN_RECORDS:
        num_requests = Measure(float(len(scope.records)), Source.REQUEST_RECORDS)
    return Measurements(
        num_requests=num_requests,
        arrival_rate_per_second=_arrivals(reader, responses, finished),
        ttft_mean_seconds=ttft,
        queue_mean_seconds=queue,
        prefill_mean_seconds=prefill,
        ttft_p95_seconds=reader.quantile(c.TTFT_SECONDS, 0.95, lambda r: r.ttft_seconds),
        # NOTE: a gateway's series carry no engine's target, so a replica's scope finds
        # none: the fleet's only; request records are the engines' spans, not the clients'
        client_ttft_p95_seconds=reader.quantile(c.CLIENT_TTFT_SECONDS, 0.95, lambda r: None),
        itl_p99_seconds=reader.quantile(
            c.ITL_SECONDS, 0.99, lambda r: r.tpot_seconds, " (their TPOT: a mean per request)"
        ),
        e2e_p50_seconds=reader.quantile(c.E2E_SECONDS, 0.5, lambda r: r.e2e_seconds),
        e2e_mean_seconds=reader.mean(c.E2E_SECONDS, lambda r: r.e2e_seconds),
        prompt_tokens_p95=reader.quantile(c.PROMPT_TOKENS, 0.95, lambda r: r.input_tokens),
        prompt_tokens_mean=reader.mean(c.PROMPT_TOKENS, lambda r: r.input_tokens),
        itl_mean_seconds=reader.mean(c.ITL_SECONDS, lambda r: r.tpot_seconds),
        output_tokens_mean=reader.mean(c.GENERATION_TOKENS, lambda r: r.output_tokens),
        num_preemptions=_counter_measure(reader.counter(c.PREEMPTIONS_TOTAL)),
        kv_usage_max=Measure(max(kv), Source.GAUGE) if kv else Measure(),
        prefix_queries=_counter_measure(reader.counter(c.PREFIX_CACHE_QUERIES_TOTAL)),
        prefix_hits=_counter_measure(reader.counter(c.PREFIX_CACHE_HITS_TOTAL)),
        waiting_mean=Measure(sum(waiting), Source.GAUGE) if waiting else Measure(),
        rejected_share=(
            Measure((rejected or 0.0) / responses, Source.COUNTER)
            if responses is not None and responses > 0
            else Measure()
        ),
        lora_loads=_counter_measure(reader.counter(c.LORA_LOADS_TOTAL)),
        lora_load_seconds=_counter_measure(reader.counter(c.LORA_LOAD_SECONDS_TOTAL)),
        start_time_seconds=Measure(max(started), Source.GAUGE) if started else Measure(),
        structured_finished=_counter_measure(structured),
        structured_length=_counter_measure(cut),
        running_mean=Measure(sum(running), Source.GAUGE) if running else Measure(),
        gpu_utilization_mean=Measure(statistics.fmean(busy), Source.GAUGE) if busy else Measure(),
        spec_draft_tokens=_counter_measure(reader.counter(c.SPEC_DECODE_DRAFT_TOKENS_TOTAL)),
        spec_accepted_tokens=_counter_measure(reader.counter(c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL)),
        spec_accept_rate_mean=(
            Measure(statistics.fmean(accept), Source.GAUGE) if accept else Measure()
        ),
        grammar_compile_seconds=_seconds_spent(reader, c.STRUCTURED_OUTPUT_COMPILE_SECONDS),
    )
