"""The alert evaluator inside ``tailwatch collect`` (``alerts.in_collector``): the rules of
``alerts:`` over the daemon's own store, in a thread on the evaluator's tick schedule
(``Evaluator.run``), stopped with the daemon.

It starts once the collection's first round of scrapes is in the store
(``collectors.first_round``), so its first evaluation already sees every configured target
(no ``metric-absent`` for the start-up); if that takes longer than
:func:`first_round_timeout_seconds` (the database refuses the writes, say), it starts anyway
and says so.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from alerts.evaluator import Evaluator
    from collectors.config import CollectorConfig
    from collectors.first_round import FirstRound
    from collectors.store import Store
    from tailwatch.config import TailwatchConfig

LOG = logging.getLogger("tailwatch.collect")

#: The shortest wait for the first round: a few seconds even at a drill's sub-second interval.
MIN_FIRST_ROUND_TIMEOUT_SECONDS = 10.0


def first_round_timeout_seconds(config: CollectorConfig) -> float:
    """How long the evaluator waits for the first round, in seconds: every target's first
    slot falls within one scrape interval of the start and its scrape ends within the scrape
    timeout, so three intervals plus the timeout leave room for the write; at least
    :data:`MIN_FIRST_ROUND_TIMEOUT_SECONDS`."""
    bound = 3 * config.scrape_interval_seconds + config.scrape_timeout_seconds
    return max(MIN_FIRST_ROUND_TIMEOUT_SECONDS, bound)


class CollectorEvaluation:
    """Runs ``evaluator`` every ``interval_seconds`` in a thread from the first round's
    end (or ``first_round_timeout_seconds`` after the start) until the daemon stops."""

    def __init__(
        self, evaluator: Evaluator, interval_seconds: float, first_round_timeout_seconds: float
    ) -> None:
        self.evaluator = evaluator
        self.interval_seconds = interval_seconds
        self.first_round_timeout_seconds = first_round_timeout_seconds

    async def run(self, stop: asyncio.Event, first_round: FirstRound) -> int:
        """Wait for ``first_round`` (bounded), then evaluate until ``stop`` is set; returns
        the number of evaluations (0 when stopped before the first)."""
        timeout = self.first_round_timeout_seconds
        if not await first_round.wait(stop, timeout) and not stop.is_set():
            LOG.warning(
                "alert evaluation starts without a stored first scrape of %s after %g s: "
                "its first evaluations may see those targets' metrics as absent",
                ", ".join(first_round.waiting), timeout,
            )  # fmt: skip
        cycles = 0
        if not stop.is_set():
            halt = threading.Event()
            running = asyncio.create_task(
                asyncio.to_thread(self.evaluator.run, halt, self.interval_seconds)
            )
            try:
                await stop.wait()
            finally:
                halt.set()
                cycles = await running
        typer.echo(f"alert evaluator stopped after {cycles} evaluations", err=True)
        return cycles


def collector_evaluation(settings: TailwatchConfig, store: Store) -> CollectorEvaluation | None:
    """The evaluation when ``alerts.in_collector`` is set (its notes and schedule echoed),
    else ``None``."""
    from alerts.explain import configured_evaluator

    alerts = settings.alerts
    if alerts is None or not alerts.in_collector:
        return None
    evaluator = configured_evaluator(alerts, store)
    evaluation = CollectorEvaluation(
        evaluator,
        alerts.evaluation_interval_seconds,
        first_round_timeout_seconds(settings.collector),
    )
    for note in alerts.notes:
        typer.echo(f"note: {note}", err=True)
    typer.echo(
        f"evaluating {len(alerts.rules)} alert rules every {evaluation.interval_seconds:g} s "
        "from the first round of scrapes (alerts.in_collector)",
        err=True,
    )
    return evaluation
