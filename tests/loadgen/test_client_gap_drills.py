"""An engine incident behind a gateway is still the engines' incident: the overload drill
with a constant 50 ms gateway in front (client timings stored from the baseline on) pages
queue-growth, never client-gap, and triage still names overload."""

from __future__ import annotations

from dataclasses import replace

from alerts import AlertName, Cause
from collectors import canonical as c
from loadgen.scenario import load_scenario
from loadgen.virtual.collect import VirtualStore
from loadgen.virtual.drill import run_virtual_drill


def test_overload_behind_a_constant_gateway_is_not_a_client_gap():
    scenario = load_scenario("overload")
    phases = tuple(
        replace(p, gateway_delay_seconds=0.05) if p.name == "baseline" else p
        for p in scenario.phases
    )
    store = VirtualStore.memory()
    drill = run_virtual_drill(replace(scenario, phases=phases), store=store)
    fired = {page.alert.labels.get("alertname") for page in drill.pages}
    assert AlertName.QUEUE_GROWTH in fired and AlertName.CLIENT_GAP not in fired
    verdicts = [page.triage.verdict for page in drill.pages if page.triage is not None]
    assert verdicts and all(v == Cause.OVERLOAD.value for v in verdicts)
    # the gateway was there: its clients' first tokens were stored
    assert store.metrics.series(c.CLIENT_TTFT_SECONDS)
