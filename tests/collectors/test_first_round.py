"""The collection's first round (``collectors.first_round``) and the in-collector evaluator
that waits for it (``tailwatch.collect_evaluation``): with one target's first scrape held back
by the test, the round is not stored and nothing is evaluated; once it is let through, the
first evaluation sees every target and raises no ``metric-absent``. Driven by events: the
held scrape waits for the test, and no assertion depends on how long anything takes."""

from __future__ import annotations

import asyncio
import logging
import threading
import time

import pytest
from prometheus_client import CollectorRegistry

from alerts import Evaluator, MemoryAlertState
from alerts.rules import BUILTIN_RULES, metric_absent_rule
from alerts.sql import alert_state_of
from collectors import canonical as c
from collectors.canonical import CanonicalSample, Kind
from collectors.collector import Collector
from collectors.first_round import FirstRound
from collectors.scrape import Target
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader
from tailwatch.collect_evaluation import EVALUATIONS, CollectorEvaluation
from tests.collectors.waiting import WAIT_SECONDS, wait_until

TARGETS = (Target("fast", "http://127.0.0.1:1/metrics"), Target("slow", "http://127.0.0.1:2/metrics"))  # fmt: skip
#: A rule that reads ``requests_waiting``: metric absent checks that family.
WAITING_RULE = next(r for r in BUILTIN_RULES if r.name == "replica-imbalance-waiting")


@pytest.fixture
def backend() -> str:
    return "sqlite"  # NOTE: conftest's store, on SQLite only: what is under test is not the store


def record(target: str) -> ScrapeRecord:
    labels = ((c.LABEL_MODEL, "m"), (c.LABEL_TARGET, target))
    waiting = CanonicalSample(c.REQUESTS_WAITING, labels, 0.0, Kind.GAUGE)
    return ScrapeRecord(target, time.time(), (waiting,))


class HeldScraper:
    """Answers at once, except for the targets in ``held``, whose scrapes wait for
    :attr:`release` (set by the test)."""

    timeout_seconds = 1.0

    def __init__(self, held: set[str]) -> None:
        self.held = held
        self.release = asyncio.Event()

    async def scrape(self, target: Target) -> ScrapeRecord:
        if target.name in self.held:
            await self.release.wait()
        return record(target.name)


class RecordingEvaluator(Evaluator):
    """Notes, at each evaluation, which targets had a scrape in the store and which alerts
    the evaluation raised; :attr:`evaluated` is set by the first."""

    def __init__(self, reader, state, targets: tuple[str, ...]) -> None:
        super().__init__([WAITING_RULE, metric_absent_rule([WAITING_RULE])], reader, state)
        self.targets = targets
        self.seen: list[tuple[set[str], list[str]]] = []
        self.evaluated = threading.Event()

    def evaluate_once(self, now=None):
        stored = {t for t in self.targets if self.reader.scrapes(t)}
        result = super().evaluate_once(now)
        self.seen.append((stored, [a.name for a in result.alerts]))
        self.evaluated.set()
        return result


def test_the_round_is_its_first_targets_each_with_a_stored_scrape() -> None:
    first = FirstRound()
    first.on_stored([record("a")])  # a previous run's saved scrape: before the round began
    assert first.waiting == () and not first.stored.is_set()
    first.track(["a", "b", "c"])
    first.on_stored([record("a")])
    first.track(["a", "b", "d"])  # c left the targets file before its first scrape; d is new
    assert first.waiting == ("b",) and not first.stored.is_set()
    first.on_stored([record("b"), record("d")])
    assert first.waiting == () and first.stored.is_set()


def test_a_collection_with_no_targets_has_its_round_at_once() -> None:
    first = FirstRound()
    first.track([])
    assert first.stored.is_set()
    assert asyncio.run(first.wait(asyncio.Event(), 0.0))


