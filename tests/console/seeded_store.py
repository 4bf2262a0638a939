"""A small store seeded by a real run: two bundled engines traced into the collector's OTLP
receiver and scraped by the collector while the load generator sends a few seconds of
traffic from two tenants (one whose name is HTML and script), then the alert evaluator over
that store with one tail-latency rule tight enough to fire, and resolve once traffic stops.

Everything the console shows comes from these rows, so the tests can compare its figures
with ``slo/`` computed on the same data.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, replace
from pathlib import Path

from alerts.sql import alert_state_of

#: A tenant label that is markup: the console must show it as text.
HOSTILE_TENANT = '<script>alert("tw")</script><b>bold</b>'
TENANTS = ("acme", HOSTILE_TENANT)
ENGINE = {"model": "tiny", "max_model_len": 256, "num_gpu_blocks": 128}
WORKLOAD = {
    "rate": 6, "duration": 3.0, "arrivals": "constant", "prompt_tokens": 24,
    "output_tokens": 6, "seed": 13, "tenants": {t: 1 for t in TENANTS},
}  # fmt: skip
SCRAPE_EVERY_SECONDS = 0.5
RULE_WINDOW_SECONDS = 2.0
SLO_YAML = """\
slos:
  - name: chat-ttft
    description: first token within half a second
    indicator: {latency: {metric: ttft, threshold_seconds: 0.5}}
    target: 0.99
    period_days: 28
  - name: availability
    indicator: {errors: {source: requests}}
    target: 0.999
    period_days: 30
"""


@dataclass(frozen=True)
class Seeded:
    """``url`` of the SQLite store, ``config`` a tailwatch.yaml with its SLOs, the traffic's
    ``[start, end]`` (Unix seconds), the id of the stored incident that fired and resolved and
    its alert's fingerprint, and how many requests were sent."""

    url: str
    config: Path
    start: float
    end: float
    incident_id: int
    fingerprint: str
    num_requests: int

    @property
    def until(self) -> float:
        """A time just after the run: pages pinned to it show the whole run."""
        return self.end + 15.0


def seed(folder: Path) -> Seeded:
    import time

    from alerts import Evaluator
    from alerts.rules import BUILTIN_RULES
    from collectors.collector import Collector
    from collectors.scrape import Scraper, Target
    from collectors.store import Store, sqlite_url
    from loadgen import build_schedule, parse_workload, run_schedule
    from loadgen.replicas import bundled_replicas
    from tests.collectors.test_traces import receiver

    url = sqlite_url(folder / "console.db")
    config = folder / "tailwatch.yaml"
    config.write_text(SLO_YAML, encoding="utf-8")
    store = Store(url)
    workload = parse_workload(WORKLOAD)
    with (
        receiver(store) as (collector_url, _writer),
        bundled_replicas(2, ENGINE, otlp_endpoint=collector_url + "/v1/traces") as urls,
    ):
        targets = [Target(f"replica-{n}", f"{u}/metrics") for n, u in zip("ab", urls, strict=True)]

        async def scrape_while_loading():
            async with Scraper(timeout_seconds=10) as scraper:
                collector = Collector(targets, store, scraper)
                await collector.run_once()
                load = asyncio.ensure_future(run_schedule(urls, build_schedule([workload])))
                while not load.done():
                    await asyncio.sleep(SCRAPE_EVERY_SECONDS)
                    await collector.run_once()
                await asyncio.sleep(SCRAPE_EVERY_SECONDS)
                await collector.run_once()
                return load.result()

        start = time.time()
        state = asyncio.run(scrape_while_loading())
        end = time.time()
    # NOTE: p99 TTFT above a microsecond always holds under traffic, so the tail-latency rule
    # (for: 0) fires when evaluated at mid-run (once that data is in), and resolves once its
    # short window holds no traffic: evaluated again after that window has passed on the real
    # clock, so every transition is in the past when the console reads it. A few seconds of
    # traffic are ~18 requests: the rule's 100-observation floor is lowered to one, and it
    # resolves at once (no keep_firing_for). Fixed lines only (rise_min None): a few seconds
    # of traffic have no past to compare with.
    rule = replace(
        BUILTIN_RULES[0], threshold_seconds=1e-6, median_max_seconds=60.0, for_seconds=0.0,
        rise_min=None, median_rise_max=None,
        window_seconds=RULE_WINDOW_SECONDS, min_observations=1.0, keep_firing_for_seconds=0.0,
    )  # fmt: skip
    evaluator = Evaluator([rule], store, alert_state_of(store))
    evaluator.evaluate_once(start + (end - start) / 2)  # mid-run: the window holds traffic
    time.sleep(max(0.0, end + RULE_WINDOW_SECONDS + 1.0 - time.time()))
    evaluator.evaluate_once(time.time())
    history = alert_state_of(store).history(0, math.inf)
    fired = [t for t in history if t.to_state.value == "firing"]
    resolved = [t for t in history if t.to_state.value == "resolved"]
    assert fired and resolved, f"the incident did not fire and resolve: {history}"
    (incident,) = alert_state_of(store).incidents()
    assert incident.fingerprint == fired[0].fingerprint and not incident.is_open
    from tests.console.lab_seed import seed_lab

    seed_lab(store, time.time())  # the knob lab's sweeps and replay
    store.close()
    return Seeded(url, config, start, end, incident.id, incident.fingerprint, len(state.results))
