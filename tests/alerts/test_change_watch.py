"""The change detector runs inside the evaluator (its ``watchers``): before the rules read at
every evaluation, so what changed at a tick is in the store for triage at that tick; a
watcher that fails is logged and the evaluation goes on; and the evaluator that ``tailwatch
collect`` and ``tailwatch alerts run`` build writes the store's change events."""

from __future__ import annotations

import logging
import math

from alerts import Evaluator, MemoryAlertState
from alerts.rules import load_alerts
from alerts.triage import configured_evaluator
from collectors.store import Store, sqlite_url
from tests.collectors.test_change_detector import Fleet


def test_watchers_run_first_and_one_that_fails_stops_nothing(caplog) -> None:
    fleet = Fleet("replica-0")
    fleet.scrape(2)
    calls: list[float] = []

    def broken(now: float) -> None:
        raise RuntimeError("store away")

    evaluator = Evaluator(
        [],
        fleet.metrics,
        MemoryAlertState(),
        clock=lambda: fleet.t,
        watchers=[broken, calls.append],
    )
    with caplog.at_level(logging.ERROR, logger="alerts.evaluator"):
        result = evaluator.evaluate_once(fleet.t)
    assert calls == [fleet.t] and result.errors == ()
    assert "store away" in caplog.text


def test_the_configured_evaluator_records_changes_in_the_store(tmp_path) -> None:
    store = Store(sqlite_url(tmp_path / "tw.db"))
    try:
        fleet = Fleet("replica-0", metrics=store)
        fleet.scrape(4)
        evaluator = configured_evaluator(load_alerts(None), store)
        evaluator.evaluate_once(fleet.t)
        fleet.replicas["replica-0"].set_knob("max_num_seqs", "4")
        at = fleet.scrape()
        evaluator.evaluate_once(fleet.t)
        (event,) = store.change_events(-math.inf, math.inf)
        assert (event.at_seconds, event.subject, event.before, event.after) == (
            at,
            "max_num_seqs",
            "32",
            "4",
        )
    finally:
        store.close()
