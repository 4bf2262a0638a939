"""One alert drill per scenario for the whole test session: each scenario runs once,
compressed, with a real ``tailwatch collect`` (evaluating the rules itself) attached, and
both the scenario tests and the alert-drill tests read that one run."""

from __future__ import annotations

import tempfile
from pathlib import Path

from loadgen.scenario import load_scenario
from tailwatch.alert_drill import AlertDrillReport, clean_twin, run_alert_drill

_ROOT = Path(tempfile.mkdtemp(prefix="tailwatch-drills-"))
_REPORTS: dict[tuple[str, bool], AlertDrillReport] = {}


def drill_report(name: str, *, clean: bool = False) -> AlertDrillReport:
    """The compressed drill of scenario ``name`` (``clean``: its clean twin)."""
    key = (name, clean)
    if key not in _REPORTS:
        scenario = load_scenario(name)
        scenario = scenario.scaled(scenario.compressed_time_scale)
        if clean:
            scenario = clean_twin(scenario)
        _REPORTS[key] = run_alert_drill(scenario, _ROOT / scenario.name)
    return _REPORTS[key]
