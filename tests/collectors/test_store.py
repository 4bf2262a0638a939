"""The store on SQLite and PostgreSQL (the ``store`` fixture of ``conftest.py`` runs each test
on both): schema, round trip, idempotent writes, resets, and windows that merge series through
``slo``'s window functions."""

from __future__ import annotations

import itertools
import math
import random
import re
import string
import sys

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families as parse_text
from sqlalchemy import func, select, text

from collectors import normalise
from collectors.canonical import CanonicalHistogram, CanonicalSample, Exemplar, Flag, Kind
from collectors.store import (
    DuplicateSeriesError,
    LayoutChangeError,
    ScrapeRecord,
    SemanticsMismatchError,
    Store,
    sqlite_url,
)
from collectors.store.catalog import Catalog
from collectors.store.connection import StoreDriverError
from collectors.store.models import Base, HistogramSnapshotRow, Scrape, ValueSample
from collectors.store.schema import alembic_config
from slo import LayoutMismatchError, RangeSemantics, Sample, extrapolated_increase
from slo.window import samples_in_range
from tests.collectors import expositions as ex

BOUNDS = (0.1, 1.0, math.inf)


def _hist(
    counts: tuple[float, ...],
    *,
    target: str = "a",
    bounds: tuple[float, ...] = BOUNDS,
    flags: frozenset[Flag] = frozenset(),
    extra: tuple[tuple[str, str], ...] = (),
    exemplars: tuple[Exemplar, ...] = (),
) -> CanonicalHistogram:
    labels = tuple(sorted((("model", "m"), ("target", target), *extra)))
    return CanonicalHistogram(
        "ttft_seconds", labels, bounds, counts, sum(counts) / 10, counts[-1], flags,
        "test", exemplars,
    )  # fmt: skip


def _counter(value: float, *, target: str = "a", extra=()) -> CanonicalSample:
    labels = tuple(sorted((("model", "m"), ("target", target), *extra)))
    return CanonicalSample("prompt_tokens_total", labels, value, Kind.COUNTER)


def _write(store: Store, target: str, t: float, *items) -> bool:
    samples = tuple(i for i in items if isinstance(i, CanonicalSample))
    histograms = tuple(i for i in items if isinstance(i, CanonicalHistogram))
    return store.write_scrape(ScrapeRecord(target, t, samples, histograms))


def test_migrated_schema_matches_models(store: Store) -> None:
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), Base.metadata) == []
        head = ScriptDirectory.from_config(alembic_config()).get_current_head()
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() == head


def test_sqlite_runs_in_wal_mode_with_foreign_keys(tmp_path) -> None:
    s = Store(sqlite_url(tmp_path / "tw.db"))
    with s.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar() == 1
        assert conn.execute(text("PRAGMA synchronous")).scalar() == 1  # NORMAL
    s.close()


def test_reopening_keeps_data(store_url: str) -> None:
    url = store_url
    first = Store(url)
    assert _write(first, "a", 1.0, _counter(5.0))
    first.close()
    again = Store(url)
    assert again.samples("prompt_tokens_total", {}, 0, 10) == {
        (("model", "m"), ("target", "a")): [(1.0, 5.0)]
    }
    again.close()


def test_round_trip_of_a_normalised_scrape(store: Store) -> None:
    normalised = normalise(parse_text(ex.VLLM_033), "replica-a")
    assert store.write_scrape(ScrapeRecord.from_normalised("replica-a", 100.0, normalised))
    (snaps,) = store.snapshots("ttft_seconds", {"target": "replica-a"}, 0, 200).values()
    assert [s.timestamp_seconds for s in snaps] == [100.0]
    assert snaps[0].histogram.upper_bounds == (0.001, 0.04, 1.0, math.inf)
    assert snaps[0].histogram.cumulative_counts == (0.0, 1.0, 2.0, 3.0)
    assert snaps[0].histogram.sum_value == 0.28
    running = store.samples("requests_running", {"engine": "1"}, 0, 200)
    assert list(running.values()) == [[(100.0, 3.0)]]
    raw = store.samples("raw:vllm:cache_config_info", {}, 0, 200)
    assert list(raw) == [(("block_size", "16"), ("engine", "0"), ("target", "replica-a"))]
    (info,) = store.series("itl_seconds")
    assert (info.kind, info.flags) == ("histogram", frozenset())
    assert store.scrapes("replica-a") == [(100.0, True, "")]


