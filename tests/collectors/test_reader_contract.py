"""The reader contract: the same cases on :class:`FakeMetricsReader` / :class:`FakeRequestReader`,
on SQLite and on PostgreSQL, each asserting the same hand-worked figures, so the three agree
(and agree with the rules of ``collectors.store.protocols``). Random scrape sequences are in
``test_reader_contract_property.py``; the request reader's contract in
``test_reader_contract_requests.py``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import replace

import pytest

from collectors.canonical import (
    CanonicalHistogram,
    CanonicalSample,
    Exemplar,
    Flag,
    Kind,
    RawSample,
)
from collectors.store import (
    DuplicateSeriesError,
    LayoutChangeError,
    RetentionPolicy,
    ScrapeRecord,
    SemanticsMismatchError,
    SeriesInfo,
    Store,
    sqlite_url,
)
from collectors.store.fake import FakeMetricsReader
from collectors.store.protocols import MetricsReader
from collectors.store.records import CounterStep, ScrapeStatus, StoredExemplar
from slo import ClassicHistogram, LayoutMismatchError, RangeSemantics, Sample, extrapolated_increase
from tests.collectors.conftest import _empty_postgres

READERS = ("fake", "sqlite", "postgresql")
B = (0.1, 1.0, math.inf)
OTHER = (0.5, math.inf)
TTFT, TOKENS = "ttft_seconds", "prompt_tokens_total"

# -- fixtures -------------------------------------------------------------------------------


def open_reader(kind: str, request: pytest.FixtureRequest, tmp_path, fake: Callable) -> Iterator:
    """Yield ``fake()`` or a :class:`Store` on an empty SQLite / PostgreSQL database."""
    if kind == "fake":
        yield fake()
        return
    if kind == "sqlite":
        url = sqlite_url(tmp_path / "contract.db")
    else:
        url = request.getfixturevalue("postgres_store_url")
        _empty_postgres(url)
    store = Store(url)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture(params=READERS)
def metrics(request: pytest.FixtureRequest, tmp_path) -> Iterator[FakeMetricsReader | Store]:
    """An empty metrics reader that can be written: the fake, SQLite or PostgreSQL."""
    yield from open_reader(request.param, request, tmp_path, FakeMetricsReader)


# -- data -----------------------------------------------------------------------------------

Snap = tuple[float, tuple[float, ...], float, float]  # time, cumulative counts, sum, counter

#: Target a resets at 60 (every bucket and the counter go down); b starts inside [0, ...].
SCRAPES: dict[str, list[Snap]] = {
    "a": [
        (0.0, (1, 2, 3), 1.0, 10.0),
        (30.0, (2, 4, 6), 2.5, 20.0),
        (60.0, (0, 1, 1), 0.5, 5.0),
        (90.0, (1, 2, 3), 1.5, 15.0),
        (120.0, (1, 3, 5), 3.0, 30.0),
    ],
    "b": [
        (10.0, (0, 0, 1), 0.25, 0.0),
        (40.0, (1, 1, 2), 1.0, 4.0),
        (70.0, (1, 2, 4), 2.0, 8.0),
        (100.0, (2, 3, 6), 3.0, 12.0),
        (130.0, (2, 3, 6), 3.0, 12.0),
    ],
}


def _labels(target: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"model": "m", "target": target, **extra}.items()))


def _record(target: str, snap: Snap, bounds=B, flags=frozenset(), exemplars=()) -> ScrapeRecord:
    t, counts, sum_value, value = snap
    labels = _labels(target)
    histogram = CanonicalHistogram(
        TTFT,
        labels,
        bounds,
        tuple(map(float, counts)),
        sum_value,
        counts[-1],
        flags,
        exemplars=exemplars,
    )
    sample = CanonicalSample(TOKENS, labels, value, Kind.COUNTER, flags)
    return ScrapeRecord(target, t, (sample,), (histogram,))


def _write(reader, scrapes: dict[str, list[Snap]] = SCRAPES, **kwargs) -> None:
    records = [_record(t, s, **kwargs) for t, snaps in scrapes.items() for s in snaps]
    assert all(reader.write_scrapes(records))


def _h(counts, sum_value) -> ClassicHistogram:
    return ClassicHistogram(B, tuple(map(float, counts)), sum_value)


# -- metrics: the protocol and the window rule -------------------------------------------------


def test_every_reader_is_a_metrics_reader(metrics) -> None:
    assert isinstance(metrics, MetricsReader)


def test_the_fake_is_built_from_the_records_the_store_takes() -> None:
    records = [_record(t, s) for t, snaps in SCRAPES.items() for s in snaps]
    built, written = FakeMetricsReader(records), FakeMetricsReader()
    assert [written.add(r) for r in reversed(records)] == [True] * len(records)  # any order
    assert built.add(records[0]) is False  # a scrape is kept once per target and timestamp
    for reader in (built, written):
        assert reader.histogram_window(TTFT, None, 0, 120) == _h((4, 8, 13), 7.25)


def test_windows_correct_resets_and_merge_targets(metrics) -> None:
    _write(metrics)
    # a: (1,2,3)+(0,1,1) reset+(1,1,2)+(0,1,2); b from its first snapshot: (1,1,1)+(0,1,2)+(1,1,2)
    assert metrics.histogram_window(TTFT, {"model": "m"}, 0, 120) == _h((4, 8, 13), 7.25)
    assert metrics.histogram_window(TTFT, {"target": "a"}, 0, 120) == _h((2, 5, 8), 4.5)
    # the baseline is the last snapshot at or before the start (30 for a, 40 for b)
    assert metrics.histogram_window(TTFT, None, 45, 100) == _h((2, 4, 7), 3.5)
    assert metrics.counter_window(TOKENS, {"model": "m"}, 0, 120) == 40.0 + 12.0
    assert metrics.counter_window(TOKENS, None, 45, 100) == 15.0 + 8.0
    for use_rollups in (True, False):
        assert metrics.counter_window(TOKENS, None, 0, 60, use_rollups=use_rollups) == 19.0
    # one snapshot in the span is no window; no series at all neither
    assert metrics.histogram_window(TTFT, {"target": "a"}, 120, 200) is None
    assert metrics.counter_window(TOKENS, {"target": "nope"}, 0, 120) is None


def test_per_target_reads_are_each_targets_window(metrics) -> None:
    """What the per-replica rules read: each target's window, in one call."""
    _write(metrics)
    assert metrics.histogram_windows_by_target(TTFT, {"model": "m"}, 0, 120) == {
        "a": _h((2, 5, 8), 4.5),
        "b": _h((2, 3, 5), 2.75),
    }
    assert metrics.counter_windows_by_target(TOKENS, None, 0, 120) == {"a": 40.0, "b": 12.0}
    assert metrics.counter_windows_by_target(TOKENS, {"target": "nope"}, 0, 120) == {}
    assert metrics.histogram_windows_by_target(TTFT, None, 90, 30) == {}
    series = metrics.counter_series_by_target(TOKENS, None, 0, 120, 60)
    for target in ("a", "b"):
        assert series[target] == metrics.counter_series(TOKENS, {"target": target}, 0, 120, 60)
    assert set(series) == {"a", "b"}
    both = metrics.scrapes_by_target(["a", "b", "nobody"], 0, 60)
    assert both == {t: metrics.scrapes(t, 0, 60) for t in ("a", "b", "nobody")}


