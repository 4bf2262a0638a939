"""Retention and 1-minute roll-ups, on SQLite and PostgreSQL (the shared ``store`` fixture).

The oracle of every window is ``slo.histogram_increase`` / ``slo.counter_increase`` applied to
the generated snapshots by the raw rule (from the last snapshot at or before ``t0`` to the
last at or before ``t1``), computed here without the store.
"""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import delete, func, select, text

from collectors.canonical import CanonicalHistogram, CanonicalSample, Kind
from collectors.store import LayoutChangeError, ScrapeRecord, Store
from collectors.store.models import (
    HistogramRollup,
    HistogramSnapshotRow,
    SampleRollup,
    Scrape,
    ValueSample,
)
from collectors.store.raw import minute_start
from collectors.store.retention import RetentionPolicy
from collectors.store.window_semantics import step_bounds
from slo import (
    ClassicHistogram,
    HistogramSnapshot,
    LayoutMismatchError,
    RangeSemantics,
    Sample,
    counter_increase,
    extrapolated_increase,
    histogram_increase,
    merge_histograms,
)

BOUNDS = (0.1, 1.0, math.inf)
OTHER_BOUNDS = (0.1, 0.5, 1.0, math.inf)
#: Settle at once and roll up any minute already over: compressed time, no sleeping.
NOW_POLICY = RetentionPolicy(rollup_lag_seconds=0, settle_seconds=0)
_models = itertools.count()

# One snapshot: (time, cumulative counts, sum, counter value).
Snap = tuple[float, tuple[float, ...], float, float]


def _labels(model: str, replica: str) -> tuple[tuple[str, str], ...]:
    return (("model", model), ("target", f"{model}-{replica}"))


def _write(store: Store, model: str, replica: str, snap: Snap, bounds=BOUNDS) -> None:
    t, counts, sum_value, value = snap
    labels = _labels(model, replica)
    histogram = CanonicalHistogram("ttft_seconds", labels, bounds, counts, sum_value, counts[-1])
    sample = CanonicalSample("prompt_tokens_total", labels, value, Kind.COUNTER)
    assert store.write_scrape(ScrapeRecord(f"{model}-{replica}", t, (sample,), (histogram,)))


def _settle(store: Store, now: float = 100_000.0, policy: RetentionPolicy = NOW_POLICY) -> None:
    """Maintain until everything written is rolled up and settled (bounded)."""
    for _ in range(50):
        report = store.maintain(now, policy)
        if not report.more_to_do and store.rollup_coverage() == math.inf:
            return
    raise AssertionError("maintenance did not catch up in 50 calls")


def _write_replicas(store: Store, replicas: list[list[Snap]]) -> tuple[str, dict[str, list[Snap]]]:
    """Write each replica's snapshots under a new model, then settle: (model, {replica: snaps})."""
    model = f"m{next(_models)}"
    data = {f"r{i}": snaps for i, snaps in enumerate(replicas)}
    for replica, snaps in data.items():
        for snap in snaps:
            _write(store, model, replica, snap)
    _settle(store)
    return model, data


def _oracle(replicas: dict[str, list[Snap]], t0: float, t1: float):
    """(merged histogram, summed counter increase) over [t0, t1] by the raw rule, or None."""
    increases, total, found = [], 0.0, False
    for snaps in replicas.values():
        base = max((s[0] for s in snaps if s[0] <= t0), default=t0)
        chosen = [s for s in snaps if base <= s[0] <= t1]
        delta = histogram_increase(
            [HistogramSnapshot(t, ClassicHistogram(BOUNDS, c, s)) for t, c, s, _ in chosen]
        )
        if delta is not None:
            increases.append(delta)
        if len(chosen) >= 2:
            total += counter_increase([v for *_, v in chosen])
            found = True
    return (merge_histograms(increases) if increases else None), (total if found else None)


def _same(got: ClassicHistogram | None, want: ClassicHistogram | None) -> bool:
    if got is None or want is None:
        return got is want
    return (
        got.upper_bounds == want.upper_bounds
        and got.cumulative_counts == want.cumulative_counts
        and got.sum_value == want.sum_value
    )


# -- property: roll-up windows equal raw windows ----------------------------------------------