def test_flags_and_exemplars_are_stored(store: Store) -> None:
    exemplar = Exemplar(0.1, 0.05, (("trace_id", "abc"),), 7.0)
    _write(store, "a", 1.0, _hist((1, 2, 3), flags=frozenset({Flag.TOKEN_WEIGHTED, Flag.RENAMED}), exemplars=(exemplar,)))  # fmt: skip
    (info,) = store.series("ttft_seconds")
    assert info.flags == {"token_weighted"}  # informational flags are not part of identity
    assert store.exemplars("ttft_seconds", {}, 0, 2) == [(0.1, 0.05, (("trace_id", "abc"),))]
    assert store.exemplars("ttft_seconds", {}, 2, 3) == []


def test_same_scrape_twice_counts_once(store: Store) -> None:
    assert _write(store, "a", 1.0, _counter(10.0), _hist((1, 2, 3)))
    assert _write(store, "a", 2.0, _counter(30.0), _hist((2, 4, 6)))
    assert not _write(store, "a", 2.0, _counter(30.0), _hist((2, 4, 6)))
    assert _write(store, "b", 2.0, _counter(1.0, target="b"))  # another target, same time
    with store.engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(Scrape)).scalar() == 3
        assert conn.execute(select(func.count()).select_from(ValueSample)).scalar() == 3
        assert conn.execute(select(func.count()).select_from(HistogramSnapshotRow)).scalar() == 2
    assert store.counter_window("prompt_tokens_total", {"target": "a"}, 1.0, 2.0) == 20.0
    merged = store.histogram_window("ttft_seconds", {}, 1.0, 2.0)
    assert merged is not None and merged.cumulative_counts == (1.0, 2.0, 3.0)


def test_counter_and_histogram_resets(store: Store) -> None:
    for t, v, h in [(1, 10, (1, 2, 3)), (2, 20, (2, 4, 6)), (3, 5, (1, 1, 1)), (4, 15, (1, 3, 5))]:
        _write(store, "a", float(t), _counter(float(v)), _hist(h))
    assert store.counter_window("prompt_tokens_total", {}, 1.0, 4.0) == 10 + 5 + 10
    merged = store.histogram_window("ttft_seconds", {}, 1.0, 4.0)
    # (2,4,6)-(1,2,3) + reset to (1,1,1) + (1,3,5)-(1,1,1)
    assert merged.cumulative_counts == (1 + 1 + 0, 2 + 1 + 2, 3 + 1 + 4)


def test_window_starts_from_the_last_scrape_at_or_before_t0(store: Store) -> None:
    for t, v in [(10, 100), (20, 150), (30, 190)]:
        _write(store, "a", float(t), _counter(float(v)), _hist((v, v, v)))
    assert store.counter_window("prompt_tokens_total", {}, 15.0, 30.0) == 90.0
    assert store.counter_window("prompt_tokens_total", {}, 15.0, 25.0) == 50.0
    assert store.counter_window("prompt_tokens_total", {}, 31.0, 40.0) is None
    assert store.histogram_window("ttft_seconds", {}, 15.0, 30.0).total_count == 90.0
    assert store.histogram_window("ttft_seconds", {}, 5.0, 9.0) is None


def test_window_merges_series_with_one_layout_and_refuses_others(store: Store) -> None:
    _write(store, "a", 1.0, _hist((1, 1, 1), target="a"))
    _write(store, "a", 2.0, _hist((2, 3, 4), target="a"))
    _write(store, "b", 1.0, _hist((0, 0, 0), target="b"))
    _write(store, "b", 2.0, _hist((5, 5, 5), target="b"))
    merged = store.histogram_window("ttft_seconds", {"model": "m"}, 1.0, 2.0)
    assert merged.cumulative_counts == (1 + 5, 2 + 5, 3 + 5)
    _write(store, "c", 1.0, _hist((0, 0, 0, 0), target="c", bounds=(0.1, 0.5, 1.0, math.inf)))
    _write(store, "c", 2.0, _hist((1, 1, 1, 1), target="c", bounds=(0.1, 0.5, 1.0, math.inf)))
    with pytest.raises(LayoutMismatchError):
        store.histogram_window("ttft_seconds", {"model": "m"}, 1.0, 2.0)
    assert store.histogram_window("ttft_seconds", {"target": "c"}, 1.0, 2.0).total_count == 1.0