def test_windows_with_end_at_or_before_start_are_empty(metrics) -> None:
    _write(metrics)
    for start, end in ((60, 60), (90, 30)):
        assert metrics.histogram_window(TTFT, None, start, end) is None
        assert metrics.counter_window(TOKENS, None, start, end, semantics="prometheus-3") is None
    assert metrics.counter_window(TOKENS, None, math.nan, 60) is None  # NaN > x is false
    with pytest.raises(ValueError, match="finite"):  # a Prometheus range needs a place in time
        metrics.counter_window(TOKENS, None, math.nan, 60, semantics="prometheus-3")
    assert metrics.histogram_series(TTFT, None, 60, 30, 15) == []
    assert metrics.counter_series(TOKENS, None, 60, 60, 15, semantics="prometheus-2") == []


def test_step_series_keep_empty_and_zero_steps(metrics) -> None:
    _write(metrics)
    steps = metrics.histogram_series(TTFT, {"model": "m"}, 0, 240, 60)
    assert [tuple(s) for s in steps] == [
        (60, _h((2, 4, 5), 2.75)),
        (120, _h((2, 4, 8), 4.5)),
        (180, _h((0, 0, 0), 0.0)),  # b's last pair: a step with zero observations
        (240, None),  # no pair at all
    ]
    assert metrics.counter_series(TOKENS, {"model": "m"}, 0, 240, 60) == [
        CounterStep(60, 19.0),
        CounterStep(120, 33.0),
        CounterStep(180, 0.0),
        CounterStep(240, None),
    ]
    # NOTE: unpacked, not read by name: the store on main still returns plain tuples here
    steps = metrics.quantile_series(TTFT, {"model": "m"}, 0, 240, (0.5, 0.9), 60)
    times, quantiles = zip(*steps, strict=True)
    assert times == (60, 120, 180, 240)
    want = _h((2, 4, 5), 2.75)
    assert quantiles[0] == (want.quantile(0.5), want.quantile(0.9))
    assert all(math.isnan(q.value) for q in quantiles[2])  # zero observations
    assert quantiles[3] is None