@st.composite
def _series(draw) -> list[Snap]:
    """Snapshots on a 5 s grid over 10 minutes (gaps, minute boundaries, resets)."""
    times = sorted(draw(st.sets(st.integers(0, 120), min_size=1, max_size=40)))
    per_bucket = [0, 0, 0]
    observed_sum, value = 0.0, 0.0
    snaps = []
    for tick in times:
        if draw(st.integers(0, 9)) == 0:  # a restart: everything from zero
            per_bucket, observed_sum, value = [0, 0, 0], 0.0, 0.0
        new = draw(st.lists(st.integers(0, 4), min_size=3, max_size=3))
        per_bucket = [a + b for a, b in zip(per_bucket, new, strict=True)]
        observed_sum += 0.5 * sum(new)  # multiples of 0.5: float sums stay exact
        value += draw(st.integers(0, 50))
        counts = tuple(float(x) for x in itertools.accumulate(per_bucket))
        snaps.append((tick * 5.0, counts, observed_sum, value))
    return snaps


_windows = st.lists(
    st.tuples(st.integers(0, 10), st.integers(0, 10)).map(
        lambda p: (min(p) * 60, max(p) * 60 + 60)
    ),
    min_size=1,
    max_size=4,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    replicas=st.lists(_series(), min_size=1, max_size=3),
    windows=_windows,
    edges=st.lists(st.tuples(st.integers(0, 620), st.integers(1, 620)), max_size=3),
)
def test_rollup_windows_equal_raw_windows(store: Store, replicas, windows, edges) -> None:
    model, data = _write_replicas(store, replicas)
    unaligned = [(a, a + b) for a, b in edges]
    for t0, t1 in [*windows, *unaligned]:
        want_h, want_c = _oracle(data, t0, t1)
        for use_rollups in (True, False):
            got = store.histogram_window("ttft_seconds", {"model": model}, t0, t1, use_rollups=use_rollups)  # fmt: skip
            assert _same(got, want_h), (t0, t1, use_rollups, got, want_h)
            got_c = store.counter_window("prompt_tokens_total", {"model": model}, t0, t1, use_rollups=use_rollups)  # fmt: skip
            assert got_c == want_c, (t0, t1, use_rollups)
    for step in (60.0, 120.0, 90.0):
        series = store.histogram_series("ttft_seconds", {"model": model}, 0, 660, step)
        edges_k = step_bounds(0, 660, step)
        assert [t for t, _ in series] == edges_k[1:]
        for (t, got), t0 in zip(series, edges_k, strict=False):
            assert _same(got, _oracle(data, t0, t)[0]), (step, t)
        counters = store.counter_series("prompt_tokens_total", {"model": model}, 0, 660, step)
        assert [c for _, c in counters] == [_oracle(data, t - step, t)[1] for t, _ in counters]


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    replicas=st.lists(_series(), min_size=1, max_size=3),
    edges=st.lists(st.tuples(st.integers(0, 6200), st.integers(1, 3000)), max_size=3),
    semantics=st.sampled_from(["prometheus-2", "prometheus-3"]),
)
def test_prometheus_semantics_equal_increase_per_bucket_series_summed_by_le(
    store: Store, replicas, edges, semantics
) -> None:
    """The store's Prometheus windows and steps equal ``sum by (le) (increase(...))`` computed
    here from the generated snapshots, bucket series by bucket series, to the last bit (the
    same additions in the same order); roll-ups play no part."""
    model, data = _write_replicas(store, replicas)
    rule = RangeSemantics(semantics)

    def oracle(t0: float, t1: float):
        per_le, counter = [0.0] * len(BOUNDS), None
        found = False
        for snaps in data.values():  # replicas in insertion order, as the store adds them
            for i in range(len(BOUNDS)):
                bucket = [Sample(t, counts[i]) for t, counts, _, _ in snaps]
                increase = extrapolated_increase(bucket, t1, t1 - t0, rule)
                if increase is not None:
                    per_le[i] += increase
                    found = True
            value = extrapolated_increase([Sample(t, v) for t, *_, v in snaps], t1, t1 - t0, rule)
            if value is not None:
                counter = value if counter is None else counter + value
        return (tuple(per_le) if found else None), counter

    windows = [(a / 10, a / 10 + b / 10) for a, b in edges] + [(0, 660), (120, 300)]
    for t0, t1 in windows:
        want_h, want_c = oracle(t0, t1)
        for use_rollups in (True, False):
            got = store.histogram_window("ttft_seconds", {"model": model}, t0, t1, use_rollups=use_rollups, semantics=semantics)  # fmt: skip
            assert (None if got is None else got.cumulative_counts) == want_h, (t0, t1)
            got_c = store.counter_window("prompt_tokens_total", {"model": model}, t0, t1, semantics=semantics)  # fmt: skip
            assert got_c == want_c, (t0, t1)
    for step in (60.0, 90.0):
        series = store.histogram_series("ttft_seconds", {"model": model}, 0, 660, step, semantics=semantics)  # fmt: skip
        for t, got in series:
            want = oracle(t - step, t)[0]
            assert (None if got is None else got.cumulative_counts) == want, (step, t)
        counters = store.counter_series("prompt_tokens_total", {"model": model}, 0, 660, step, semantics=semantics)  # fmt: skip
        assert [c for _, c in counters] == [oracle(t - step, t)[1] for t, _ in counters]


