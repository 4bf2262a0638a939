"""The console's pure frame builders on hand-made data (``FakeMetricsReader``, plain span
records): heatmap cells, gauge sums, percentile bounds, the waterfall of one request, and the
SLO page's burn-rate table against hand-computed rows."""

from __future__ import annotations

import math

import pytest

from collectors import canonical as c
from collectors.request_records import SpanEvent, SpanRecord
from collectors.store import Store, sqlite_url
from collectors.store.fake import FakeMetricsReader
from collectors.store.records import ScrapeRecord
from console.metric_frames import gauge_frame, heatmap_frame, percentile_frame
from console.request_frames import waterfall
from console.slo_frames import error_ratio, slo_status
from slo import (
    ErrorRatioIndicator,
    ErrorSource,
    LatencyIndicator,
    LatencyMetric,
    Selector,
    SLOSpec,
)

BOUNDS = (0.1, 0.5, 1.0, math.inf)
T0 = 1_800_000_000.0


def histogram(target: str, counts: tuple[float, ...]) -> c.CanonicalHistogram:
    return c.CanonicalHistogram(
        c.TTFT_SECONDS, c.labels_key({"target": target, "model": "m"}), BOUNDS, counts,
        None, counts[-1],
    )  # fmt: skip


def gauge(target: str, value: float) -> c.CanonicalSample:
    return c.CanonicalSample(
        c.REQUESTS_RUNNING, c.labels_key({"target": target, "model": "m"}), value, c.Kind.GAUGE
    )


def reader(bad_share: float = 0.0, minutes: int = 3 * 24 * 60) -> FakeMetricsReader:
    """Two targets scraped every minute; each minute adds 100 TTFT observations per target,
    ``bad_share`` of them above 0.5 s (in the (0.5, 1] bucket)."""
    scrapes = []
    for i in range(0, minutes + 1, 60 if minutes > 60 else 1):
        n = 100.0 * i
        bad = n * bad_share
        counts = (n - bad, n - bad, n, n)
        for target in ("a", "b"):
            scrapes.append(
                ScrapeRecord(target, T0 + 60 * i, samples=(gauge(target, i % 3),),
                             histograms=(histogram(target, counts),))
            )  # fmt: skip
    return FakeMetricsReader(scrapes)


def test_heatmap_cells_are_the_bucket_differences_per_step():
    fake = reader(bad_share=0.25, minutes=5)
    frame = heatmap_frame(fake, c.TTFT_SECONDS, {}, T0, T0 + 300, 60)
    # per minute and target 100 observations: 75 at <= 0.1 and 25 in (0.5, 1]; two targets
    assert set(frame["bucket"]) == {"≤ 0.1", "≤ 1"}
    assert frame.groupby("bucket")["count"].sum().to_dict() == {"≤ 0.1": 750.0, "≤ 1": 250.0}


def test_gauges_are_averaged_per_step_then_summed_across_targets():
    fake = reader(minutes=5)
    frame = gauge_frame(fake, c.REQUESTS_RUNNING, {}, T0, T0 + 300, 60)
    # minute i reads i % 3 on both targets; step t holds the readings in (t - 60, t], so the
    # reading at the window's start belongs to the step before it
    assert list(frame["value"]) == [2.0 * (i % 3) for i in range(1, 6)]


