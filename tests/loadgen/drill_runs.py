"""One drill per scenario for the whole test session, on the virtual fleet: each scenario
(and its clean twin) runs once, deterministically, with the real evaluator and triage at
virtual times, and both the scenario tests and the alert-drill tests read that one run."""

from __future__ import annotations

from loadgen.drill_report import AlertDrillReport, clean_twin
from loadgen.scenario import load_scenario
from loadgen.virtual.drill import VirtualDrill, run_virtual_drill

_RUNS: dict[tuple[str, bool], VirtualDrill] = {}


def virtual_drill(name: str, *, clean: bool = False) -> VirtualDrill:
    """The virtual drill of scenario ``name`` (``clean``: its clean twin), run once."""
    key = (name, clean)
    if key not in _RUNS:
        scenario = load_scenario(name)
        if clean:
            scenario = clean_twin(scenario)
        _RUNS[key] = run_virtual_drill(scenario)
    return _RUNS[key]


def drill_report(name: str, *, clean: bool = False) -> AlertDrillReport:
    """The drill report of scenario ``name`` on the virtual fleet."""
    return virtual_drill(name, clean=clean).report