def test_aligned_windows_are_read_from_rollups_alone(store: Store) -> None:
    snaps = [(t, (t, 2 * t, 3 * t), t / 2, 10 * t) for t in (0.0, 30.0, 60.0, 90.0, 120.0, 170.0)]
    for snap in snaps:
        _write(store, "m", "a", snap)
    _settle(store)
    want = _oracle({"a": snaps}, 0, 180)
    with store.engine.begin() as conn:  # raw gone: only the roll-ups can answer
        conn.execute(delete(HistogramSnapshotRow))
        conn.execute(delete(ValueSample))
    assert _same(store.histogram_window("ttft_seconds", {}, 0, 180), want[0])
    assert store.counter_window("prompt_tokens_total", {}, 0, 180) == want[1]
    assert store.histogram_window("ttft_seconds", {}, 0, 180, use_rollups=False) is None


def test_minute_boundary_first_snapshot_and_rows(store: Store) -> None:
    # A snapshot exactly at 60 ends the pair of minute (0, 60] and is the baseline of (60, 120].
    for t, n in [(10.0, 1), (60.0, 3), (61.0, 4), (120.0, 10)]:
        _write(store, "m", "a", (t, (n, n, n), float(n), float(n)))
    _settle(store)
    with store.engine.connect() as conn:
        rows = conn.execute(
            select(
                HistogramRollup.start_seconds, HistogramRollup.pairs, HistogramRollup.count
            ).order_by(HistogramRollup.start_seconds)
        ).all()
    # the first snapshot (t=10) ends no pair; (0,60]: 10->60; (60,120]: 60->61, 61->120
    assert [tuple(r) for r in rows] == [(0.0, 1, 2.0), (60.0, 2, 7.0)]
    assert store.histogram_window("ttft_seconds", {}, 60, 120).total_count == 7.0
    assert store.histogram_window("ttft_seconds", {}, 0, 60).total_count == 2.0
    assert store.histogram_window("ttft_seconds", {}, 61, 120).total_count == 6.0
    assert minute_start(60.0) == 0.0 and minute_start(60.5) == 60.0


# -- late data ----------------------------------------------------------------------------------