class _RawOnly:
    """A store seen without its gauge roll-ups (``gauge_minutes``): raw readings only."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def samples(self, *args):  # type: ignore[no-untyped-def]
        return self._store.samples(*args)


@pytest.mark.parametrize(("step", "end_minutes"), [(60, 20), (300, 20), (300, 25), (30, 20)])
def test_gauge_steps_from_rollups_equal_the_raw_readings(tmp_path, step, end_minutes):
    store = Store(sqlite_url(tmp_path / "gauges.db"))
    try:
        for k in range(4 * 22 + 1):  # 22 minutes at 15 s, readings on the minute edges too
            for target in ("a", "b"):
                value = float((k * 7 + (target == "b") * 3) % 11)
                store.write_scrape(ScrapeRecord(target, T0 + 15 * k, samples=(gauge(target, value),)))  # fmt: skip
        for later in (0.0, 90.0, 150.0):
            store.maintain(T0 + 22 * 60 + later)
        assert store.rollup_coverage() >= T0 + 20 * 60  # the roll-up path is the one tested
        end = T0 + end_minutes * 60
        for across in ("sum", "max"):
            rolled = gauge_frame(store, c.REQUESTS_RUNNING, {}, T0, end, step, across=across)
            raw = gauge_frame(_RawOnly(store), c.REQUESTS_RUNNING, {}, T0, end, step, across=across)  # fmt: skip
            assert len(rolled) == len(raw) > 0
            assert list(rolled["ts"]) == list(raw["ts"])
            assert rolled["value"].tolist() == pytest.approx(raw["value"].tolist(), rel=1e-12)
    finally:
        store.close()


def test_percentiles_lie_in_their_bucket_bounds():
    fake = reader(bad_share=0.25, minutes=5)
    frame = percentile_frame(fake, c.TTFT_SECONDS, {}, T0, T0 + 300, 60)
    assert len(frame) == 15  # 5 steps x p50/p95/p99
    assert (frame["lower_seconds"] <= frame["seconds"]).all()
    assert (frame["seconds"] <= frame["upper_seconds"]).all()
    assert set(frame.loc[frame["percentile"] == "p99", "upper_seconds"]) == {1.0}


@pytest.mark.parametrize(
    ("bad_share", "firing"),
    [
        (0.0, []),
        # 28 days, target 0.99 (budget 1 %): burn rate 10 fires the rows whose factor is below
        # it (6h: 5.6, 1d: 2.8, 3d: 14/15), not the 1h row (13.44)
        (0.10, ["6h", "1d", "3d"]),
        (0.20, ["1h", "6h", "1d", "3d"]),  # burn rate 20 > 13.44
        (0.005, []),  # burn rate 0.5: below every factor
    ],
)
def test_the_burn_rate_table_fires_the_hand_computed_rows(bad_share, firing):
    spec = SLOSpec(
        "ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), target=0.99, period_days=28
    )
    end = T0 + 3 * 86400
    status = slo_status(reader(bad_share), spec, {}, end - 3600, end)
    names = {3600.0: "1h", 21600.0: "6h", 86400.0: "1d", 259200.0: "3d"}
    assert [names[ch.window.long_window_seconds] for ch in status.checks if ch.is_firing] == firing
    assert status.attainment == pytest.approx(1 - bad_share)
    assert status.basis.startswith("exact")  # 0.5 s is a bucket bound


def span(events: list[SpanEvent]) -> SpanRecord:
    return SpanRecord("a" * 32, "b" * 16, None, "chat m", 2, 10.0, 10.5, {}, tuple(events), 0, "",
                      {}, "tailwatch")  # fmt: skip


def test_the_waterfall_follows_the_span_events():
    bars = waterfall(
        span(
            [
                SpanEvent("tailwatch.request.scheduled", 10.01, {}),
                SpanEvent("tailwatch.request.prefill_chunk", 10.01,
                          {"tailwatch.prefill.chunk_index": 0, "tailwatch.prefill.num_tokens": 32}),
                SpanEvent("tailwatch.request.preempted", 10.05, {"tailwatch.preemption.index": 0}),
                SpanEvent("tailwatch.request.prefill_chunk", 10.10,
                          {"tailwatch.prefill.chunk_index": 1, "tailwatch.prefill.num_tokens": 16}),
                SpanEvent("tailwatch.request.first_token", 10.20, {}),
            ]
        )
    )  # fmt: skip
    got = [(b.phase, round(b.start_ms, 3), round(b.end_ms, 3)) for b in bars]
    assert got == [
        ("queue", 0.0, 10.0),
        ("prefill chunk 0", 10.0, 50.0),
        ("preempted 0", 50.0, 50.0),
        ("prefill chunk 1", 100.0, 200.0),
        ("decode", 200.0, 500.0),
    ]


def test_a_span_without_events_is_one_bar():
    assert [(b.phase, b.end_ms) for b in waterfall(span([]))] == [("chat m", 500.0)]


@pytest.mark.parametrize("offset", [0.0, 30.0, -15.0])
@pytest.mark.parametrize(
    "indicator",
    [LatencyIndicator(LatencyMetric.TTFT, 0.5), ErrorRatioIndicator(ErrorSource.REQUESTS)],
)
def test_stepped_burn_rate_reads_equal_a_read_per_window(store_with_errors, indicator, offset):
    """One step-series read (whole minutes, plus raw edges when the end is off the minute)
    gives every window's error ratio exactly as a window read each does."""
    spec = SLOSpec("s", Selector(), indicator, target=0.99, period_days=30)
    end = T0 + 2 * 3600 + offset
    status = slo_status(store_with_errors, spec, {}, end - 900, end)
    for check in status.checks:
        for length, ratio in (
            (check.window.long_window_seconds, check.long_burn_rate),
            (check.window.short_window_seconds, check.short_burn_rate),
        ):
            expected = error_ratio(store_with_errors, spec, {}, end - length, end)
            assert ratio == pytest.approx(expected / (1 - spec.target), rel=1e-12, nan_ok=True)
    assert status.attainment == pytest.approx(
        1 - error_ratio(store_with_errors, spec, {}, end - 900, end), rel=1e-12
    )