def test_layout_change_within_a_series_is_refused(store: Store) -> None:
    _write(store, "a", 1.0, _hist((1, 1, 1)))
    _write(store, "a", 2.0, _hist((1, 1, 1, 1), bounds=(0.1, 0.5, 1.0, math.inf)))
    with pytest.raises(LayoutMismatchError):
        store.histogram_window("ttft_seconds", {}, 1.0, 2.0)


#: 2026-12-01T21:00:00Z: a layout change at today's Unix times (printed as 1.79e+09 before).
NOW = 1_796_158_800.0
NEW_BOUNDS = (0.1, 0.5, 1.0, math.inf)


@pytest.mark.parametrize("semantics", ["exact", "prometheus-2", "prometheus-3"])
def test_a_layout_change_names_the_target_the_time_and_both_layouts(
    store: Store, semantics
) -> None:
    _write(store, "replica-a", NOW, _hist((0, 0, 0), target="replica-a"))
    _write(store, "replica-a", NOW + 10, _hist((1, 2, 3), target="replica-a"))
    _write(store, "replica-a", NOW + 20.25, _hist((1, 1, 1, 1), target="replica-a", bounds=NEW_BOUNDS))  # fmt: skip
    _write(store, "replica-a", NOW + 30.5, _hist((2, 3, 4, 5), target="replica-a", bounds=NEW_BOUNDS))  # fmt: skip
    with pytest.raises(LayoutChangeError) as caught:
        store.histogram_window("ttft_seconds", {}, NOW, NOW + 40, semantics=semantics)
    error = caught.value
    message = str(error)
    assert "ttft_seconds on target 'replica-a'" in message
    assert "between 2026-12-01T21:00:10.000Z and 2026-12-01T21:00:20.250Z" in message
    assert "from 3 bounds (0.1, 1, +Inf) to 4 bounds (0.1, 0.5, 1, +Inf)" in message
    assert "from its first snapshot (2026-12-01T21:00:20.250Z)" in message
    assert "e+09" not in message
    assert isinstance(error, LayoutMismatchError)  # callers that catch the old error still do
    assert (error.target, error.family) == ("replica-a", "ttft_seconds")
    assert (error.last_old_seconds, error.first_new_seconds) == (NOW + 10, NOW + 20.25)
    assert (error.left, error.right) == (BOUNDS, NEW_BOUNDS)
    # What the error says to do works: the window from the first new snapshot.
    before = 0.001 if semantics == "prometheus-3" else 0.0  # 3.x ranges leave their start out
    start = error.first_new_seconds - before
    latest = store.histogram_window("ttft_seconds", {}, start, NOW + 40, semantics=semantics)
    assert latest is not None and latest.upper_bounds == NEW_BOUNDS
    if semantics == "exact":
        assert latest.cumulative_counts == (1.0, 2.0, 3.0, 4.0)
    older = store.histogram_window("ttft_seconds", {}, NOW - before, NOW + 10, semantics=semantics)
    assert older is not None and older.upper_bounds == BOUNDS


def test_series_with_different_layouts_name_both_targets(store: Store) -> None:
    for t in (NOW, NOW + 10):
        _write(store, "a", t, _hist((t - NOW,) * 3, target="a"))
        _write(store, "c", t, _hist((t - NOW,) * 4, target="c", bounds=NEW_BOUNDS))
    for semantics in ("exact", "prometheus-2"):
        with pytest.raises(LayoutMismatchError) as caught:
            store.histogram_window("ttft_seconds", {"model": "m"}, NOW, NOW + 10, semantics=semantics)  # fmt: skip
        message = str(caught.value)
        assert "target 'a' has 3 bounds (0.1, 1, +Inf)" in message
        assert "target 'c' has 4 bounds (0.1, 0.5, 1, +Inf)" in message
        assert not isinstance(caught.value, LayoutChangeError)