def test_late_scrapes_are_rolled_up_again_and_reads_stay_exact(store: Store) -> None:
    snaps = {"a": [], "b": []}
    for t in (0.0, 30.0, 150.0, 300.0):  # a gap from 30 to 150
        n = t / 10
        snaps["a"].append((t, (n, n, n), n, n))
        snaps["b"].append((t + 5, (n, 2 * n, 2 * n), n, 2 * n))
    for replica, items in snaps.items():
        for snap in items:
            _write(store, "m", replica, snap)
    _settle(store)
    # The collector writes buffered scrapes late: one inside the gap (it splits the pair
    # 30 -> 150 of minute (120, 180] into 30 -> 90 in minute (60, 120] and 90 -> 150), one
    # with a reset.
    late = [("a", (90.0, (5.0, 5.0, 5.0), 5.0, 5.0)), ("b", (95.0, (1.0, 1.0, 1.0), 1.0, 1.0))]
    for replica, snap in late:
        _write(store, "m", replica, snap)
        snaps[replica].append(snap)
        snaps[replica].sort()
    windows = [(0, 60), (60, 120), (120, 180), (0, 300), (60, 240), (0, 360)]
    # before maintenance catches up, reads fall back to raw for the minutes concerned
    assert store.rollup_coverage() <= 60.0
    for t0, t1 in windows:
        assert _same(store.histogram_window("ttft_seconds", {}, t0, t1), _oracle(snaps, t0, t1)[0])
    report = store.maintain(100_000.0, NOW_POLICY)
    assert report.late_scrapes == 2 and report.scrapes_rolled_up == 2
    _settle(store)
    for t0, t1 in windows:
        want_h, want_c = _oracle(snaps, t0, t1)
        assert _same(store.histogram_window("ttft_seconds", {}, t0, t1), want_h), (t0, t1)
        assert store.counter_window("prompt_tokens_total", {}, t0, t1) == want_c
    with store.engine.begin() as conn:  # prove the roll-ups themselves were corrected
        conn.execute(delete(HistogramSnapshotRow))
    for t0, t1 in windows:
        assert _same(store.histogram_window("ttft_seconds", {}, t0, t1), _oracle(snaps, t0, t1)[0])


def test_a_lower_id_committed_late_is_noticed(store: Store) -> None:
    """PostgreSQL can commit scrape id 2 after id 3 (two writers); the recount notices."""
    for t in (0.0, 60.0, 120.0):
        _write(store, "m", "a", (t, (t, t, t), t, t))
    with store.engine.begin() as conn:  # make id 2 disappear, as if still in flight
        moved = conn.execute(select(Scrape.id).where(Scrape.timestamp_seconds == 60.0)).scalar()
        saved = {}
        for table in (HistogramSnapshotRow, ValueSample):
            rows = conn.execute(select(table).where(table.scrape_id == moved))
            saved[table] = [dict(r._mapping) for r in rows]
        scrape = dict(conn.execute(select(Scrape).where(Scrape.id == moved)).one()._mapping)
        for table in saved:
            conn.execute(delete(table).where(table.scrape_id == moved))
        conn.execute(delete(Scrape).where(Scrape.id == moved))
    store.maintain(1000.0, RetentionPolicy(rollup_lag_seconds=0, settle_seconds=60))
    assert store.histogram_window("ttft_seconds", {}, 0, 180).total_count == 120.0
    with store.engine.begin() as conn:  # ... and now it commits, below the processed id
        conn.execute(Scrape.__table__.insert(), [scrape])
        for table, rows in saved.items():
            conn.execute(table.__table__.insert(), rows)
    report = store.maintain(1010.0, RetentionPolicy(rollup_lag_seconds=0, settle_seconds=60))
    assert report.recounted
    _settle(store, 2000.0)
    with store.engine.begin() as conn:
        conn.execute(delete(HistogramSnapshotRow))
    got = store.histogram_series("ttft_seconds", {}, 0, 180)
    assert [h and h.total_count for _, h in got] == [60.0, 60.0, None]


# -- retention -----------------------------------------------------------------------------------


def _count(store: Store, table) -> int:
    with store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar()


