"""The evaluator's schedule (``alerts/schedule.py``) on a virtual clock whose waits wake late
by a seeded jitter, early, or after a stall: each evaluation is stamped with its slot on the
grid, so ``for:`` fires exactly ``for:`` after pending; missed slots are skipped; no
evaluation is stamped after the clock it ran at, nor before the one before it. Nothing
sleeps and nothing reads the wall clock."""

from __future__ import annotations

import itertools
import logging
import math
import random
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import (
    AlertState,
    Evaluator,
    MemoryAlertState,
    Tick,
    due_tick,
    next_after,
    run_ticks,
    slot_seconds,
)
from tests.alerts.test_alerts_evaluator import DOWN, T0, Switch

#: How often the fake target is scraped: off the evaluation grid, as a real collector is.
SCRAPE_SECONDS = 0.25


class VirtualClock:
    """Virtual Unix seconds. ``wait(seconds)`` advances the clock by ``seconds``, times the
    ``wakes`` factor of that wait when one is given (below 1: woken early; above: late), plus
    a seeded jitter in ``[0, jitter_seconds)`` and any ``stalls`` extra for that wait (by its
    number, from 1), as a sleeping thread wakes a little late. ``stop`` is set once the clock
    passes ``until`` or the ``wakes`` run out."""

    def __init__(
        self,
        stop: threading.Event,
        until: float,
        seed: int = 0,
        jitter_seconds: float = 0.0,
        stalls: Mapping[int, float] | None = None,
        wakes: list[float] | None = None,
    ) -> None:
        self.now = T0
        self.stop = stop
        self.until = until
        self.rng = random.Random(seed)
        self.jitter_seconds = jitter_seconds
        self.stalls = dict(stalls or {})
        self.wakes = None if wakes is None else list(wakes)
        self.num_waits = 0

    def __call__(self) -> float:
        return self.now

    def wait(self, seconds: float) -> None:
        assert seconds > 0, f"asked to wait {seconds!r} s"
        self.num_waits += 1
        factor = 1.0 if self.wakes is None else self.wakes.pop(0)
        jitter = self.rng.random() * self.jitter_seconds
        self.now += seconds * factor + jitter + self.stalls.get(self.num_waits, 0.0)
        if self.now >= self.until or self.wakes == []:
            self.stop.set()

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingState(MemoryAlertState):
    """Records each saved evaluation's time beside the clock at which it was saved."""

    def __init__(self, clock: Callable[[], float]) -> None:
        super().__init__()
        self.clock = clock
        self.evaluations: list[tuple[float, float]] = []  # (evaluation time, clock)

    def save_evaluation(self, alerts, transitions, errors=(), at_seconds=None) -> None:
        self.evaluations.append((at_seconds, self.clock()))
        super().save_evaluation(alerts, transitions, errors, at_seconds)


def target_down_from(onset: float, end: float) -> Switch:
    """A target scraped every ``SCRAPE_SECONDS`` from ``T0 - 1``: up before ``onset``, down
    from it on (the target-down condition holds from the first evaluation at or after it)."""
    switch = Switch()
    t = T0 - 1
    while t <= end:
        switch.at(t, t >= onset)
        t += SCRAPE_SECONDS
    if math.isfinite(onset):
        switch.at(onset, True)
    return switch


def assert_on_the_grid(times: list[float], interval: float) -> None:
    for at in times:
        index = round((at - T0) / interval)
        assert at == slot_seconds(T0, index, interval), f"{at!r} is off the grid"