# -- Prometheus semantics -------------------------------------------------------------------


def test_prometheus_semantics_takes_the_samples_inside_the_range_and_extrapolates(
    store: Store,
) -> None:
    # Buckets (le=0.1, le=1, +Inf) grow by (0, 0.5, 1) per second; scrapes at 5, 15, 25 s.
    for target in ("a", "b"):
        for t in (5.0, 15.0, 25.0):
            counts = (0.0, t / 2, t)
            _write(store, target, NOW + t, _hist(counts, target=target), _counter(t, target=target))  # fmt: skip
    window = {"model": "m"}
    # [0, 30] at 30: samples 5, 15, 25 (+Inf: 20 over a 20 s span), 5 s to each edge, within
    # 1.1 x the 10 s spacing: x 30 / 20. le=0.1 never moved. Two series added.
    got = store.histogram_window("ttft_seconds", window, NOW, NOW + 30, semantics="prometheus-2")
    assert got.cumulative_counts == (0.0, 2 * 15.0, 2 * 30.0)
    assert got.sum_value == pytest.approx(2 * 4.5)  # _sum = 0.15 t: 3 over the span, x 1.5
    assert store.counter_window("prompt_tokens_total", window, NOW, NOW + 30, semantics="prometheus-2") == 60.0  # fmt: skip
    exact = store.histogram_window("ttft_seconds", window, NOW, NOW + 30)
    assert exact.cumulative_counts == (0.0, 2 * 10.0, 2 * 20.0)  # from the first snapshot
    # [6, 30]: exact starts from the snapshot at 5 (+Inf: 25 - 5); Prometheus sees 15 and 25
    # only: 10 over 10 s, extrapolated 9 s back and 5 s on: 24.
    got = store.histogram_window("ttft_seconds", window, NOW + 6, NOW + 30, semantics="prometheus-2")  # fmt: skip
    assert got.cumulative_counts == (0.0, 2 * 12.0, 2 * 24.0)
    assert store.histogram_window("ttft_seconds", window, NOW + 6, NOW + 30).cumulative_counts == (0.0, 2 * 10.0, 2 * 20.0)  # fmt: skip
    # [5, 25]: 2.x includes the sample at 5 (20, no extrapolation); 3.x does not: 15 and 25,
    # 10 extrapolated 10 s back (under 1.1 x 10 s) = 20 as well; at [5, 24] 3.x has one sample.
    for semantics in ("prometheus-2", "prometheus-3"):
        got = store.histogram_window("ttft_seconds", window, NOW + 5, NOW + 25, semantics=semantics)  # fmt: skip
        assert got.cumulative_counts == (0.0, 2 * 10.0, 2 * 20.0)
    assert store.histogram_window("ttft_seconds", window, NOW + 5, NOW + 24, semantics="prometheus-3") is None  # fmt: skip
    assert store.counter_window("prompt_tokens_total", window, NOW + 5, NOW + 24, semantics="prometheus-3") is None  # fmt: skip


def test_prometheus_semantics_reads_a_sample_that_rounds_into_the_range(store: Store) -> None:
    # On the millisecond clock [100.0006, 110.0004] at 110.0004 is 110 000 - round(9 999.8)
    # = 100 000 ms on: the 2.x range starts at 100 000 ms, so the sample at 99 999.55 ms
    # (rounded to 100 000) is inside it, though it lies 1.05 ms before the range's start.
    points = [(99.99955, 1.0), (105.0, 3.0), (110.0, 7.0)]
    for t, v in points:
        _write(store, "a", t, _counter(v), _hist((0.0, v, 2 * v)))
    start, end = 100.0006, 110.0004
    samples = [Sample(t, v) for t, v in points]
    assert len(samples_in_range(samples, end, end - start, RangeSemantics.PROMETHEUS_2)) == 3
    want = extrapolated_increase(samples, end, end - start, RangeSemantics.PROMETHEUS_2)
    got = store.counter_window("prompt_tokens_total", {}, start, end, semantics="prometheus-2")
    assert got == want
    window = store.histogram_window("ttft_seconds", {}, start, end, semantics="prometheus-2")
    assert window is not None and window.cumulative_counts[1] == want