@pytest.mark.parametrize("semantics", ["prometheus-2", "prometheus-3"])
def test_prometheus_semantics_answer_what_prometheus_would(metrics, semantics) -> None:
    _write(metrics)
    rule = RangeSemantics(semantics)

    def want(target: str, end: float, width: float) -> float | None:
        readings = [Sample(t, v) for t, *_, v in SCRAPES[target]]
        return extrapolated_increase(readings, end, width, rule)

    # 2.x takes the sample at the range's start (60), 3.x does not and extrapolates
    assert (
        metrics.counter_window(TOKENS, {"target": "a"}, 60, 120, semantics=semantics)
        == {
            "prometheus-2": 25.0,
            "prometheus-3": 30.0,
        }[semantics]
    )
    both = metrics.counter_window(TOKENS, None, 15, 115, semantics=semantics)
    assert both == want("a", 115, 100) + want("b", 115, 100)
    series = metrics.counter_series(TOKENS, {"target": "b"}, 0, 150, 50, semantics=semantics)
    assert series == [CounterStep(t, want("b", t, 50)) for t in (50, 100, 150)]
    window = metrics.histogram_window(TTFT, {"target": "b"}, 40, 100, semantics=semantics)
    inf_bucket = [Sample(t, c[-1]) for t, c, *_ in SCRAPES["b"]]
    assert window.cumulative_counts[-1] == extrapolated_increase(inf_bucket, 100, 60, rule)


def test_argument_errors_are_the_same(metrics) -> None:
    _write(metrics)
    with pytest.raises(ValueError, match="semantics: expected 'exact'"):
        metrics.histogram_window(TTFT, None, 0, 60, semantics="prometheus-4")
    with pytest.raises(ValueError, match="needs a finite start and end"):
        metrics.counter_window(TOKENS, None, 0, math.inf, semantics="prometheus-2")
    with pytest.raises(ValueError, match="step_seconds"):
        metrics.counter_series(TOKENS, None, 0, 60, 0)
    with pytest.raises(ValueError, match="step_seconds"):
        metrics.histogram_series(TTFT, None, 0, 60, math.nan)
    with pytest.raises(ValueError, match="at most 200000"):
        metrics.counter_series(TOKENS, None, 0, 1e9, 1)
    with pytest.raises(ValueError, match="finite"):
        metrics.quantile_series(TTFT, None, 0, math.inf)


