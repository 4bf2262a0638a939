"""The gatherer over a real SQLite store, populated through ScrapeRecords and request records:
per-replica windows by ``target``, request records joined through a given replica→target map,
exact phase times where a histogram is too coarse, exemplars, knob changes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import Cause
from alerts.triage import (
    KNOB_CHANGES_FAMILY,
    NOT_ENOUGH_DATA,
    Source,
    TimeWindow,
    exact_quantile,
    gather,
    rows_by_key,
    triage,
)
from alerts.triage.evidence import EvidenceKey
from collectors import canonical as c
from collectors.canonical import CanonicalHistogram, CanonicalSample, Exemplar, Kind, RawSample
from collectors.changes import ChangeDetector, DetectorOptions
from collectors.request_records import RequestRecord
from collectors.store import ScrapeRecord, Store, sqlite_url
from collectors.store.protocols import MetricsReader, RequestReader
from slo import ClassicHistogram

BASELINE = TimeWindow(0.0, 60.0)
INCIDENT = TimeWindow(60.0, 120.0)
TTFT_BOUNDS = (0.01, 0.05, 0.1, 0.5, math.inf)
E2E_BOUNDS = (0.3, 0.5, 1.0, 2.5, 5.0, 10.0, math.inf)  # vLLM's start at 0.3 s
SLOW_TRACE = "AB" * 16
MAPPING = {"uuid-a": "a", "uuid-b": "b"}


def _labels(target: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"model": "tiny", "target": target, **extra}.items()))


def _cumulative(bounds, per_interval: list[tuple[float, int]], n: int):
    """Cumulative counts and sum after ``n`` intervals of ``per_interval`` observations."""
    counts = [0.0] * len(bounds)
    total = 0.0
    for value, num in per_interval:
        for i, bound in enumerate(bounds):
            if value <= bound:
                counts[i] += num * n
        total += value * num * n
    return tuple(counts), total


class _Replica:
    """Cumulative state of one replica's exposition, advanced one 10 s interval at a time."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.n = 0
        self.e2e_counts = [0.0] * len(E2E_BOUNDS)
        self.e2e_sum = 0.0
        self.hits = 0.0

    def scrape(
        self,
        t: float,
        *,
        e2e: float,
        waiting: float,
        knob: float | None,
        exemplar=None,
        hits_per_interval: float = 800.0,
    ):
        if t > 0:
            self.n += 1
            for i, bound in enumerate(E2E_BOUNDS):
                if e2e <= bound:
                    self.e2e_counts[i] += 10
            self.e2e_sum += 10 * e2e
            self.hits += hits_per_interval
        ttft_counts, ttft_sum = _cumulative(TTFT_BOUNDS, [(0.03, 10)], self.n)
        lab = _labels(self.target)
        histograms = (
            CanonicalHistogram(
                c.TTFT_SECONDS, lab, TTFT_BOUNDS, ttft_counts, ttft_sum, ttft_counts[-1]
            ),
            CanonicalHistogram(
                c.E2E_SECONDS,
                lab,
                E2E_BOUNDS,
                tuple(self.e2e_counts),
                self.e2e_sum,
                self.e2e_counts[-1],
                exemplars=(exemplar,) if exemplar else (),
            ),
        )
        counter = Kind.COUNTER
        samples = (
            CanonicalSample(c.REQUESTS_TOTAL, lab, 10.0 * self.n, counter),
            CanonicalSample(c.PREEMPTIONS_TOTAL, lab, 0.0, counter),
            CanonicalSample(c.PREFIX_CACHE_QUERIES_TOTAL, lab, 1000.0 * self.n, counter),
            CanonicalSample(c.PREFIX_CACHE_HITS_TOTAL, lab, self.hits, counter),
            CanonicalSample(
                c.HTTP_RESPONSES_TOTAL, _labels(self.target, code="200"), 10.0 * self.n, counter
            ),
            CanonicalSample(c.REQUESTS_WAITING, lab, waiting, Kind.GAUGE),
            CanonicalSample(c.KV_CACHE_USAGE, lab, 0.3, Kind.GAUGE),
        )
        raw = ()
        if knob is not None:
            knob_labels = _labels(self.target, knob="step_delay_seconds", engine="0")
            raw = (RawSample("tailwatch:knob_changes_total", knob_labels, knob, "counter"),)
        return ScrapeRecord(self.target, t, samples, histograms, raw)