def test_prometheus_semantics_handles_each_bucket_series_reset_on_its_own(store: Store) -> None:
    # A restart between 10 s and 20 s: every bucket falls; Prometheus adds each bucket's
    # value before the fall. +Inf: 5, 10, 3, 8 -> (10 - 5) + 3 + (8 - 3) = 13 over 30 s of
    # samples at 0..30 in a [0, 30] range: no extrapolation.
    for t, counts in [(0, (1, 2, 5)), (10, (2, 4, 10)), (20, (1, 1, 3)), (30, (2, 5, 8))]:
        _write(store, "a", NOW + t, _hist(tuple(float(c) for c in counts)))
    got = store.histogram_window("ttft_seconds", {}, NOW, NOW + 30, semantics="prometheus-2")
    assert got.cumulative_counts == (1 + 1 + 1.0, 2 + 1 + 4.0, 5 + 3 + 5.0)
    exact = store.histogram_window("ttft_seconds", {}, NOW, NOW + 30)
    assert exact.cumulative_counts == got.cumulative_counts  # aligned edges: the same


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(value=st.one_of(st.text(max_size=20), st.integers(), st.none(), st.floats()))
def test_an_unknown_semantics_is_named(store: Store, value) -> None:
    assume(value not in ("exact", "prometheus-2", "prometheus-3"))
    expected = r"semantics: expected 'exact' .* got " + re.escape(repr(value))
    for read in (store.histogram_window, store.counter_window):
        with pytest.raises(ValueError, match=expected):
            read("ttft_seconds", {}, 0.0, 10.0, semantics=value)
    with pytest.raises(ValueError, match=expected):
        store.quantile_series("ttft_seconds", {}, 0.0, 60.0, semantics=value)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])  # fmt: skip
@given(
    start=st.floats(allow_nan=True, allow_infinity=True),
    end=st.floats(allow_nan=True, allow_infinity=True),
    semantics=st.sampled_from(["exact", "prometheus-2", "prometheus-3"]),
)
def test_any_window_edges_give_an_answer_or_a_named_error(store: Store, start, end, semantics):
    if not store.series("ttft_seconds"):
        for t in (0.0, 1.0, 2.5):
            _write(store, "a", t, _hist((t, t, t)), _counter(t))
    for read in (store.histogram_window, store.counter_window):
        try:
            read("ttft_seconds", {}, start, end, semantics=semantics)
        except ValueError as error:
            assert semantics != "exact" and "needs a finite start and end" in str(error)


@pytest.mark.parametrize("edge", [-math.inf, math.inf, math.nan])
def test_prometheus_semantics_needs_finite_edges(store: Store, edge: float) -> None:
    _write(store, "a", 1.0, _hist((1, 1, 1)))
    for start, end in [(edge, 10.0), (0.0, edge), (-1.7e308, 1.7e308)]:
        for read in (store.histogram_window, store.counter_window):
            with pytest.raises(ValueError, match=r"'prometheus-3' needs a finite start and end"):
                read("ttft_seconds", {}, start, end, semantics="prometheus-3")
    for read in (store.histogram_series, store.counter_series):  # finite, but not in ms
        with pytest.raises(ValueError, match=r"'prometheus-2' needs a finite start and end"):
            read("ttft_seconds", {}, 1e306, 1e306 + 1e300, 1e300, semantics="prometheus-2")


def test_series_with_different_meanings_are_not_merged(store: Store) -> None:
    weighted = frozenset({Flag.TOKEN_WEIGHTED})
    for t in (1.0, 2.0):
        _write(store, "a", t, _hist((t, t, t), target="a"))
        _write(store, "b", t, _hist((t, t, t), target="b", flags=weighted))
    with pytest.raises(SemanticsMismatchError, match="token_weighted"):
        store.histogram_window("ttft_seconds", {}, 1.0, 2.0)
    assert store.histogram_window("ttft_seconds", {"target": "b"}, 1.0, 2.0).total_count == 1.0