def test_retention_deletes_exactly_the_old_raw_rows_once_rolled_up(store: Store) -> None:
    snaps = [(t * 30.0, (t, t, t), float(t), float(t)) for t in range(0, 481)]  # 4 h at 30 s
    for snap in snaps:
        _write(store, "m", "a", snap)
    now = 4 * 3600.0 + 5
    hour = RetentionPolicy(raw_retention_seconds=3600, rollup_lag_seconds=0, settle_seconds=60)
    report = store.maintain(now, hour)
    # nothing is settled yet, so nothing may be deleted however old
    assert report.scrapes_rolled_up == 481 and report.raw_scrapes_deleted == 0
    assert _count(store, Scrape) == 481
    before = store.histogram_series("ttft_seconds", {}, 0, 4 * 3600.0, 600)
    small = RetentionPolicy(
        raw_retention_seconds=3600, rollup_lag_seconds=0, settle_seconds=60,
        max_deleted_scrapes_per_call=100,
    )  # fmt: skip
    deleted, calls = 0, 0
    while True:
        calls += 1
        report = store.maintain(now + 60, small)
        deleted += report.raw_scrapes_deleted
        assert report.raw_scrapes_deleted <= 100
        if not report.more_to_do:
            break
    cutoff = math.floor((now + 60 - 3600) / 60) * 60  # 10860
    kept = [s for s in snaps if s[0] >= cutoff]
    assert deleted == 481 - len(kept) and calls == 4
    assert _count(store, Scrape) == _count(store, HistogramSnapshotRow) == len(kept)
    assert _count(store, ValueSample) == len(kept)
    with store.engine.connect() as conn:
        oldest = conn.execute(select(func.min(Scrape.timestamp_seconds))).scalar()
    assert oldest == cutoff
    # windows over deleted minutes still come from roll-ups, unchanged
    after = store.histogram_series("ttft_seconds", {}, 0, 4 * 3600.0, 600)
    assert [h and h.cumulative_counts for _, h in after] == [
        h and h.cumulative_counts for _, h in before
    ]
    # a non-aligned edge past raw retention counts only whole minutes
    assert store.histogram_window("ttft_seconds", {}, 30, 120).total_count == 2.0
    assert store.maintain(now + 60, small).raw_scrapes_deleted == 0  # idempotent


def test_unrolled_and_unsettled_scrapes_and_the_newest_are_kept(store: Store) -> None:
    for t in (0.0, 60.0, 120.0):
        _write(store, "m", "a", (t, (t, t, t), t, t))
    policy = RetentionPolicy(
        raw_retention_seconds=600, rollup_lag_seconds=0, settle_seconds=0, max_scrapes_per_call=1
    )
    kept = []
    for _ in range(4):
        store.maintain(10_000.0, policy)
        kept.append([t for t, *_ in store.scrapes("m-a")])
    # call 1 rolls up scrape 1 (not settled yet: nothing deleted); call 2 settles 1, deletes
    # it, rolls up 2; call 3 deletes 2; the newest is kept (SQLite would reuse its id)
    assert kept == [[0.0, 60.0, 120.0], [60.0, 120.0], [120.0], [120.0]]


def test_late_data_older_than_raw_retention_is_dropped(store: Store) -> None:
    for t in range(0, 3 * 3600 + 1, 60):
        _write(store, "m", "a", (float(t), (t, t, t), float(t), float(t)))
    policy = RetentionPolicy(raw_retention_seconds=3600, rollup_lag_seconds=0, settle_seconds=0)
    _settle(store, 3 * 3600 + 30, policy)
    before = store.histogram_window("ttft_seconds", {}, 0, 3600)
    _write(store, "m", "a", (1830.0, (1.0, 1.0, 1.0), 1.0, 1.0))  # a reset, 2.5 h late
    report = store.maintain(3 * 3600 + 30, policy)
    assert report.dropped_late_scrapes == 1 and report.scrapes_rolled_up == 0
    assert _same(store.histogram_window("ttft_seconds", {}, 0, 3600), before)
    assert list(store.snapshots("ttft_seconds", {}, 1800, 1860).values()) == [[]]


def test_rollup_retention_deletes_old_minutes_in_bounded_steps(store: Store) -> None:
    for t in range(0, 3 * 3600 + 1, 30):
        _write(store, "m", "a", (float(t), (t, t, t), float(t), float(t)))
    _settle(store, 3 * 3600 + 30)
    # minutes (0, 60] .. (10740, 10800]; the counter's first reading (t=0) alone makes (-60, 0]
    assert _count(store, HistogramRollup) == 180 and _count(store, SampleRollup) == 181
    policy = RetentionPolicy(
        raw_retention_seconds=600, rollup_retention_seconds=3600, rollup_lag_seconds=0,
        settle_seconds=0, max_rollup_minutes_deleted_per_call=50,
    )  # fmt: skip
    now = 3 * 3600 + 30
    reports = [store.maintain(now, policy) for _ in range(5)]
    assert [r.more_to_do for r in reports][:3] == [True, True, False]
    assert sum(r.rollup_rows_deleted for r in reports) == 120 + 121
    with store.engine.connect() as conn:
        oldest = conn.execute(select(func.min(HistogramRollup.start_seconds))).scalar()
    assert oldest == math.floor((now - 3600) / 60) * 60  # 7200
    assert store.histogram_window("ttft_seconds", {}, 0, 3600) is None
    assert store.histogram_window("ttft_seconds", {}, 7200, 7260).total_count == 60.0


