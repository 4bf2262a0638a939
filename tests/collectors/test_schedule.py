"""Each target on its own schedule: with one target hanging, one answering slowly and one
flapping, every scheduled scrape of the healthy ones is stored while the collector runs, each
target's ``target_up`` is its own, and the hanging target's overruns are reported.

Real scrapes over loopback into a real SQLite store, on a compressed schedule (intervals of
0.5-1 s). No assertion is about wall-clock time: the tests wait (bounded, generously) for
scrapes to be stored, and check counts, order, and the gaps between a target's own scrape
timestamps (a skipped slot makes a gap of two intervals).
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import collector_metrics as cm
from collectors.collector import Collector
from collectors.scrape import Scraper, Target
from collectors.scrape_schedule import (
    ScrapeLoop,
    SlotReport,
    first_slot,
    next_slot,
    phase_offset_seconds,
)
from collectors.store import ScrapeRecord
from tests.collectors.test_scrape import HEALTHY_BODY, serve_app
from tests.collectors.waiting import WAIT_SECONDS, wait_until

#: The slow target answers after this share of the interval.
SLOW_SHARE = 0.6


def schedule_app(interval_seconds: float):
    """/ok answers at once; /hang never answers (until the client gives up); /slow answers
    after ``SLOW_SHARE`` of the interval; /flap answers 200 and 500 in turn."""
    requests = {"flap": 0}

    async def app(scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        status = 200
        if path == "/hang":
            while (await receive())["type"] != "http.disconnect":
                pass
            return
        if path == "/slow":
            await asyncio.sleep(SLOW_SHARE * interval_seconds)
        elif path == "/flap":
            requests["flap"] += 1
            status = 200 if requests["flap"] % 2 else 500
        headers = [
            (b"content-type", b"text/plain; version=0.0.4"),
            (b"content-length", b"%d" % len(HEALTHY_BODY)),
        ]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": HEALTHY_BODY})

    return app


@pytest.fixture
def backend() -> str:
    return "sqlite"  # NOTE: conftest's store, on SQLite only: what is under test is not the store


def gaps(timestamps: list[float]) -> list[float]:
    return [later - earlier for earlier, later in itertools.pairwise(timestamps)]


def metric(collector: Collector, name: str, target: str) -> float | None:
    return collector.registry.get_sample_value(name, {"target": target})


def test_healthy_targets_are_stored_on_schedule_beside_hanging_slow_and_flapping_ones(
    store, caplog
):
    # NOTE: the timeout equals the interval, the longest the configuration allows (and the
    # old default): the hanging target's scrape then always ends just past its next slot.
    interval = 1.0
    num_slots = 6
    names = ("ok-1", "ok-2", "hang", "slow", "flap")

    async def scenario(base_url: str) -> dict[str, object]:
        paths = {"ok-1": "/ok", "ok-2": "/ok", "hang": "/hang", "slow": "/slow", "flap": "/flap"}
        targets = [Target(name, base_url + paths[name]) for name in names]
        async with Scraper(timeout_seconds=interval) as scraper:
            collector = Collector(targets, store, scraper, interval_seconds=interval)
            stop = asyncio.Event()
            running = asyncio.create_task(collector.run(stop))
            try:
                # while the collector runs, with the hanging target's scrapes never answered,
                # every healthy target's scrapes reach the store
                await wait_until(
                    lambda: all(len(store.scrapes(n)) >= num_slots for n in ("ok-1", "ok-2")),
                    f"{num_slots} stored scrapes of each healthy target",
                )
                await wait_until(
                    lambda: len(store.scrapes("hang")) >= 2 and len(store.scrapes("flap")) >= 4,
                    "the hanging and flapping targets' scrapes",
                )
                stored_now = {name: store.scrapes(name) for name in names}
            finally:
                stop.set()
                await asyncio.wait_for(running, timeout=WAIT_SECONDS)
            return {
                "collector": collector,
                # after the stop, when every scrape made is stored
                "up": {name: metric(collector, cm.TARGET_UP, name) for name in names},
                "stored": stored_now,
                "statuses": {s.target: s for s in collector.target_statuses()},
            }

    with (
        caplog.at_level(logging.INFO, logger="tailwatch.collector"),
        serve_app(schedule_app(interval)) as base_url,
    ):
        found = asyncio.run(scenario(base_url))
    collector: Collector = found["collector"]  # type: ignore[assignment]
    statuses = found["statuses"]
    up, stored_then = found["up"], found["stored"]

    for name in ("ok-1", "ok-2", "slow"):
        scrapes = store.scrapes(name)
        assert all(is_up for _, is_up, _ in scrapes), name
        # one stored scrape per slot: none skipped (a skipped slot is a gap of 2 intervals)
        assert max(gaps([t for t, _, _ in scrapes])) < 1.5 * interval, (name, scrapes)
        assert statuses[name].num_scrapes == len(scrapes)  # every scrape stored
        assert metric(collector, cm.SKIPPED_SCRAPES + "_total", name) == 0
        assert up[name] == 1 and statuses[name].health == "up", name
    assert len(stored_then["ok-1"]) >= num_slots and len(stored_then["ok-2"]) >= num_slots
    (running_ok,) = store.samples("requests_running", {"target": "ok-1"}, 0, 1e12).values()
    assert len(running_ok) == len(store.scrapes("ok-1"))  # each scrape's readings stored

    # the hanging target: down, timed out, and every scrape overran into its next slot
    hang = store.scrapes("hang")
    assert {(is_up, error) for _, is_up, error in hang} == {(False, "timed out after 1 s")}
    assert up["hang"] == 0 and statuses["hang"].health == "down"
    assert statuses["hang"].num_scrapes == len(hang)
    skipped = metric(collector, cm.SKIPPED_SCRAPES + "_total", "hang")
    assert skipped is not None and skipped >= 1
    assert statuses["hang"].num_skipped_scrapes == skipped and statuses["hang"].is_overrunning
    overruns = [r.getMessage() for r in caplog.records if "past its 1 s interval" in r.message]
    assert len(overruns) == 1, overruns  # once when it starts overrunning, not every slot
    assert overruns[0].startswith("scrape of hang ended ")
    assert overruns[0].endswith("skipped 1 scheduled scrape(s); it keeps its phase")
    # its slots keep their phase: every gap is a whole number of intervals (2: one skipped)
    assert all(gap >= 1.5 * interval for gap in gaps([t for t, _, _ in hang])), hang

    # the flapping target: up and down in turn, and target_up says which it was last
    flap = store.scrapes("flap")
    states = [is_up for _, is_up, _ in flap]
    assert states[0] and all(a != b for a, b in itertools.pairwise(states)), flap
    assert up["flap"] == (1 if states[-1] else 0)
    assert statuses["flap"].health == ("up" if states[-1] else "down")
    assert metric(collector, cm.SKIPPED_SCRAPES + "_total", "flap") == 0
    assert collector.num_buffered == 0


def test_with_the_default_timeout_a_hanging_target_keeps_its_own_schedule(store):
    interval = 1.0

    async def scenario(base_url: str) -> Collector:
        targets = [Target("ok", base_url + "/ok"), Target("hang", base_url + "/hang")]
        async with Scraper(timeout_seconds=0.8 * interval) as scraper:
            collector = Collector(targets, store, scraper, interval_seconds=interval)
            stop = asyncio.Event()
            running = asyncio.create_task(collector.run(stop))
            try:
                await wait_until(lambda: len(store.scrapes("hang")) >= 5, "5 hanging scrapes")
            finally:
                stop.set()
                await asyncio.wait_for(running, timeout=WAIT_SECONDS)
            return collector

    with serve_app(schedule_app(interval)) as base_url:
        collector = asyncio.run(scenario(base_url))
    hang = store.scrapes("hang")
    assert {error for _, _, error in hang} == {"timed out after 0.8 s"}
    # NOTE: each scrape ends 0.2 s before its next slot, so it keeps its schedule; only an
    # event loop stalled past that margin (a badly overloaded machine) makes it skip one.
    # With the timeout equal to the interval every slot overruns (the test above).
    skipped = metric(collector, cm.SKIPPED_SCRAPES + "_total", "hang")
    assert skipped is not None and skipped <= len(hang) // 2, hang
    assert statistics.median(gaps([t for t, _, _ in hang])) < 1.5 * interval, hang
    assert metric(collector, cm.SKIPPED_SCRAPES + "_total", "ok") == 0
    assert len(store.scrapes("ok")) >= len(hang) - 1


def test_targets_added_and_removed_while_running_start_and_stop_their_loops(store):
    interval = 0.3

    async def scenario(base_url: str) -> Collector:
        async with Scraper(timeout_seconds=0.8 * interval) as scraper:
            collector = Collector(
                [Target("static", base_url + "/ok")], store, scraper, interval_seconds=interval
            )
            stop = asyncio.Event()
            running = asyncio.create_task(collector.run(stop))

            def loops() -> set[str]:
                return {t.get_name() for t in asyncio.all_tasks() if not t.done()}

            try:
                await wait_until(lambda: len(store.scrapes("static")) >= 1, "a static scrape")
                collector.update_targets([Target("added", base_url + "/ok")])
                await wait_until(lambda: len(store.scrapes("added")) >= 2, "the added target")
                assert {"scrape static", "scrape added"} <= loops()
                collector.update_targets([])
                await wait_until(lambda: "scrape added" not in loops(), "its loop to end")
                assert [s.target for s in collector.target_statuses()] == ["static"]
            finally:
                stop.set()
                await asyncio.wait_for(running, timeout=WAIT_SECONDS)
            return collector

    with serve_app(schedule_app(interval)) as base_url:
        asyncio.run(scenario(base_url))
    assert all(is_up for _, is_up, _ in store.scrapes("added"))


def test_a_loop_that_overruns_skips_the_slots_it_missed_and_stop_ends_a_wait_at_once(caplog):
    interval = 0.2
    work = [0.0, 2.5 * interval, 0.0, 0.0]  # the second scrape runs into the fourth slot
    reports: list[SlotReport] = []
    scraped: list[int] = []

    async def scenario() -> float:
        loop_clock = asyncio.get_running_loop().time
        stop = asyncio.Event()

        async def scrape() -> ScrapeRecord | None:
            scraped.append(len(scraped))
            await asyncio.sleep(work[min(len(scraped) - 1, len(work) - 1)])
            if len(scraped) == len(work):
                stop.set()
            if len(scraped) == 3:
                raise RuntimeError("a bug met in one scrape")
            return None

        loop = ScrapeLoop(
            "t",
            scrape,
            lambda record: None,
            reports.append,
            interval,
            loop_clock(),
            loop_clock,
        )
        await asyncio.wait_for(loop.run(stop), timeout=WAIT_SECONDS)
        # a loop waiting for a slot an hour away ends as soon as stop is set
        stop = asyncio.Event()
        far = ScrapeLoop(
            "far", scrape, reports.append, reports.append, 3600.0, loop_clock() + 3600.0, loop_clock
        )
        waiting = asyncio.create_task(far.run(stop))
        await asyncio.sleep(0.05)
        stop.set()
        await asyncio.wait_for(waiting, timeout=WAIT_SECONDS)
        return far.slot_start

    with caplog.at_level(logging.ERROR, logger="tailwatch.collector"):
        asyncio.run(scenario())
    # the third scrape raised: logged, and the loop went on to its next slot
    assert [r.getMessage() for r in caplog.records] == ["scrape loop of t: unexpected error"]
    assert "a bug met in one scrape" in caplog.text
    assert [report.num_skipped for report in reports] == [0, 2, 0, 0]
    # the overrun: it ended 2.5 intervals after its slot began (later on a busy machine)
    assert reports[1].ended_after_slot_seconds >= reports[1].took_seconds - 1e-6
    assert reports[1].took_seconds >= 2.5 * interval - 1e-3
    assert len(scraped) == len(work)  # the far loop never scraped


# -- the slot arithmetic ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("slot", "now", "interval", "expected"),
    [
        (0.0, 0.3, 1.0, (1.0, 0)),  # on time
        (0.0, 1.0, 1.0, (1.0, 0)),  # ended exactly as the next slot begins: not late
        (0.0, 1.0001, 1.0, (2.0, 1)),  # just past it: that slot is skipped
        (0.0, 3.5, 1.0, (4.0, 3)),
        (10.0, 12.0, 0.5, (12.5, 4)),
    ],
)
def test_next_slot(slot, now, interval, expected):
    assert tuple(next_slot(slot, now, interval)) == expected


@settings(max_examples=200, deadline=None)
@given(
    slot=st.floats(min_value=-1e6, max_value=1e9, allow_nan=False),
    late=st.floats(min_value=0, max_value=1e4, allow_nan=False),
    interval=st.floats(min_value=1e-3, max_value=1e4, allow_nan=False),
)
def test_the_next_slot_keeps_the_phase_and_is_never_in_the_past(slot, late, interval):
    now = slot + late
    start, num_skipped = next_slot(slot, now, interval)
    assert num_skipped >= 0
    assert start >= now or math.isclose(start, now, rel_tol=1e-9, abs_tol=1e-6)
    # a whole number of intervals after the slot: no drift
    assert math.isclose(start, slot + (num_skipped + 1) * interval, rel_tol=1e-9, abs_tol=1e-6)
    if num_skipped:  # the slot before the next one had begun before the scrape ended
        assert start - interval <= now + 1e-6 * max(1.0, abs(now))


@settings(max_examples=200, deadline=None)
@given(
    start=st.floats(min_value=-1e6, max_value=1e9, allow_nan=False),
    share=st.floats(min_value=0, max_value=1, exclude_max=True),
    late=st.floats(min_value=-1e4, max_value=1e4, allow_nan=False),
    interval=st.floats(min_value=1e-3, max_value=1e4, allow_nan=False),
)
def test_the_first_slot_is_the_first_of_the_phase_not_in_the_past(start, share, late, interval):
    offset = share * interval
    now = start + late
    first = first_slot(start, offset, now, interval)
    tolerance = 1e-6 * max(1.0, abs(now), abs(start))
    assert first >= now - tolerance and first >= start + offset - tolerance
    k = round((first - start - offset) / interval)  # a whole number of intervals: its phase
    assert k >= 0 and math.isclose(first, start + offset + k * interval, abs_tol=tolerance)
    if k:  # the slot before it had begun by now
        assert first - interval <= now + tolerance


@settings(max_examples=200, deadline=None)
@given(
    name=st.text(st.one_of(st.characters(), st.characters(categories=["Cs"])), max_size=40),
    interval=st.floats(min_value=1e-6, max_value=1e6, allow_nan=False),
)
def test_the_phase_offset_is_within_the_interval_and_stable(name, interval):
    offset = phase_offset_seconds(name, interval)
    assert 0 <= offset < interval
    assert offset == phase_offset_seconds(name, interval)