@pytest.fixture(scope="module")
def store_with_errors(tmp_path_factory):
    """Two hours of two targets scraped every 20 s (on and off the minute): TTFT with a
    varying slow share and requests finishing ``stop`` or ``error``; rolled up."""
    store = Store(sqlite_url(tmp_path_factory.mktemp("slo") / "slo.db"))
    for k in range(3 * 2 * 60 + 1):
        for target in ("a", "b"):
            n = 10.0 * k
            bad = float(sum(j % 7 == 0 for j in range(k)))
            labels = c.labels_key({"target": target, "model": "m"})
            samples = tuple(
                c.CanonicalSample(
                    c.REQUESTS_TOTAL, c.labels_key({"target": target, "model": "m",
                    "finished_reason": reason}), value, c.Kind.COUNTER,
                )
                for reason, value in (("stop", n - bad), ("error", bad))
            )  # fmt: skip
            hist = c.CanonicalHistogram(
                c.TTFT_SECONDS, labels, BOUNDS, (n - bad, n - bad, n, n), None, n
            )
            store.write_scrape(ScrapeRecord(target, T0 + 20 * k, samples=samples, histograms=(hist,)))  # fmt: skip
    for later in (0.0, 90.0, 150.0):
        store.maintain(T0 + 2 * 3600 + later)
    yield store
    store.close()


def responses_reader(first: float, last: float, every: float = 1.0) -> FakeMetricsReader:
    """Three replicas answering 2 requests a second each, scraped every ``every`` s from
    ``first`` to ``last``: 6 requests a second in all."""
    scrapes = []
    t = first
    while t <= last + 1e-9:
        for target in ("replica-0", "replica-1", "replica-2"):
            sample = c.CanonicalSample(
                c.HTTP_RESPONSES_TOTAL,
                c.labels_key({"target": target, "model": "m", "code": "200"}),
                2.0 * (t - first),
                c.Kind.COUNTER,
            )
            scrapes.append(ScrapeRecord(target, t, samples=(sample,)))
        t += every
    return FakeMetricsReader(scrapes)


def test_a_rate_is_over_the_part_of_the_range_that_holds_data():
    from console.metric_frames import data_span

    end = T0 + 3600.0
    start, data_start = T0, end - 120.0  # an hour's range holding two minutes of traffic
    fleet = responses_reader(data_start, end - 1.0)
    span = data_span(fleet, c.HTTP_RESPONSES_TOTAL, {}, start, end, 60.0)
    assert span is not None and span.starts_late and not span.ends_early
    assert (span.first_seconds, span.last_seconds) == (data_start, end - 1.0)
    increase = fleet.counter_window(c.HTTP_RESPONSES_TOTAL, {}, start, end)
    assert increase / span.seconds == pytest.approx(6.0)  # not 0.2/s, the hour's average
    # data before the range: the whole range counts
    full = data_span(responses_reader(start - 300.0, end - 1.0, 5.0), c.HTTP_RESPONSES_TOTAL,
                     {}, start, end, 60.0)  # fmt: skip
    # (the first increase runs from the last reading before the start)
    assert full is not None and not full.starts_late and full.first_seconds == start
    # ten minutes of traffic that stopped half an hour ago
    stopped = data_span(responses_reader(end - 2400.0, end - 1800.0),
                        c.HTTP_RESPONSES_TOTAL, {}, start, end, 60.0)  # fmt: skip
    assert stopped is not None and stopped.ends_early and stopped.seconds == pytest.approx(600.0)
    assert data_span(FakeMetricsReader(), c.HTTP_RESPONSES_TOTAL, {}, start, end, 60.0) is None