def _record(i: int, replica: str, arrival: float, e2e: float, trace_id: str | None = None):
    return RequestRecord(
        request_id=f"cmpl-{replica}-{i}",
        trace_id=trace_id or f"{i:08x}{replica:0>24}"[-32:],
        span_id=f"{i:016x}",
        service="tailwatch-engine",
        tenant=None,
        model="tiny",
        replica=replica,
        arrival=arrival,
        queue_seconds=0.002,
        ttft_seconds=0.03,
        prefill_seconds=0.02,
        decode_seconds=e2e - 0.03,
        tpot_seconds=(e2e - 0.03) / 15,
        e2e_seconds=e2e,
        input_tokens=48,
        output_tokens=16,
        cached_tokens=32,
        preemptions=0,
        finish_reason="length",
        is_error=False,
    )


@pytest.fixture
def store(tmp_path):
    s = Store(sqlite_url(tmp_path / "tw.db"))
    yield s
    s.close()


def _slow_replica_store(store: Store) -> None:
    """Replica ``b`` slows down at t=60 (e2e 0.2 s → 4 s) after a knob change at t=50."""
    a, b = _Replica("a"), _Replica("b")
    records = []
    for t in range(0, 130, 10):
        slow = t > 60
        exemplar = (
            Exemplar(5.0, 4.2, (("trace_id", SLOW_TRACE.lower()),), 80.0) if t == 80 else None
        )
        store.write_scrapes(
            [
                a.scrape(float(t), e2e=0.2, waiting=0.0, knob=None),
                b.scrape(
                    float(t),
                    e2e=4.0 if slow else 0.2,
                    waiting=5.0 if slow else 0.0,
                    knob=1.0 if t >= 50 else None,
                    exemplar=exemplar,
                ),
            ]
        )
    for i in range(6):
        records += [_record(i, "uuid-a", 5.0 + i, 0.2), _record(10 + i, "uuid-a", 65.0 + i, 0.2)]
        records += [_record(20 + i, "uuid-b", 5.0 + i, 0.2)]
        trace = SLOW_TRACE if i == 0 else None
        records += [_record(30 + i, "uuid-b", 65.0 + i, 4.2 if i == 0 else 4.0, trace)]
    records.append(_record(99, "uuid-unknown", 70.0, 0.2))
    assert store.write_requests(records) == len(records)


def test_the_store_is_read_through_the_protocols(store: Store) -> None:
    assert isinstance(store, MetricsReader) and isinstance(store, RequestReader)


def test_a_slow_replica_is_found_with_exact_times_where_buckets_are_too_coarse(store) -> None:
    _slow_replica_store(store)
    data = gather(store, store, INCIDENT, BASELINE, replica_targets=MAPPING)
    assert sorted(data.replicas) == ["a", "b"]
    a_e2e = data.replicas["a"].incident.e2e_p50_seconds
    # every e2e of replica a is in the first bucket [0, 0.3]: the records' exact value is used
    assert a_e2e.source is Source.REQUEST_RECORDS and a_e2e.value == 0.2
    assert "histogram too coarse (rank in bucket [0, 0.3])" in a_e2e.note
    b_e2e = data.replicas["b"].incident.e2e_p50_seconds
    assert b_e2e.source is Source.HISTOGRAM and 2.5 < b_e2e.value <= 5.0
    assert data.replicas["b"].incident.waiting_mean.value == 5.0
    queue = data.fleet.incident.queue_mean_seconds
    assert queue.source is Source.REQUEST_RECORDS and queue.value == pytest.approx(0.002)
    assert data.fleet.incident.arrival_rate_per_second.note == (
        "from HTTP responses and the change in requests running + waiting (+5); "
        "1 of 13 request records name no known target"
    )

    # the collector's detector found the knob change in the store's scrapes; triage reads it
    ChangeDetector(store, store, options=DetectorOptions(margin_seconds=100.0)).detect(130.0)
    data = gather(store, store, INCIDENT, BASELINE, replica_targets=MAPPING, changes=store)
    report = triage(data)
    top = report.hypotheses[0]
    assert (top.cause, top.scope, top.score) == (Cause.SLOW_REPLICA, "b", 1.0)
    skew = rows_by_key(report.evidence)[EvidenceKey.E2E_P50_SKEW]
    assert skew.scope == "b" and skew.incident == pytest.approx(b_e2e.value / 0.2)
    assert report.recommendation.target == "b"
    (recent,) = report.recommendation.recent_changes
    change = recent.change
    assert (change.targets, change.subjects, change.num_changes, change.first_seconds) == (
        ("b",),
        ("step_delay_seconds",),
        1,
        50.0,
    )
    slowest = report.slowest_requests[0]
    assert slowest.trace_id == SLOW_TRACE.lower()
    assert slowest.sources == {Source.EXEMPLARS, Source.REQUEST_RECORDS}
    assert (slowest.request_id, slowest.target, slowest.e2e_seconds) == ("cmpl-uuid-b-30", "b", 4.2)
    assert len({r.trace_id for r in report.slowest_requests}) == len(report.slowest_requests)