@pytest.mark.parametrize(("interval", "for_seconds"), [(1.0, 6.0), (15.0, 15.0), (0.5, 1.5)])
@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    jitter=st.floats(0.0, 0.05, exclude_max=True),
    num_before=st.integers(0, 3),
    onset_share=st.floats(0.0, 1.0, exclude_max=True),
)
def test_an_alert_fires_exactly_for_after_it_went_pending_however_late_each_wake(
    interval, for_seconds, seed, jitter, num_before, onset_share
) -> None:
    onset = T0 + (num_before + onset_share) * interval
    until = onset + for_seconds + 2 * interval
    switch = target_down_from(onset, until + interval)
    stop = threading.Event()
    clock = VirtualClock(stop, until, seed, jitter)
    state = RecordingState(clock)
    evaluator = Evaluator([replace(DOWN, for_seconds=for_seconds)], switch.reader, state, clock)
    assert evaluator.run(stop, interval, wait=clock.wait) == len(state.evaluations)
    times = [at for at, _ in state.evaluations]
    assert_on_the_grid(times, interval)
    assert all(b - a == interval for a, b in itertools.pairwise(times))  # none missed
    pending, firing = state.history(T0, until + interval)
    assert pending.to_state is AlertState.PENDING and firing.to_state is AlertState.FIRING
    assert pending.at_seconds == min(at for at in times if at >= onset)
    assert firing.at_seconds - pending.at_seconds == for_seconds  # exactly, not an interval late
    assert firing.alert.started_at_seconds == firing.at_seconds


@settings(max_examples=200, deadline=None)
@given(
    interval=st.sampled_from([0.5, 1.0, 15.0]),
    wakes=st.lists(
        st.one_of(st.floats(0.0, 1.0), st.floats(1.0, 1.05), st.floats(1.0, 6.0)),
        min_size=1,
        max_size=40,
    ),
)
def test_every_evaluation_is_on_the_grid_after_the_last_and_never_after_the_clock(
    interval, wakes
) -> None:
    stop = threading.Event()
    clock = VirtualClock(stop, math.inf, wakes=wakes)
    ran: list[tuple[float, float]] = []
    num_calls = run_ticks(lambda at: ran.append((at, clock())), stop, interval, clock, clock.wait)
    assert num_calls == len(ran) >= 1
    times = [at for at, _ in ran]
    assert_on_the_grid(times, interval)
    assert times[0] == T0
    assert all(a < b for a, b in itertools.pairwise(times))
    for at, now in ran:
        assert at <= now < at + interval  # never in the future, and less than a slot stale


def test_a_stall_of_three_and_a_half_intervals_skips_three_slots(caplog) -> None:
    stop = threading.Event()
    clock = VirtualClock(stop, T0 + 9.5, stalls={3: 3.5})  # the wait for slot 3 wakes at 6.5
    state = RecordingState(clock)
    switch = target_down_from(math.inf, T0 + 10)
    evaluator = Evaluator([DOWN], switch.reader, state, clock)
    with caplog.at_level(logging.INFO, logger="alerts.schedule"):
        assert evaluator.run(stop, 1.0, wait=clock.wait) == 7
    assert state.evaluations == [
        (T0 + 0, T0 + 0),
        (T0 + 1, T0 + 1),
        (T0 + 2, T0 + 2),
        (T0 + 6, T0 + 6.5),  # slots 3, 4 and 5 skipped; stamped with slot 6, not 6.5
        (T0 + 7, T0 + 7),
        (T0 + 8, T0 + 8),
        (T0 + 9, T0 + 9),
    ]
    warning, back = caplog.messages
    assert "fell behind its 1 s schedule" in warning and "skipped 3 slot(s)" in warning
    assert back == "alert evaluation is back on its schedule, 3 slot(s) skipped"


def test_an_evaluation_that_overruns_skips_the_slots_that_began_while_it_ran(caplog) -> None:
    stop = threading.Event()
    clock = VirtualClock(stop, T0 + 6.5)
    ran: list[tuple[float, float]] = []

    def evaluate(at: float) -> None:
        ran.append((at, clock()))
        if at == T0 + 1:
            clock.advance(3.5)  # ends at 4.5: slots 2, 3 and 4 began while it ran

    with caplog.at_level(logging.WARNING, logger="alerts.schedule"):
        assert run_ticks(evaluate, stop, 1.0, clock, clock.wait) == 4
    # NOTE: not slot 4 at once (late): the loop waits for slot 5, not running back to back
    assert ran == [(T0, T0), (T0 + 1, T0 + 1), (T0 + 5, T0 + 5), (T0 + 6, T0 + 6)]
    (warning,) = caplog.messages
    assert "skipped 3 slot(s)" in warning


