"""The built-in rules and triage on the push-down reader: an overload planted in a vLLM fleet's
history, loaded into a backfilled Prometheus 2.42 and into the fake, must fire the same alerts
with the same cause ranked first on both (issue 24, item 2). The fake reads every window with
the server's semantics (``prometheus-2``), as the reader contract test does."""

from __future__ import annotations

import time

import pytest

from alerts import Evaluator, MemoryAlertState
from alerts.rules import BUILTIN_RULES
from alerts.triage import triage_explainer
from collectors.prometheus import PrometheusReader
from tests.alerts.eval_data import INTERVAL, Conditions, build
from tests.collectors.metrics_servers import backfilled_prometheus
from tests.collectors.vllm_history import CapturingFake, vllm_points

#: Inside the reader's 7-day series lookback, hour-aligned, wholly in the past.
START = float((int(time.time()) // 3600 - 30) * 3600)
PERTURB = START + 3900.0  # after an hour: the baselines need one
RECOVER = PERTURB + 1200.0
HOURS = (RECOVER + 300.0 - START) / 3600


def overload(t: float, replica: int) -> Conditions:
    """Arrivals 2.5x, and every replica queues: waiting 10, queue time 80% of a TTFT four
    times longer."""
    if PERTURB < t <= RECOVER:
        return Conditions(requests=250, waiting=10.0, queue_share=0.8, ttft=((0.32, 1.0),))
    return Conditions()


class AsServer:
    """The fake, reading every window with the server's semantics."""

    def __init__(self, fake, semantics) -> None:
        self.fake, self.semantics = fake, semantics

    def __getattr__(self, name: str):
        method = getattr(self.fake, name)
        if name.endswith(("_window", "_series", "_by_target")) and name != "scrapes_by_target":
            return lambda *a, **k: method(*a, **{**k, "semantics": self.semantics})
        return method


def _fired(reader, times) -> dict[str, tuple[str, str]]:
    """Each alert (by fingerprint labels) that fired, with triage's cause and scope when it
    first fired."""
    causes: dict[str, tuple[str, str]] = {}

    def explain(alert, now):  # record, then answer as the evaluator's explainer
        got = inner(alert, now)
        key = ",".join(f"{k}={v}" for k, v in sorted(alert.labels.items()))
        causes.setdefault(key, (got.cause, got.scope))
        return got

    state = MemoryAlertState()
    inner = triage_explainer(reader, None, state, BUILTIN_RULES)
    evaluator = Evaluator(BUILTIN_RULES, reader, state, explain=explain)
    for t in times:
        evaluator.evaluate_once(t)
    return causes


@pytest.fixture(scope="module")
def readers(tmp_path_factory):
    fake = CapturingFake()
    build(overload, hours=HOURS, start=START, reader=fake)
    points, types = vllm_points(fake.records)
    directory = tmp_path_factory.mktemp("prometheus-overload")
    with (
        backfilled_prometheus(directory, points, types) as server,
        PrometheusReader(server.url) as reader,
    ):
        yield AsServer(fake, reader.semantics), reader


def test_the_builtin_rules_and_triage_find_the_same_cause_on_prometheus(readers) -> None:
    fake, server = readers
    times = [PERTURB - 120 + k * 4 * INTERVAL for k in range(int(1500 / (4 * INTERVAL)))]
    on_fake = _fired(fake, times)
    on_server = _fired(server, times)
    assert on_fake, "the planted overload fired nothing on the fake"
    assert on_server == on_fake
    assert any(cause == "overload" for cause, _ in on_fake.values()), on_fake