def test_replicas_added_cold_under_round_robin_read_as_prefix_scatter(store) -> None:
    """c and d join at t=60 with cold caches (hit rate 0.33); a and b keep theirs (0.73)."""
    replicas = {name: _Replica(name) for name in "abcd"}
    for t in range(0, 130, 10):
        scrapes = []
        for name, replica in replicas.items():
            if name in "cd" and t < 60:
                continue  # not routed to (nor scraped) before the scale-out
            hits = 730.0 if name in "ab" else 330.0
            scrapes.append(
                replica.scrape(float(t), e2e=0.2, waiting=0.0, knob=None, hits_per_interval=hits)
            )
        store.write_scrapes(scrapes)
    report = triage(gather(store, store, INCIDENT, BASELINE))
    rows = rows_by_key(report.evidence)
    assert rows[EvidenceKey.PREFIX_HIT_RATE].baseline == pytest.approx(0.73)
    assert rows[EvidenceKey.PREFIX_HIT_RATE].incident == pytest.approx(0.53)
    assert rows[EvidenceKey.STEADY_HIT_RATE].incident == pytest.approx(0.73)
    assert rows[EvidenceKey.NEW_REPLICA_QUERY_SHARE].note == "new since baseline: c, d"
    assert rows[EvidenceKey.NEW_REPLICA_QUERY_SHARE].incident == pytest.approx(0.5)
    top, runner_up = report.hypotheses[:2]
    assert (top.cause, top.score) == (Cause.PREFIX_SCATTER, pytest.approx(1.0))
    assert runner_up.score < 0.3


def test_without_request_records_the_histograms_are_used_and_say_they_are_coarse(store) -> None:
    _slow_replica_store(store)
    data = gather(store, None, INCIDENT, BASELINE)
    a_e2e = data.replicas["a"].incident.e2e_p50_seconds
    assert a_e2e.source is Source.HISTOGRAM and "coarse" in a_e2e.note
    assert data.fleet.incident.queue_mean_seconds.source is Source.NONE  # no queue histogram
    assert data.fleet.incident.arrival_rate_per_second.note == (
        "from HTTP responses and the change in requests running + waiting (+5)"
    )
    assert triage(data).hypotheses[0].cause is Cause.SLOW_REPLICA


def test_a_queue_building_up_counts_as_arrivals_not_only_the_completions(store) -> None:
    """Saturated: 10 responses per 10 s before and during the incident, while during it 30
    more requests per 10 s queue up. Completions alone read no growth; arrivals are the
    responses plus the queue's growth (0 -> 180 waiting)."""
    a = _Replica("a")
    store.write_scrapes(
        [
            a.scrape(float(t), e2e=0.2, waiting=max(0.0, 3.0 * (t - 60)), knob=None)
            for t in range(0, 130, 10)
        ]
    )
    data = gather(store, None, INCIDENT, BASELINE)
    incident = data.fleet.incident.arrival_rate_per_second
    assert data.fleet.baseline.arrival_rate_per_second.value == pytest.approx(1.0)
    assert incident.value == pytest.approx((60 + 180) / 60)
    assert incident.note == (
        "from HTTP responses and the change in requests running + waiting (+180)"
    )
    rows = rows_by_key(triage(data).evidence)
    assert rows[EvidenceKey.ARRIVAL_RATE].change == pytest.approx(4.0)


def test_arrivals_are_over_the_part_of_the_window_that_has_data(store) -> None:
    """A fleet first scraped 30 s into the baseline window (a new deployment, a drill's
    start-up): its 10 responses per 10 s are 1/s over those 30 s, not 0.5/s over all 60."""
    a = _Replica("a")
    store.write_scrapes(
        [a.scrape(float(t), e2e=0.2, waiting=0.0, knob=None) for t in range(30, 130, 10)]
    )
    baseline = gather(store, None, INCIDENT, BASELINE).fleet.baseline.arrival_rate_per_second
    assert baseline.value == pytest.approx(30 / 30)
    assert "over the 30 s since its first reading (" in baseline.note