def test_breakdown_series_are_selected_only_when_named(store: Store) -> None:
    tenant = (("tenant", "acme"),)
    _write(store, "a", 1.0, _counter(10.0), _counter(4.0, extra=tenant))
    _write(store, "a", 2.0, _counter(30.0), _counter(9.0, extra=tenant))
    assert store.counter_window("prompt_tokens_total", {}, 1.0, 2.0) == 20.0
    assert store.counter_window("prompt_tokens_total", {"tenant": "acme"}, 1.0, 2.0) == 5.0


# -- property: the merged window is the sum of each series' own delta ------------------------

_names = itertools.count()
_step = st.tuples(
    st.booleans(),  # reset before this scrape
    st.lists(st.integers(0, 5), min_size=3, max_size=3),  # new observations per bucket
)


def _cumulative(steps: list[tuple[bool, list[int]]]) -> tuple[list[tuple[float, ...]], list[float]]:
    """Cumulative snapshots of a series observing ``steps``, and the per-bucket observations
    actually made between the first and the last snapshot (the expected delta)."""
    per_bucket = [0, 0, 0]
    snapshots, observed = [], [0.0, 0.0, 0.0]
    for i, (is_reset, new) in enumerate(steps):
        if is_reset and i > 0:
            per_bucket = [0, 0, 0]
        per_bucket = [a + b for a, b in zip(per_bucket, new, strict=True)]
        if i > 0:
            observed = [a + b for a, b in zip(observed, new, strict=True)]
        snapshots.append(tuple(float(x) for x in itertools.accumulate(per_bucket)))
    return snapshots, list(itertools.accumulate(observed))


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    a=st.lists(_step, min_size=2, max_size=6).filter(lambda s: any(sum(n) for _, n in s[1:])),
    b=st.lists(_step, min_size=2, max_size=6),
)
def test_window_merge_is_the_sum_of_each_series_delta(store: Store, a, b) -> None:
    # NOTE: a reset is only detectable when some bucket goes down; cases where none does are
    # discarded (no collector, nor Prometheus, can see them).
    model = f"m{next(_names)}"
    expected = [0.0, 0.0, 0.0]
    for target, steps in (("a", a), ("b", b)):
        snapshots, delta = _cumulative(steps)
        visible = all(
            any(x < y for x, y in zip(after, before, strict=True))
            for (is_reset, _), (before, after) in zip(
                steps[1:], itertools.pairwise(snapshots), strict=True
            )
            if is_reset
        )
        assume(visible)  # a reset whose counts regrew past the old ones is undetectable
        expected = [e + d for e, d in zip(expected, delta, strict=True)]
        for t, counts in enumerate(snapshots):
            labels = (("model", model), ("target", target))
            histogram = CanonicalHistogram("ttft_seconds", labels, BOUNDS, counts, None, counts[-1])
            store.write_scrape(ScrapeRecord(f"{model}-{target}", float(t), histograms=(histogram,)))
    merged = store.histogram_window("ttft_seconds", {"model": model}, 0.0, 100.0)
    assert merged is not None
    assert list(merged.cumulative_counts) == expected


def test_raw_samples_are_stored_with_their_declared_type(store: Store) -> None:
    normalised = normalise(parse_text(ex.TRTLLM), "trt")
    store.write_scrape(ScrapeRecord.from_normalised("trt", 5.0, normalised))
    (info,) = store.series("raw:trtllm_time_per_output_token_seconds_count")
    assert info.kind == "raw"
    values = store.samples("raw:trtllm_time_per_output_token_seconds_count", {}, 0, 10)
    assert list(values.values()) == [[(5.0, 2.0)]]