def test_the_span_text_says_what_a_rate_is_over():
    from console.filters import Filters
    from console.metric_frames import DataSpan
    from console.page_kit import span_text

    f = Filters("1h", 1796530920.0)  # 2026-12-05 04:22:00 UTC
    late = DataSpan(1796530920.0 - 125.0, 1796530915.0, starts_late=True, ends_early=False)
    assert span_text(late, f) == "over the last 2 min (data starts 04:19 UTC)"
    whole = DataSpan(f.start_seconds, 1796530915.0, starts_late=False, ends_early=False)
    assert span_text(whole, f) == "over the last 1h"
    stopped = DataSpan(f.start_seconds + 60, f.start_seconds + 660, starts_late=True,
                       ends_early=True)  # fmt: skip
    assert span_text(stopped, f) == "over 10 min of data (03:23 UTC to 03:33 UTC)"
    assert span_text(None, f) == "over the last 1h: no data"


def test_cost_bills_the_span_the_targets_were_observed_one_gpu_per_replica():
    """Three replicas that ran two minutes of an hour's range: 6 GPU-minutes, not one
    GPU-hour (the bug billed $1,723 per million tokens for that)."""
    from console.cost_frames import billed_time, cost_summary
    from slo import Pricing

    observed = {f"replica-{i}": (T0 + 3480.0 + i, T0 + 3600.0) for i in range(3)}
    billed = billed_time(observed)
    assert billed.gpu_seconds == pytest.approx(3 * 120.0 - 3.0)
    assert billed.observed_seconds == pytest.approx(120.0)
    assert billed.basis == "one GPU per replica (3 replicas)"
    pricing = Pricing("USD", 2.5)
    summary = cost_summary(pricing, billed.num_gpus, billed.observed_seconds, 1000.0, 0.0, None)
    assert summary.billed_cost == pytest.approx(2.5 * billed.gpu_seconds / 3600)
    # NVML's count: replicas sharing one GPU bill that GPU once, over the fleet's span
    shared = billed_time(observed, nvml_gpus=1)
    assert (shared.gpu_seconds, shared.basis) == (
        pytest.approx(120.0),
        "1 GPU NVML reports, shared by 3 replicas",
    )
    # a configured count wins
    assert billed_time(observed, nvml_gpus=1, configured_gpus=8).gpu_seconds == pytest.approx(960)
    assert billed_time({}).gpu_seconds == 0.0


def _recorded(spec: SLOSpec, ratio: float, **relabel: str) -> dict:
    """The SLI records ``tailwatch rules export`` writes for ``spec``, each at ``ratio``."""
    from alerts.rules import LatencySLI
    from alerts.rules.records import slo_record_labels, slo_record_name
    from slo import burn_rate_windows

    indicator = spec.indicator
    sli = LatencySLI(indicator.metric, indicator.threshold_seconds)
    labels = {**slo_record_labels(spec.name, sli), **relabel}
    lengths = {w.long_window_seconds for w in burn_rate_windows(spec.period_days)}
    lengths |= {w.short_window_seconds for w in burn_rate_windows(spec.period_days)}
    return {slo_record_name(spec.name, n): (labels, ratio) for n in lengths}