def test_records_of_unmapped_replicas_count_for_the_fleet_only(store) -> None:
    _slow_replica_store(store)
    data = gather(store, store, INCIDENT, BASELINE, replica_targets={})
    assert data.replicas["a"].incident.e2e_p50_seconds.source is Source.HISTOGRAM
    assert data.fleet.incident.queue_mean_seconds.source is Source.REQUEST_RECORDS


def test_changes_are_read_from_the_baseline_or_the_onset_span_on(store) -> None:
    _slow_replica_store(store)
    ChangeDetector(store, store, options=DetectorOptions(margin_seconds=100.0)).detect(130.0)
    assert [e.at_seconds for e in store.change_events(0, 200)] == [50.0]
    later, before = TimeWindow(100.0, 120.0), TimeWindow(90.0, 100.0)
    assert gather(store, store, later, before, changes=store).changes == ()
    assert gather(store, store, later, BASELINE, changes=store).changes != ()
    assert gather(store, store, later, BASELINE).changes == ()  # no change reader: none
    assert store.samples(KNOB_CHANGES_FAMILY, None, 0, 200)  # the series is there


def test_an_empty_store_gives_not_enough_data(store) -> None:
    report = triage(gather(store, store, INCIDENT, BASELINE))
    assert report.verdict == NOT_ENOUGH_DATA


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([3.0, 1.0, 2.0], 0.5, 2.0),
        ([1.0, 2.0, 3.0, 4.0], 0.5, 2.0),
        ([5.0], 0.99, 5.0),
        ([], 0.5, math.nan),
    ],
)
def test_exact_quantile_is_nearest_rank(values, q, expected) -> None:
    got = exact_quantile(values, q)
    assert got == expected or (math.isnan(got) and math.isnan(expected))


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(min_value=0, max_value=100), min_size=1, max_size=50),
    st.floats(min_value=0.01, max_value=1.0),
)
def test_exact_quantile_lies_in_the_bucket_the_histogram_names(values, q) -> None:
    """The records' value is the one the histogram's quantile interval brackets."""
    result = ClassicHistogram.from_observations(values, (0.3, 1.0, 5.0, 20.0)).quantile(q)
    assert result.lower_bound <= exact_quantile(values, q) <= result.upper_bound


ITL_BOUNDS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, math.inf)
PROMPT_BOUNDS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, math.inf)


def _histogram(family, bounds, observations, target="a"):
    """A cumulative histogram of ``observations`` (value, count) pairs."""
    counts = tuple(float(sum(n for v, n in observations if v <= b)) for b in bounds)
    total = float(sum(v * n for v, n in observations))
    return CanonicalHistogram(family, _labels(target), bounds, counts, total, counts[-1])


def test_long_prompts_next_to_chat_read_as_prefill_interference(store) -> None:
    """From t=60 a batch tenant adds 480-token prompts; 3% of ITL gaps stall to 0.25 s."""
    itl, prompts = [], []
    for t in range(0, 130, 10):
        if t > 0:
            itl.append((0.06, 400))
            prompts.append((32, 40))
            if t > 60:
                itl.append((0.25, 12))
                prompts.append((480, 30))
        lab = _labels("a")
        store.write_scrape(
            ScrapeRecord(
                "a",
                float(t),
                (CanonicalSample(c.REQUESTS_TOTAL, lab, 4.0 * t, Kind.COUNTER),),
                (
                    _histogram(c.ITL_SECONDS, ITL_BOUNDS, itl),
                    _histogram(c.PROMPT_TOKENS, PROMPT_BOUNDS, prompts),
                ),
            )
        )
    report = triage(gather(store, None, INCIDENT, BASELINE))
    rows = rows_by_key(report.evidence)
    itl_row, prompt_row = rows[EvidenceKey.ITL_P99], rows[EvidenceKey.PROMPT_P95]
    assert itl_row.source is Source.HISTOGRAM and 0.2 < itl_row.incident <= 0.3
    assert 0.05 < itl_row.baseline <= 0.075
    assert prompt_row.source is Source.HISTOGRAM and 200 < prompt_row.incident <= 500
    assert 20 < prompt_row.baseline <= 50
    top = report.hypotheses[0]
    assert (top.cause, top.score) == (Cause.PREFILL_INTERFERENCE, 1.0)
    assert report.recommendation.action.knob == "max_num_batched_tokens"