def test_two_stores_on_one_database_store_a_scrape_once(store_url: str) -> None:
    url = store_url
    first, second = Store(url), Store(url)
    record = ScrapeRecord("a", 1.0, (_counter(1.0),), (_hist((1, 2, 3)),))
    assert first.write_scrape(record)
    assert not second.write_scrape(record)
    assert second.write_scrape(ScrapeRecord("b", 1.0, histograms=(_hist((0, 1, 1), target="b"),)))
    with first.engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM layouts")).scalar() == 1
        assert conn.execute(select(func.count()).select_from(Scrape)).scalar() == 2
    first.close()
    second.close()


def test_a_series_twice_in_one_scrape_is_refused_and_nothing_written(store: Store) -> None:
    with pytest.raises(DuplicateSeriesError, match="prompt_tokens_total"):
        _write(store, "a", 1.0, _counter(1.0), _counter(2.0))
    assert store.scrapes("a") == []
    assert _write(store, "a", 1.0, _counter(1.0))


def test_long_label_sets_and_layouts_are_stored(store: Store) -> None:
    # NOTE: PostgreSQL's btree refuses index rows over ~2.7 kB; identity must not depend on it.
    rng = random.Random(0)
    long_value = "".join(rng.choices(string.ascii_letters, k=6000))  # incompressible
    bounds = (*sorted({rng.uniform(0, 1e6) for _ in range(600)}), math.inf)
    counts = tuple(float(i) for i in range(len(bounds)))
    extra = (("prompt", long_value),)
    assert _write(store, "a", 1.0, _counter(1.0, extra=extra), _hist(counts, bounds=bounds, extra=extra))  # fmt: skip
    assert _write(store, "a", 2.0, _counter(3.0, extra=extra), _hist(counts, bounds=bounds, extra=extra))  # fmt: skip
    assert store.counter_window("prompt_tokens_total", {"prompt": long_value}, 1.0, 2.0) == 2.0
    (snaps,) = store.snapshots("ttft_seconds", {"prompt": long_value}, 0, 3).values()
    assert [s.histogram.upper_bounds for s in snaps] == [bounds, bounds]


def test_timestamps_and_values_round_trip_exactly(store: Store) -> None:
    t = 1_764_513_123.123456789  # a time.time() reading: needs every bit of a double
    value = 0.1 + 0.2
    assert _write(store, "a", t, _counter(value))
    assert not _write(store, "a", t, _counter(value))  # the same scrape: found by its time
    assert store.scrapes("a") == [(t, True, "")]
    assert store.samples("prompt_tokens_total", {}, t, t) == {
        (("model", "m"), ("target", "a")): [(t, value)]
    }


def test_a_batch_is_written_in_one_transaction_and_each_scrape_once(store: Store) -> None:
    first = ScrapeRecord("a", 1.0, (_counter(10.0),), (_hist((1, 2, 3)),), dialect="vllm")
    second = ScrapeRecord("a", 2.0, (_counter(30.0),), (_hist((2, 4, 6)),))
    down = ScrapeRecord("b", 2.0, is_up=False, error="connection failed: refused")
    assert store.write_scrapes([first, second, first, down]) == [True, True, False, True]
    assert store.write_scrapes([second, down]) == [False, False]
    assert store.write_scrapes([]) == []
    assert store.scrapes("a") == [(1.0, True, ""), (2.0, True, "")]
    assert store.scrapes("b") == [(2.0, False, "connection failed: refused")]
    assert store.counter_window("prompt_tokens_total", {"target": "a"}, 1.0, 2.0) == 20.0
    merged = store.histogram_window("ttft_seconds", {}, 1.0, 2.0)
    assert merged is not None and merged.cumulative_counts == (1.0, 2.0, 3.0)
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT dialect FROM targets WHERE name = 'a'")).scalar() == "vllm"
        assert conn.execute(select(func.count()).select_from(ValueSample)).scalar() == 2


def test_a_batch_with_a_duplicated_series_writes_nothing(store: Store) -> None:
    good = ScrapeRecord("a", 1.0, (_counter(1.0),))
    bad = ScrapeRecord("b", 1.0, (_counter(1.0, target="b"), _counter(2.0, target="b")))
    with pytest.raises(DuplicateSeriesError, match="prompt_tokens_total"):
        store.write_scrapes([good, bad])
    assert store.scrapes("a") == [] and store.scrapes("b") == []
    assert store.write_scrapes([good]) == [True]