def test_maintain_is_idempotent(store: Store) -> None:
    for t in range(0, 601, 5):
        _write(store, "m", "a", (float(t), (t, t, 2 * t), t / 2, float(t)))
    _settle(store)

    def tables():
        with store.engine.connect() as conn:
            return [
                conn.execute(select(table).order_by(table.series_id, table.start_seconds)).all()
                for table in (HistogramRollup, SampleRollup)
            ]

    first = tables()
    again = store.maintain(100_000.0, NOW_POLICY)
    assert (again.scrapes_rolled_up, again.rollup_rows_written, again.raw_scrapes_deleted) == (0, 0, 0)  # fmt: skip
    assert tables() == first


# -- layouts -------------------------------------------------------------------------------------


def _layout_change(store: Store) -> None:
    """Replica m-a's layout changes between its snapshots at 70 s and 100 s."""
    for t, bounds in [(0.0, BOUNDS), (30.0, BOUNDS), (70.0, BOUNDS), (100.0, OTHER_BOUNDS)]:
        counts = (1.0,) * len(bounds)
        _write(store, "m", "a", (t, counts, 1.0, t), bounds=bounds)
    _write(store, "m", "a", (130.0, (2.0,) * 4, 2.0, 130.0), bounds=OTHER_BOUNDS)


def test_a_layout_change_still_raises_on_both_paths(store: Store) -> None:
    _layout_change(store)
    _settle(store)
    change = r"ttft_seconds on target 'm-a' changed between 1970-01-01T00:01:10.000Z and 1970-01-01T00:01:40.000Z, from 3 bounds \(0.1, 1, \+Inf\) to 4 bounds"  # fmt: skip
    for use_rollups in (True, False):
        # NOTE: the roll-up of minute (60, 120] holds no counts, only both layouts: the
        # error's times come from the minute's raw snapshots.
        with pytest.raises(LayoutChangeError, match=change):
            store.histogram_window("ttft_seconds", {}, 0, 120, use_rollups=use_rollups)
        with pytest.raises(LayoutChangeError, match=change):
            store.histogram_window("ttft_seconds", {}, 60, 180, use_rollups=use_rollups)
        with pytest.raises(LayoutChangeError, match=change):
            store.histogram_series("ttft_seconds", {}, 0, 180, use_rollups=use_rollups)
        with pytest.raises(LayoutChangeError, match=change):
            store.quantile_series("ttft_seconds", {}, 0, 180, use_rollups=use_rollups)
        assert store.histogram_window("ttft_seconds", {}, 0, 60, use_rollups=use_rollups).upper_bounds == BOUNDS  # fmt: skip
        assert store.histogram_window("ttft_seconds", {}, 120, 180, use_rollups=use_rollups).upper_bounds == OTHER_BOUNDS  # fmt: skip


def test_a_layout_change_past_the_raw_retention_is_placed_in_its_minute(store: Store) -> None:
    _layout_change(store)
    policy = RetentionPolicy(raw_retention_seconds=600, rollup_lag_seconds=0, settle_seconds=0)
    for _ in range(5):  # roll up, settle, then delete the raw rows
        store.maintain(100_000.0, policy)
    (left,) = store.snapshots("ttft_seconds", {}, 0, 200).values()
    assert [s.timestamp_seconds for s in left] == [130.0]  # the newest scrape is always kept
    minute = (
        r"changed between 1970-01-01T00:01:00.000Z and 1970-01-01T00:02:00.000Z \(within "
        r"that minute; its raw snapshots are past retention\)"
    )
    with pytest.raises(LayoutChangeError, match=minute) as caught:
        store.histogram_window("ttft_seconds", {}, 0, 120)
    assert (caught.value.last_old_seconds, caught.value.first_new_seconds) == (60.0, 120.0)
    assert store.histogram_window("ttft_seconds", {}, 0, 60).upper_bounds == BOUNDS
    # Prometheus semantics need the raw samples: refused, not answered from what is left.
    with pytest.raises(ValueError, match=r"'prometheus-2' reads raw snapshots.*deleted by retention"):  # fmt: skip
        store.histogram_window("ttft_seconds", {}, 0, 120, semantics="prometheus-2")