def test_an_exact_window_takes_infinite_edges(metrics) -> None:
    _write(metrics)
    everything = _h((4, 8, 13), 7.25)  # every pair of both targets, b's last one empty
    assert (
        metrics.histogram_window(TTFT, None, -math.inf, math.inf, use_rollups=False) == everything
    )
    assert metrics.counter_window(TOKENS, None, -math.inf, 120, use_rollups=False) == 52.0
    assert metrics.counter_window(TOKENS, None, 0, math.inf) == 52.0


@pytest.fixture(params=("sqlite", "postgresql"))
def sql_metrics(request: pytest.FixtureRequest, tmp_path) -> Iterator[Store]:
    yield from open_reader(request.param, request, tmp_path, FakeMetricsReader)


def test_the_store_takes_infinite_edges_with_rollups(sql_metrics: Store) -> None:
    # NOTE: the roll-up planner once took math.ceil(-inf / 60) (OverflowError) and, once every
    # scrape had settled, walked minute by minute up to +inf (it never returned).
    _write(sql_metrics)
    assert sql_metrics.counter_window(TOKENS, None, -math.inf, 120) == 52.0
    policy = RetentionPolicy(rollup_lag_seconds=0, settle_seconds=0)
    for _ in range(5):  # a pass settles what the previous one rolled up
        sql_metrics.maintain(10_000.0, policy)
    assert sql_metrics.rollup_coverage() == math.inf
    assert sql_metrics.counter_window(TOKENS, None, -math.inf, math.inf) == 52.0
    assert sql_metrics.counter_window(TOKENS, None, 0, math.inf) == 52.0
    everything = _h((4, 8, 13), 7.25)
    assert sql_metrics.histogram_window(TTFT, None, -math.inf, math.inf) == everything


# -- metrics: what may not be merged ---------------------------------------------------------


def test_different_layouts_are_refused_naming_both_targets(metrics) -> None:
    _write(metrics)
    _write(metrics, {"c": [(15.0, (1, 2), 0.5, 0.0), (45.0, (2, 4), 1.0, 1.0)]}, bounds=OTHER)
    for semantics in ("exact", "prometheus-2", "prometheus-3"):
        with pytest.raises(LayoutMismatchError) as caught:
            metrics.histogram_window(TTFT, {"model": "m"}, 0, 60, semantics=semantics)
        assert not isinstance(caught.value, LayoutChangeError)
        assert "'a'" in str(caught.value) and "'c'" in str(caught.value)
        assert (caught.value.left, caught.value.right) == (B, OTHER)
    with pytest.raises(LayoutMismatchError, match=r"target 'a'.*target 'c'"):
        metrics.histogram_series(TTFT, {"model": "m"}, 0, 120, 60)
    # apart, each is fine; and counters do not care about buckets
    assert metrics.histogram_window(TTFT, {"target": "c"}, 0, 60).upper_bounds == OTHER
    assert metrics.counter_window(TOKENS, {"model": "m"}, 0, 60) == 19.0 + 1.0


def test_a_layout_change_inside_the_window_names_target_and_times(metrics) -> None:
    old = [(0.0, (1, 2, 3), 1.0, 0.0), (30.0, (2, 4, 6), 2.0, 1.0)]
    _write(metrics, {"d": old})
    _write(metrics, {"d": [(60.0, (1, 1), 0.5, 2.0), (90.0, (2, 3), 1.5, 3.0)]}, bounds=OTHER)
    for semantics in ("exact", "prometheus-2", "prometheus-3"):
        with pytest.raises(LayoutChangeError) as caught:
            metrics.histogram_window(TTFT, None, 0, 90, semantics=semantics)
        error = caught.value
        assert (error.target, error.family) == ("d", TTFT)
        assert (error.last_old_seconds, error.first_new_seconds) == (30.0, 60.0)
        assert (error.left, error.right) == (B, OTHER)
        assert "'d'" in str(error) and "1970-01-01T00:01:00.000Z" in str(error)
    with pytest.raises(LayoutChangeError, match="'d'"):
        metrics.histogram_series(TTFT, None, 0, 120, 60)
    # from the first snapshot of the new layout on, the window reads that layout only
    new = ClassicHistogram(OTHER, (1.0, 2.0), 1.0)
    assert metrics.histogram_window(TTFT, None, 60, 90) == new
    assert (
        metrics.histogram_window(TTFT, None, 60, 90, semantics="prometheus-2").upper_bounds == OTHER
    )
    assert (
        metrics.histogram_window(TTFT, None, 59, 90, semantics="prometheus-3").upper_bounds == OTHER
    )
    assert metrics.histogram_window(TTFT, None, 0, 30) == _h((1, 2, 3), 1.0)


