"""The alert evaluator inside ``tailwatch collect`` (``alerts.in_collector``): the rules of
``alerts:`` over the daemon's own store, in a thread on the evaluator's tick schedule
(``Evaluator.run``), stopped with the daemon.

It starts once the collection's first round of scrapes is in the store
(``collectors.first_round``), so its first evaluation already sees every configured target
(no ``metric-absent`` for the start-up); if that takes longer than
:func:`first_round_timeout_seconds` (the database refuses the writes, say), it starts anyway
and says so. Each evaluation counts in the collector's own ``/metrics``
(``tailwatch_collector_alert_evaluations_total``), which is how a launcher (the alert
drill) reads the evaluator's progress: :func:`evaluations_of`.
"""

from __future__ import annotations

import asyncio
import logging
import threading

import httpx
import typer
from prometheus_client import CollectorRegistry, Counter
from prometheus_client.parser import text_string_to_metric_families

from alerts import Evaluator, run_ticks
from alerts.triage import configured_evaluator
from collectors.changes import ChangeDetector, DetectorOptions
from collectors.config import CollectorConfig
from collectors.first_round import FirstRound
from collectors.readers import metrics_reader
from collectors.store import Store
from tailwatch.config import TailwatchConfig

LOG = logging.getLogger("tailwatch.collect")

#: The evaluations counter on the collector's ``/metrics`` (exposed as ``..._total``).
EVALUATIONS = "tailwatch_collector_alert_evaluations"
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
        self,
        evaluator: Evaluator,
        interval_seconds: float,
        first_round_timeout_seconds: float,
        registry: CollectorRegistry | None = None,
    ) -> None:
        self.evaluator = evaluator
        self.interval_seconds = interval_seconds
        self.first_round_timeout_seconds = first_round_timeout_seconds
        self.evaluations = Counter(
            EVALUATIONS,
            "Alert evaluations the collector's evaluator has run (alerts.in_collector), "
            "failed ones included.",
            registry=registry if registry is not None else CollectorRegistry(),
        )

    def _evaluate(self, at_seconds: float) -> None:
        try:
            self.evaluator.evaluate_once(at_seconds)
        finally:
            self.evaluations.inc()

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
            # NOTE: Evaluator.run's schedule, with each evaluation counted on /metrics.
            running = asyncio.create_task(
                asyncio.to_thread(
                    run_ticks, self._evaluate, halt, self.interval_seconds, self.evaluator.clock
                )
            )
            try:
                await stop.wait()
            finally:
                halt.set()
                cycles = await running
        typer.echo(f"alert evaluator stopped after {cycles} evaluations", err=True)
        return cycles


def collector_evaluation(
    settings: TailwatchConfig, store: Store, registry: CollectorRegistry | None = None
) -> CollectorEvaluation | None:
    """The evaluation when ``alerts.in_collector`` is set (its notes and schedule echoed;
    its count in ``registry``, the collector's), else ``None``."""
    alerts = settings.alerts
    if alerts is None or not alerts.in_collector:
        return None
    evaluator = configured_evaluator(alerts, store, metrics_reader(settings.metrics, store))
    evaluation = CollectorEvaluation(
        evaluator,
        alerts.evaluation_interval_seconds,
        first_round_timeout_seconds(settings.collector),
        registry,
    )
    for note in alerts.notes:
        typer.echo(f"note: {note}", err=True)
    typer.echo(
        f"evaluating {len(alerts.rules)} alert rules every {evaluation.interval_seconds:g} s "
        "from the first round of scrapes (alerts.in_collector)",
        err=True,
    )
    return evaluation


def change_watch(settings: TailwatchConfig, store: Store) -> ChangeDetector:
    """The change detector the collector runs itself when no evaluator runs in it
    (``alerts.in_collector`` off): what changed is recorded while the metrics are collected,
    whoever evaluates the rules (or nobody), so the console's annotations and a later
    ``tailwatch alerts run`` or ``incident show`` see the same events. Its windows are scaled
    as the rules' would be; it reads through the configured metrics reader, as the
    evaluator's detector does (the store keeps an event once, so both may run)."""
    scale = settings.alerts.window_scale if settings.alerts is not None else 1.0
    reader = metrics_reader(settings.metrics, store)
    return ChangeDetector(reader, store, store, options=DetectorOptions().scaled(scale))


def evaluations_of(collector_url: str) -> int:
    """How many evaluations the evaluator inside the collector at ``collector_url`` has run,
    from its ``/metrics`` (0 without an evaluator); raises ``httpx.HTTPError`` when it does
    not answer."""
    text = httpx.get(f"{collector_url}/metrics", timeout=5).text
    return int(
        sum(
            sample.value
            for family in text_string_to_metric_families(text)
            if family.name == EVALUATIONS
            for sample in family.samples
            if sample.name == f"{EVALUATIONS}_total"
        )
    )