def test_series_with_different_layouts_are_not_merged(store: Store) -> None:
    for t in (0.0, 60.0):
        _write(store, "m", "a", (t, (t, t, t), t, t))
        _write(store, "m", "b", (t, (t,) * 4, t, t), bounds=OTHER_BOUNDS)
    _settle(store)
    for use_rollups in (True, False):
        with pytest.raises(LayoutMismatchError):
            store.histogram_window("ttft_seconds", {"model": "m"}, 0, 60, use_rollups=use_rollups)


# -- quantile series and gauges ------------------------------------------------------------------


def test_quantile_series_by_hand(store: Store) -> None:
    # minute (0, 60]: replica a observes (6 <= 0.1, 4 in (0.1, 1]), b (4 <= 0.1, 6 in (0.1, 1])
    # merged cumulative (10, 20, 20): p50 rank 10 -> 0.1 * 10/10 = 0.1; p95 rank 19 ->
    # 0.1 + 0.9 * 9/10 = 0.91; p99 rank 19.8 -> 0.1 + 0.9 * 9.8/10 = 0.982.
    # minute (60, 120]: only a, 4 in (1, +Inf]: every quantile caps at the top finite bound 1.
    _write(store, "m", "a", (0.0, (0.0, 0.0, 0.0), 0.0, 0.0))
    _write(store, "m", "b", (0.0, (0.0, 0.0, 0.0), 0.0, 0.0))
    _write(store, "m", "a", (60.0, (6.0, 10.0, 10.0), 3.0, 0.0))
    _write(store, "m", "b", (60.0, (4.0, 10.0, 10.0), 4.0, 0.0))
    _write(store, "m", "a", (120.0, (6.0, 10.0, 14.0), 13.0, 0.0))
    _settle(store)
    for use_rollups in (True, False):
        got = store.quantile_series("ttft_seconds", {"model": "m"}, 0, 180, use_rollups=use_rollups)  # fmt: skip
        assert [t for t, _ in got] == [60.0, 120.0, 180.0]
        assert [q.value for q in got[0][1]] == pytest.approx([0.1, 0.91, 0.982])
        assert [q.value for q in got[1][1]] == [1.0, 1.0, 1.0]
        assert all(q.in_inf_bucket for q in got[1][1])
        assert got[2][1] is None


def test_gauge_minutes(store: Store) -> None:
    labels = (("target", "g"),)
    for t, v in [(10.0, 3.0), (20.0, 1.0), (60.0, 2.0), (70.0, 8.0)]:
        sample = CanonicalSample("requests_running", labels, v, Kind.GAUGE)
        store.write_scrape(ScrapeRecord("g", t, (sample,)))
    _settle(store)
    ((_, minutes),) = store.gauge_minutes("requests_running", {}, 0, 120).items()
    assert [(m.start_seconds, m.samples, m.last, m.min, m.max, m.avg) for m in minutes] == [
        (0.0, 3, 2.0, 1.0, 3.0, 2.0),
        (60.0, 1, 8.0, 8.0, 8.0, 8.0),
    ]


def test_schema_has_the_rollup_revision(store: Store) -> None:
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT version_num FROM alembic_version")).scalar() >= "0003"


def test_policy_and_step_errors_name_the_value() -> None:
    with pytest.raises(ValueError, match=r"raw_retention_seconds: .* >= 600, got 60"):
        RetentionPolicy(raw_retention_seconds=60)
    with pytest.raises(ValueError, match=r"max_scrapes_per_call: .* got 0"):
        RetentionPolicy(max_scrapes_per_call=0)
    with pytest.raises(ValueError, match=r"step_seconds: expected a number > 0, got 0"):
        step_bounds(0, 60, 0)
    with pytest.raises(ValueError, match="steps"):
        step_bounds(0, 1e9, 1)