def test_a_failed_evaluation_is_logged_and_the_next_slot_goes_on(caplog) -> None:
    stop = threading.Event()
    clock = VirtualClock(stop, T0 + 3.5)
    ran: list[float] = []

    def evaluate(at: float) -> None:
        ran.append(at)
        if len(ran) == 2:
            raise ConnectionError("database is down")

    with caplog.at_level(logging.ERROR, logger="alerts.schedule"):
        assert run_ticks(evaluate, stop, 1.0, clock, clock.wait) == 4
    assert ran == [T0, T0 + 1, T0 + 2, T0 + 3]
    (record,) = caplog.records
    assert "failed" in record.getMessage() and record.exc_info[0] is ConnectionError


def test_a_start_ahead_of_the_clock_is_waited_for() -> None:
    stop = threading.Event()
    clock = VirtualClock(stop, T0 + 32, wakes=[0.5, 0.5, 1.0, 1.0, 1.0])  # two early wakes
    ran: list[tuple[float, float]] = []
    run_ticks(lambda at: ran.append((at, clock())), stop, 15.0, clock, clock.wait, T0 + 4)
    assert [at - T0 for at, _ in ran] == [4.0, 19.0]
    assert all(at <= now for at, now in ran)


@pytest.mark.parametrize(
    ("next_index", "now", "expected"),
    [
        (1, 14.999, None),  # early: wait
        (1, 15.0, Tick(1, 15.0, 0)),  # exactly at the slot
        (1, 29.999, Tick(1, 15.0, 0)),  # late by less than an interval: still that slot
        (1, 30.0, Tick(2, 30.0, 1)),  # a whole interval late: that slot is missed
        (1, 67.5, Tick(4, 60.0, 3)),  # 3.5 intervals late: 3 missed, the latest slot
        (0, 0.0, Tick(0, 0.0, 0)),
    ],
)
def test_due_tick(next_index, now, expected) -> None:
    assert due_tick(0.0, next_index, now, 15.0) == expected


@given(
    start=st.floats(-1e9, 2e9),
    next_index=st.integers(0, 10**6),
    late=st.floats(0.0, 1e4),
    interval=st.floats(1e-3, 3600.0),
)
def test_a_due_tick_is_on_the_grid_not_after_now_and_at_or_after_the_planned_slot(
    start, next_index, late, interval
) -> None:
    now = slot_seconds(start, next_index, interval) + late
    tick = due_tick(start, next_index, now, interval)
    assert tick is not None
    assert tick.index == next_index + tick.num_missed and tick.num_missed >= 0
    assert tick.at_seconds == slot_seconds(start, tick.index, interval)
    assert tick.at_seconds <= now < slot_seconds(start, tick.index + 1, interval)


@pytest.mark.parametrize(
    ("index", "now", "expected"),
    [
        (0, 0.3, (1, 0)),  # on time: the next slot
        (0, 15.0, (1, 0)),  # ended exactly at the next slot: it is due at once
        (0, 15.001, (2, 1)),  # ran into slot 1: skipped
        (0, 52.5, (4, 3)),  # a 3.5-interval overrun: slots 1-3 skipped, slot 4 waited for
        (0, 60.0, (4, 3)),
    ],
)
def test_next_after(index, now, expected) -> None:
    assert next_after(0.0, index, now, 15.0) == expected


@given(
    start=st.floats(-1e9, 2e9),
    index=st.integers(0, 10**6),
    took=st.floats(0.0, 1e4),
    interval=st.floats(1e-3, 3600.0),
)
def test_after_an_evaluation_the_next_slot_is_the_first_not_before_the_clock(
    start, index, took, interval
) -> None:
    now = slot_seconds(start, index, interval) + took
    following, num_skipped = next_after(start, index, now, interval)
    assert following == index + 1 + num_skipped and num_skipped >= 0
    assert slot_seconds(start, following, interval) >= now
    assert num_skipped == 0 or slot_seconds(start, following - 1, interval) < now
