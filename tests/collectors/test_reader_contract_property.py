"""The reader contract on random scrape sequences: :class:`FakeMetricsReader` and the SQLite
store answer every read the same, on raw data and once maintenance has rolled minutes up.

Sequences have resets, failed scrapes, NaN readings, exemplars, a bucket-layout change now
and then, 1-3 targets scraped at offsets of their own, written in time order or shuffled
(late data); reads are random windows (``end <= start`` included), step series and raw reads,
on each semantics.
"""

from __future__ import annotations

import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.canonical import CanonicalHistogram, CanonicalSample, Exemplar, Kind
from collectors.store import ScrapeRecord, Store, sqlite_url
from collectors.store.fake import FakeMetricsReader
from slo import ClassicHistogram

B = (0.1, 1.0, math.inf)
OTHER = (0.5, math.inf)
TTFT, TOKENS = "ttft_seconds", "prompt_tokens_total"
SEMANTICS = ("exact", "prometheus-2", "prometheus-3")
SELECTORS: tuple[dict[str, str] | None, ...] = (None, {"model": "m"}, {"target": "t0"})
#: When maintenance runs: after every scrape's minute, well inside the raw retention.
NOW = 100_000.0


@st.composite
def _target(draw: st.DrawFn, name: str) -> list[ScrapeRecord]:
    """One target's scrapes on a 5 s grid over ~10 minutes, at an offset of its own."""
    ticks = sorted(draw(st.sets(st.integers(0, 130), min_size=1, max_size=30)))
    offset = draw(st.sampled_from([0.0, 0.001, 2.5]))
    change_at = draw(st.one_of(st.none(), st.none(), st.sampled_from(ticks)))
    labels = (("model", "m"), ("target", name))
    bounds, per_bucket, observed, value = B, [0, 0, 0], 0.0, 0.0
    records = []
    for tick in ticks:
        t = tick * 5.0 + offset
        event = draw(st.integers(0, 11))
        if tick == change_at:  # a restart with other buckets
            bounds, per_bucket, observed, value = OTHER, [0, 0], 0.0, 0.0
        elif event == 0:  # a restart: everything from zero
            per_bucket, observed, value = [0] * len(bounds), 0.0, 0.0
        if event == 1:
            records.append(ScrapeRecord(name, t, is_up=False, error="timed out"))
            continue
        new = draw(st.lists(st.integers(0, 4), min_size=len(bounds), max_size=len(bounds)))
        per_bucket = [a + b for a, b in zip(per_bucket, new, strict=True)]
        observed += 0.1 * draw(st.integers(0, 30))  # tenths: float sums that round
        value += 0.1 * draw(st.integers(0, 500))
        counts = tuple(float(sum(per_bucket[: i + 1])) for i in range(len(bounds)))
        exemplars = ()
        if event == 2:  # an exemplar now and then, on a bucket of the current layout
            trace = (("trace_id", f"{tick:032x}"),)
            exemplars = (Exemplar(draw(st.sampled_from(bounds)), 0.1 * tick, trace),)
        is_nan = event == 3  # a NaN reading is no reading; a NaN count drops the snapshot
        histogram = CanonicalHistogram(
            TTFT,
            labels,
            bounds,
            counts,
            math.nan if is_nan else observed,
            math.nan if is_nan and tick % 2 else counts[-1],
            exemplars=exemplars,
        )
        sample = CanonicalSample(TOKENS, labels, math.nan if is_nan else value, Kind.COUNTER)
        records.append(ScrapeRecord(name, t, (sample,), (histogram,)))
    return records


@st.composite
def _scrapes(draw: st.DrawFn) -> list[ScrapeRecord]:
    count = draw(st.integers(1, 3))
    records = [r for i in range(count) for r in draw(_target(f"t{i}"))]
    if draw(st.booleans()):
        return draw(st.permutations(records))  # late data: written out of time order
    return sorted(records, key=lambda r: r.timestamp_seconds)


_edge = st.integers(-2, 130).map(lambda k: k * 5.0) | st.integers(-10, 660).map(float)
#: (start, end): mostly forward, sometimes empty or backwards.
_windows = st.lists(
    st.tuples(_edge, st.integers(-20, 660)).map(lambda w: (w[0], w[0] + w[1])),
    min_size=1,
    max_size=4,
)
_steps = st.lists(
    st.tuples(_edge, st.integers(0, 700), st.sampled_from([7.5, 15.0, 60.0, 90.0])),
    min_size=1,
    max_size=2,
)