def test_the_round_is_stored_only_once_every_target_has_a_scrape_in_the_store(store) -> None:
    async def scenario() -> None:
        scraper = HeldScraper({"slow"})
        collector = Collector(TARGETS, store, scraper, interval_seconds=0.05)  # type: ignore[arg-type]
        stop = asyncio.Event()
        running = asyncio.create_task(collector.run(stop))
        try:
            await wait_until(lambda: store.scrapes("fast"), "the fast target's first scrape")
            assert collector.first_round.waiting == ("slow",)
            assert not collector.first_round.stored.is_set()
            assert not await collector.first_round.wait(stop, 0.0)
            scraper.release.set()
            assert await collector.first_round.wait(stop, WAIT_SECONDS)
            assert store.scrapes("slow")
        finally:
            scraper.release.set()  # NOTE: a held scrape would hold the collector's stop
            stop.set()
            await asyncio.wait_for(running, WAIT_SECONDS)

    asyncio.run(scenario())


def test_the_collectors_evaluator_first_evaluates_once_every_target_is_stored(store) -> None:
    evaluator = RecordingEvaluator(store, alert_state_of(store), ("fast", "slow"))
    evaluation = CollectorEvaluation(evaluator, 0.05, first_round_timeout_seconds=WAIT_SECONDS)

    async def scenario() -> int:
        scraper = HeldScraper({"slow"})
        collector = Collector(TARGETS, store, scraper, interval_seconds=0.05)  # type: ignore[arg-type]
        stop = asyncio.Event()
        collecting = asyncio.create_task(collector.run(stop))
        evaluating = asyncio.create_task(evaluation.run(stop, collector.first_round))
        try:
            await wait_until(lambda: store.scrapes("fast"), "the fast target's first scrape")
            # NOTE: the slow target's first scrape is held: no round, so no evaluation yet
            assert not evaluator.evaluated.is_set()
            scraper.release.set()
            await wait_until(evaluator.evaluated.is_set, "the first evaluation")
        finally:
            scraper.release.set()  # NOTE: a held scrape would hold the collector's stop
            stop.set()
            await asyncio.wait_for(collecting, WAIT_SECONDS)
        return await asyncio.wait_for(evaluating, WAIT_SECONDS)

    assert asyncio.run(scenario()) == len(evaluator.seen) >= 1
    assert evaluator.seen[0] == ({"fast", "slow"}, [])  # both seen; no metric-absent


def test_without_its_round_in_time_the_evaluator_starts_anyway_and_says_why(caplog) -> None:
    evaluator = RecordingEvaluator(FakeMetricsReader([]), MemoryAlertState(), ("slow",))
    registry = CollectorRegistry()
    evaluation = CollectorEvaluation(evaluator, 0.05, 0.0, registry)
    first = FirstRound()
    first.track(["slow"])  # never stored

    async def scenario() -> int:
        stop = asyncio.Event()
        evaluating = asyncio.create_task(evaluation.run(stop, first))
        await wait_until(evaluator.evaluated.is_set, "the first evaluation")
        stop.set()
        return await asyncio.wait_for(evaluating, WAIT_SECONDS)

    with caplog.at_level(logging.WARNING, logger="tailwatch.collect"):
        cycles = asyncio.run(scenario())
        assert cycles >= 1
    # Each evaluation counts on the collector's /metrics (how a launcher reads the progress).
    assert registry.get_sample_value(f"{EVALUATIONS}_total") == cycles == len(evaluator.seen)
    (warning,) = [r.getMessage() for r in caplog.records if r.name == "tailwatch.collect"]
    assert "without a stored first scrape of slow after 0 s" in warning
    assert evaluator.seen[0] == (set(), ["metric-absent"])  # what waiting for the round avoids


def test_a_daemon_stopped_before_its_round_evaluates_nothing(capsys) -> None:
    evaluation = CollectorEvaluation(
        Evaluator([], FakeMetricsReader([]), MemoryAlertState()), 0.05, WAIT_SECONDS
    )
    first = FirstRound()
    first.track(["slow"])

    async def scenario() -> int:
        stop = asyncio.Event()
        evaluating = asyncio.create_task(evaluation.run(stop, first))
        stop.set()
        return await asyncio.wait_for(evaluating, WAIT_SECONDS)

    assert asyncio.run(scenario()) == 0
    assert "alert evaluator stopped after 0 evaluations" in capsys.readouterr().err