def test_different_semantic_flags_are_refused_other_flags_merge(metrics) -> None:
    _write(metrics, {"a": SCRAPES["a"]})
    _write(metrics, {"b": SCRAPES["b"]}, flags=frozenset({Flag.TOKEN_WEIGHTED, Flag.RENAMED}))
    for read in (
        lambda: metrics.histogram_window(TTFT, {"model": "m"}, 0, 120),
        lambda: metrics.counter_window(TOKENS, None, 0, 120, semantics="prometheus-3"),
        lambda: metrics.counter_series(TOKENS, None, 0, 120, 60),
        lambda: metrics.quantile_series(TTFT, None, 0, 120),
    ):
        with pytest.raises(SemanticsMismatchError, match=r"\['\(none\)', 'token_weighted'\]"):
            read()
    # only semantic flags are stored; a read that merges nothing does not care
    assert {info.flags for info in metrics.series(TOKENS)} == {
        frozenset(),
        frozenset({"token_weighted"}),
    }
    assert metrics.counter_window(TOKENS, {"target": "b"}, 0, 120) == 12.0
    # a flag that only records where a value came from is the same series as without it
    renamed = replace(
        _record("a", (150.0, (1, 3, 6), 3.5, 31.0)),
        samples=(
            CanonicalSample(TOKENS, _labels("a"), 31.0, Kind.COUNTER, frozenset({Flag.RENAMED})),
        ),
    )
    assert metrics.write_scrape(renamed)
    assert metrics.counter_window(TOKENS, {"target": "a"}, 120, 150) == 1.0


def test_a_breakdown_label_must_be_named_to_select_its_series(metrics) -> None:
    fleet = CanonicalSample("requests_total", _labels("a"), 10.0, Kind.COUNTER)
    acme = CanonicalSample("requests_total", _labels("a", tenant="acme"), 4.0, Kind.COUNTER)
    other = CanonicalSample("requests_total", _labels("a", tenant="zeta"), 6.0, Kind.COUNTER)
    later = tuple(replace(s, value=s.value * 2) for s in (fleet, acme, other))
    first, second = ScrapeRecord("a", 0.0, (fleet, acme, other)), ScrapeRecord("a", 60.0, later)
    metrics.write_scrapes([first, second])
    assert [s.labels for s in metrics.series("requests_total", {"model": "m"})] == [_labels("a")]
    assert metrics.counter_window("requests_total", {"model": "m"}, 0, 60) == 10.0  # not 20
    chosen = metrics.series("requests_total", {"tenant": "acme"})
    assert chosen == [
        SeriesInfo("requests_total", _labels("a", tenant="acme"), "counter", frozenset())
    ]
    assert metrics.counter_window("requests_total", {"tenant": "zeta"}, 0, 60) == 6.0
    assert metrics.series("requests_total", {"tenant": "nobody"}) == []


# -- metrics: raw reads ------------------------------------------------------------------------