def test_ids_made_by_a_rolled_back_write_are_not_reused(store: Store, monkeypatch) -> None:
    # NOTE: the write fails after it inserted the target, the scrape and the series; the ids
    # it saw must not be cached, or the next write would point at rows that do not exist.
    def fail(*args, **kwargs):
        raise RuntimeError("disk full")

    with monkeypatch.context() as patch:
        patch.setattr(Catalog, "resolve_layouts", fail)
        with pytest.raises(RuntimeError, match="disk full"):
            _write(store, "new", 1.0, _counter(1.0, target="new"), _hist((1, 2, 3), target="new"))
    assert store.scrapes("new") == [] and store.series("prompt_tokens_total") == []
    assert _write(store, "new", 1.0, _counter(1.0, target="new"), _hist((1, 2, 3), target="new"))
    assert _write(store, "new", 2.0, _counter(4.0, target="new"), _hist((2, 3, 4), target="new"))
    assert store.counter_window("prompt_tokens_total", {}, 1.0, 2.0) == 3.0
    assert store.histogram_window("ttft_seconds", {}, 1.0, 2.0).total_count == 1.0


def test_cached_ids_survive_rows_another_store_deleted(store_url: str) -> None:
    # NOTE: a cached series id whose row is gone (e.g. retention) fails the foreign key; the
    # write forgets its cached ids and retries once, recreating the series.
    writer = Store(store_url)
    assert _write(writer, "a", 1.0, _counter(1.0))
    with writer.engine.begin() as conn:
        for table in ("samples", "histogram_snapshots", "exemplars", "series"):
            conn.execute(text(f"DELETE FROM {table}"))
    assert _write(writer, "a", 2.0, _counter(2.0))
    assert writer.samples("prompt_tokens_total", {}, 0, 10) == {
        (("model", "m"), ("target", "a")): [(2.0, 2.0)]
    }
    writer.close()


def test_nan_readings_are_skipped_and_the_scrape_is_stored(store: Store) -> None:
    # NOTE: SQLite stores NaN as NULL, which the NOT NULL value column refuses: before this, one
    # NaN gauge made the whole batch fail on every retry.
    nan = math.nan
    gauge = CanonicalSample("requests_running", (("target", "a"),), nan, Kind.GAUGE)
    histogram = _hist((1, 2, 3))
    histogram = CanonicalHistogram(
        histogram.family, histogram.labels, BOUNDS, (1, 2, 3), nan, 3, frozenset(), "test"
    )
    broken = CanonicalHistogram("itl_seconds", histogram.labels, BOUNDS, (1, nan, 3), 1.0, 3)
    assert store.write_scrapes([ScrapeRecord("a", 1.0, (gauge, _counter(5.0)), (histogram, broken))]) == [True]  # fmt: skip
    assert store.scrapes("a") == [(1.0, True, "")]
    assert store.samples("requests_running", {}, 0, 2) == {(("target", "a"),): []}
    assert list(store.samples("prompt_tokens_total", {}, 0, 2).values()) == [[(1.0, 5.0)]]
    (snaps,) = store.snapshots("ttft_seconds", {}, 0, 2).values()
    assert snaps[0].histogram.sum_value is None
    assert list(store.snapshots("itl_seconds", {}, 0, 2).values()) == [[]]


def test_an_error_text_with_nul_is_stored(store: Store) -> None:
    # NOTE: PostgreSQL text cannot hold NUL; a garbage body's parser error may quote one.
    record = ScrapeRecord("a", 1.0, is_up=False, error="unparseable exposition: 'x\x00y'")
    assert store.write_scrape(record)
    assert store.scrapes("a") == [(1.0, False, "unparseable exposition: 'x\ufffdy'")]


def test_a_missing_driver_is_named_with_what_to_install(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if psycopg were not installed
    with pytest.raises(StoreDriverError, match=r"'psycopg'.*tailwatch\[postgres\].*postgresql\+psycopg://"):  # fmt: skip
        Store("postgresql+psycopg://user:pass@127.0.0.1:1/db")