def _outcome(read: Callable[..., Any], *args: Any, **kwargs: Any) -> tuple[str, Any]:
    """What a read answered, or which error (type and message) it raised."""
    try:
        return "ok", read(*args, **kwargs)
    except ValueError as error:
        return type(error).__name__, str(error)


def _close(got: Any, want: Any, *, exact: bool) -> bool:
    """Equal, or (``exact=False``) equal but for the last bits of float sums.

    NOTE: roll-ups add a minute's pairs first and the minutes' totals then, the fake adds the
    pairs one by one: the same floats in another order, so sums of tenths may differ in the
    last bits (``rel_tol=1e-12``). Counts are whole numbers, exact in any order."""
    if exact or got is None or want is None:
        return got == want
    if isinstance(got, ClassicHistogram):
        return (
            isinstance(want, ClassicHistogram)
            and got.upper_bounds == want.upper_bounds
            and got.cumulative_counts == want.cumulative_counts
            and _close(got.sum_value, want.sum_value, exact=False)
        )
    if isinstance(got, float):
        return isinstance(want, float) and math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-9)
    if isinstance(got, list | tuple):
        return (
            isinstance(want, list | tuple)
            and len(got) == len(want)
            and all(_close(a, b, exact=False) for a, b in zip(got, want, strict=True))
        )
    return got == want


def _same_answer(
    fake: FakeMetricsReader, store: Store, read: str, *args: Any, exact: bool, **kwargs: Any
) -> None:
    got = _outcome(getattr(store, read), *args, **kwargs)
    want = _outcome(getattr(fake, read), *args, **kwargs)
    assert got[0] == want[0], (read, args, kwargs, got, want)
    assert _close(got[1], want[1], exact=exact), (read, args, kwargs, got, want)


def _agree(fake: FakeMetricsReader, store: Store, windows, steps, *, use_rollups: bool) -> None:
    for labels in SELECTORS:
        for family in (TTFT, TOKENS):
            assert store.series(family, labels) == fake.series(family, labels)
        assert store.samples(TOKENS, labels, 100, 400) == fake.samples(TOKENS, labels, 100, 400)
        assert store.snapshots(TTFT, labels, 0, 300) == fake.snapshots(TTFT, labels, 0, 300)
        for semantics in SEMANTICS:
            kw = {"semantics": semantics, "use_rollups": use_rollups}
            # Prometheus ranges read raw snapshots: the same additions as the fake's
            exact = not use_rollups or semantics != "exact"
            for start, end in windows:
                args = (labels, start, end)
                _same_answer(fake, store, "histogram_window", TTFT, *args, exact=exact, **kw)
                _same_answer(fake, store, "counter_window", TOKENS, *args, exact=exact, **kw)
            for start, width, step in steps:
                args = (labels, start, start + width, step)
                _same_answer(fake, store, "histogram_series", TTFT, *args, exact=exact, **kw)
                _same_answer(fake, store, "counter_series", TOKENS, *args, exact=exact, **kw)
    for start, end in windows:  # the store promises no order of exemplars
        want = sorted(fake.exemplars(TTFT, None, start, end))
        assert sorted(store.exemplars(TTFT, None, start, end)) == want
    for target in ("t0", "t1", "t2", "nobody"):
        assert store.scrapes(target) == fake.scrapes(target)


def _stored(directory: str, records: list[ScrapeRecord]) -> tuple[FakeMetricsReader, Store]:
    store = Store(sqlite_url(Path(directory) / "contract.db"))
    fake = FakeMetricsReader()
    assert store.write_scrapes(records) == fake.write_scrapes(records)
    return fake, store


@settings(max_examples=40, deadline=None)
@given(records=_scrapes(), windows=_windows, steps=_steps)
def test_fake_and_sqlite_agree_on_raw_data(records, windows, steps) -> None:
    with tempfile.TemporaryDirectory() as directory:
        fake, store = _stored(directory, records)
        try:
            _agree(fake, store, windows, steps, use_rollups=False)
        finally:
            store.close()


@settings(max_examples=30, deadline=None)
@given(records=_scrapes(), windows=_windows, steps=_steps)
def test_fake_and_sqlite_agree_once_minutes_are_rolled_up(records, windows, steps) -> None:
    with tempfile.TemporaryDirectory() as directory:
        fake, store = _stored(directory, records)
        try:
            # NOTE: the default policy: the second call, past the settling time, settles the
            # scrapes the first rolled up, and from then on reads take whole minutes from
            # roll-ups.
            for now in (NOW, NOW + 60):
                assert not store.maintain(now).more_to_do
            assert store.rollup_coverage() == math.inf
            _agree(fake, store, windows, steps, use_rollups=True)
        finally:
            store.close()