def test_the_burn_rate_table_reads_the_servers_slo_records_where_it_has_them():
    """With the SLI records on the server (a third of requests too slow), the table is theirs,
    as the burn-rate alerts read it; the attainment over the range is still the engines'
    (no record is of the page's range). A record of another threshold, or a page filtered to
    one model, computes the windows from the engines' series."""
    from tests.alerts.test_burn_rate_records import WithRecords

    spec = SLOSpec(
        "ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), target=0.99, period_days=28
    )
    end = T0 + 3 * 86400
    healthy = reader(0.0)
    burning = WithRecords(healthy, _recorded(spec, 1 / 3))
    status = slo_status(burning, spec, {}, end - 3600, end)
    assert status.windows_from == "recorded"
    assert all(ch.is_firing for ch in status.checks)
    assert [ch.long_burn_rate for ch in status.checks] == [pytest.approx(100 / 3)] * len(
        status.checks
    )
    assert status.attainment == pytest.approx(1.0)  # the engines' own, over the range
    computed = slo_status(healthy, spec, {}, end - 3600, end)
    assert computed.windows_from == "computed" and not computed.firing_severities
    for other in (
        WithRecords(healthy, _recorded(spec, 1 / 3, threshold_seconds="0.25")),
        burning,
    ):
        base = {} if other is not burning else {"model": "m"}
        status = slo_status(other, spec, base, end - 3600, end)
        assert status.windows_from == "computed" and not status.firing_severities


def test_the_attainment_reads_the_console_fleet_record_at_the_pages_step():
    """With the SLI records taken, the range's attainment comes from the fleet record's steps
    at the page's step, where the reader has them (a third of the observations above the
    threshold), and its basis names the record; a step under the record's 5-minute rate
    (the reader answers None) reads the engines' series."""
    from slo import ClassicHistogram
    from tests.alerts.test_burn_rate_records import WithRecords

    spec = SLOSpec(
        "ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), target=0.99, period_days=28
    )
    end = T0 + 3 * 86400
    asked = []

    class Recorded(WithRecords):
        def recorded_histogram_series(self, family, labels, start, stop, step):
            asked.append((family, labels, start, stop, step))
            if step < 300:
                return None
            one = ClassicHistogram(BOUNDS, (20.0, 20.0, 30.0, 30.0))
            times = [start + step * (k + 1) for k in range(round((stop - start) / step))]
            return [(t, one) for t in times], "tailwatch:fleet_ttft_bucket:rate5m"

    burning = Recorded(reader(0.0), _recorded(spec, 1 / 3))
    status = slo_status(burning, spec, {}, end - 86400, end, 900.0)
    assert asked == [(c.TTFT_SECONDS, {}, end - 86400, end, 900.0)]
    assert status.attainment == pytest.approx(2 / 3)
    assert "tailwatch:fleet_ttft_bucket:rate5m" in status.basis
    engines = slo_status(burning, spec, {}, end - 3600, end, 30.0)
    assert engines.attainment == pytest.approx(1.0) and "fleet" not in engines.basis


def test_the_error_budget_reads_the_console_fleet_record_over_the_period_where_it_covers_it():
    """With the SLO's windows recorded, a latency SLO's budget over its period comes from the
    fleet record where the reader answers the period (a third of the observations too slow:
    the budget is spent 33 times over), and says so; where the reader cannot (None), and
    where the windows are computed, it is the engines' own (healthy: the whole budget)."""
    import math

    from slo import ClassicHistogram
    from tests.alerts.test_burn_rate_records import WithRecords

    spec = SLOSpec(
        "ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), target=0.99, period_days=28
    )
    end = T0 + 3 * 86400
    asked = []

    class Recorded(WithRecords):
        covers = True

        def recorded_histogram_window(self, family, labels, start, stop):
            asked.append((family, labels, start, stop))
            one = ClassicHistogram(BOUNDS, (20.0, 20.0, 30.0, 30.0))
            return (one, "tailwatch:fleet_ttft_bucket:rate5m", T0) if self.covers else None

    burning = Recorded(reader(0.0), _recorded(spec, 1 / 3))
    status = slo_status(burning, spec, {}, end - 3600, end)
    assert asked == [(c.TTFT_SECONDS, {}, end - 28 * 86400, end)]
    assert status.budget_remaining == pytest.approx(1 - (1 / 3) / 0.01)
    assert status.budget_record == "tailwatch:fleet_ttft_bucket:rate5m"
    assert status.budget_since_seconds == T0
    burning.covers = False
    engines = slo_status(burning, spec, {}, end - 3600, end)
    assert engines.budget_remaining == pytest.approx(1.0) and engines.budget_record == ""
    assert math.isnan(engines.budget_since_seconds)
    asked.clear()
    computed = slo_status(Recorded(reader(0.0), {}), spec, {}, end - 3600, end)
    assert computed.windows_from == "computed" and asked == []
    assert computed.budget_remaining == pytest.approx(1.0)