def test_samples_and_snapshots_in_closed_ranges(metrics) -> None:
    _write(metrics)
    assert metrics.write_scrape(
        _record("a", (150.0, (1, 3, 5), 3.0, math.nan))
    )  # a NaN reading is no reading
    raw = ScrapeRecord(
        "a", 160.0, raw=(RawSample("odd_total", (("target", "a"),), 2.0, "counter"),)
    )
    assert metrics.write_scrape(raw)
    samples = metrics.samples(TOKENS, {"target": "a"}, 30, 120)
    readings = [Sample(30.0, 20.0), Sample(60.0, 5.0), Sample(90.0, 15.0), Sample(120.0, 30.0)]
    assert samples == {_labels("a"): readings}
    assert metrics.samples(TOKENS, {"target": "a"}, 121, 200) == {_labels("a"): []}
    assert metrics.samples(TTFT, {"target": "b"}, 0, 200) == {_labels("b"): []}  # not a counter
    assert metrics.samples("raw:odd_total", None, 0, 200) == {
        (("target", "a"),): [Sample(160.0, 2.0)]
    }
    assert metrics.series("raw:odd_total")[0].kind == "raw"
    snaps = metrics.snapshots(TTFT, None, 40, 70)
    assert list(snaps) == [_labels("a"), _labels("b")]
    assert [(s.timestamp_seconds, s.histogram) for s in snaps[_labels("b")]] == [
        (40.0, _h((1, 1, 2), 1.0)),
        (70.0, _h((1, 2, 4), 2.0)),
    ]
    assert [s.timestamp_seconds for s in snaps[_labels("a")]] == [60.0]
    assert metrics.snapshots(TTFT, None, 70, 40) == {_labels("a"): [], _labels("b"): []}


def test_exemplars_of_scrapes_in_the_range(metrics) -> None:
    trace = (("trace_id", "4bf92f3577b34da6a3ce929d0e0e4736"),)
    seen = {
        0.0: (Exemplar(0.1, 0.05, trace, 0.0),),
        30.0: (Exemplar(1.0, 0.7, (("trace_id", "00f0"),)), Exemplar(math.inf, 3.0, ())),
    }
    for t, c, s, v in SCRAPES["a"]:
        metrics.write_scrape(_record("a", (t, c, s, v), exemplars=seen.get(t, ())))
    got = metrics.exemplars(TTFT, {"target": "a"}, 0, 30)
    assert sorted(got) == [
        StoredExemplar(0.1, 0.05, trace),
        StoredExemplar(1.0, 0.7, (("trace_id", "00f0"),)),
        StoredExemplar(math.inf, 3.0, ()),
    ]
    assert metrics.exemplars(TTFT, {"target": "a"}, 0.5, 29.5) == []
    assert metrics.exemplars(TTFT, {"target": "b"}, 0, 30) == []


def test_scrapes_failed_ones_included_and_stored_once(metrics) -> None:
    _write(metrics, {"a": SCRAPES["a"][:2]})
    failed = ScrapeRecord("a", 45.0, is_up=False, error="connection refused\x00")
    assert metrics.write_scrapes([failed, failed]) == [True, False]
    assert metrics.write_scrape(_record("a", SCRAPES["a"][0])) is False  # already kept
    assert metrics.scrapes("a") == [
        ScrapeStatus(0.0, True, ""),
        ScrapeStatus(30.0, True, ""),
        ScrapeStatus(45.0, False, "connection refused\ufffd"),
    ]
    assert metrics.scrapes("nobody") == []
    # A closed time range, either edge open-ended, and empty or NaN ranges.
    assert [s.timestamp_seconds for s in metrics.scrapes("a", 30.0, 45.0)] == [30.0, 45.0]
    assert [s.timestamp_seconds for s in metrics.scrapes("a", 1.0)] == [30.0, 45.0]
    assert [s.timestamp_seconds for s in metrics.scrapes("a", end=29.0)] == [0.0]
    assert metrics.scrapes("a", 46.0, 45.0) == []
    assert metrics.scrapes("a", math.nan, 45.0) == []
    twice = replace(
        _record("z", SCRAPES["a"][0]), samples=_record("z", SCRAPES["a"][0]).samples * 2
    )
    with pytest.raises(DuplicateSeriesError, match="prompt_tokens_total"):
        metrics.write_scrapes([_record("z", SCRAPES["a"][1]), twice])
    assert metrics.scrapes("z") == []  # nothing of the batch was kept
