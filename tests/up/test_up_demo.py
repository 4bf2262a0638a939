"""`tailwatch up --demo`: each cycle is a bounded scenario whose perturbation is a shipped
scenario's and whose recovery and next baseline undo it."""

from __future__ import annotations

import pytest

from loadgen.scenario import load_scenario
from tailwatch.up_demo import INCIDENTS, cycle_scenario, rotation

NORMAL = {"step_delay_seconds": 0.0, "max_num_seqs": 256}


@pytest.mark.parametrize("incident", INCIDENTS, ids=lambda i: i.name)
def test_each_cycle_perturbs_then_restores_and_names_the_shipped_alert(incident) -> None:
    scenario = cycle_scenario(incident, 3, NORMAL)
    baseline, perturbation, recovery = scenario.phases
    assert [p.name for p in scenario.phases] == ["baseline", "perturbation", "recovery"]
    # The baseline restores every replica, so a cycle cut short never leaks into the next.
    assert {(c.replica, dict(c.patch)["step_delay_seconds"]) for c in baseline.admin} == {
        (0, 0.0),
        (1, 0.0),
        (2, 0.0),
    }
    shipped = load_scenario(incident.name)
    assert scenario.expects.alert == shipped.expects.alert
    assert scenario.expects.signal == shipped.expects.signal
    assert scenario.expects.triage_cause == shipped.expects.triage_cause
    # Three tenants in every phase; the traffic stays bounded (a finite schedule).
    for phase in scenario.phases:
        assert {name for name, _ in phase.workloads[0].tenants} == {"acme", "globex", "initech"}
    before, during = baseline.workloads[0], perturbation.workloads[0]
    if incident.name == "overload":
        assert during.arrivals.rate_per_second > 10 * before.arrivals.rate_per_second
        assert recovery.workloads[0].arrivals.rate_per_second == before.arrivals.rate_per_second
        assert all(dict(c.patch)["max_num_seqs"] == 4 for c in perturbation.admin)
    if incident.name == "slow-replica":
        assert [(c.replica, dict(c.patch)) for c in perturbation.admin] == [
            (1, {"step_delay_seconds": 0.08})
        ]
    if incident.name == "prefix-break":
        assert during.prefix.salt_per_request and not recovery.workloads[0].prefix.salt_per_request


def test_fewer_than_three_replicas_skip_the_slow_replica_drill() -> None:
    assert [i.name for i in rotation(2)] == ["overload", "prefix-break"]
    assert [i.name for i in rotation(3)] == ["overload", "slow-replica", "prefix-break"]
