"""How the suite runs in parallel (``make test``: ``pytest -n 3 --dist loadgroup``).

Each test file is one xdist group, so a file's module- and session-scoped fixtures are
built once, on one worker. The alert drills are one group across the two files that read
them (``tests/loadgen/drill_runs.py`` runs each scenario once per process: split over two
workers, every drill would run twice), but for the feature scenarios' virtual drills, a
group of their own (each scenario's tests still together). The tests that start whole stacks of processes
(``tailwatch up``, ``make run`` in a fresh clone, the console in Chromium) join that group:
on a 2-core machine a drill's replicas beside a whole stack on the other worker starved
the drill's collector (every scrape of all four replicas timed out for 5 s at once) and
paged target-down in a clean run. In one group they run one after another, beside the
other workers' single-process tests.
"""

from __future__ import annotations

from pathlib import Path

import pytest

_ROOT = Path(__file__).resolve().parent
#: The files that share the session's drill runs.
DRILL_FILES = frozenset({"loadgen/test_alert_drills.py", "loadgen/test_scenarios.py"})
#: The files whose tests start several processes each (run in the drills' group).
STACK_FILES = frozenset(
    {
        "up/test_up.py",
        "up/test_up_demo.py",
        "up/test_up_incident.py",
        "up/test_make_run_fresh_clone.py",
        "console/test_browser.py",
    }
)


#: The scenarios of the features production fleets run (issue 26): virtual drills only.
FEATURE_SCENARIOS = frozenset(
    {
        "adapter-thrash",
        "cold-start",
        "structured-truncation",
        "output-length-shift",
        "noisy-tenant",
        "busy-idle-gpu",
        "spec-not-paying",
        "client-gap",
    }
)


# NOTE: tryfirst: pytest-xdist's worker reads the markers in a hook of its own (it appends
# "@<group>" to each node id, which is what loadgroup schedules by), so they must be there
# first whatever order the plugins registered in (tests/test_suite_groups.py checks the ids).
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        path = Path(str(item.path)).resolve()
        name = path.relative_to(_ROOT).as_posix() if path.is_relative_to(_ROOT) else str(path)
        group = "drills" if name in DRILL_FILES | STACK_FILES else name
        # NOTE: a feature scenario's virtual drills (all of one scenario's tests together, so
        # its run is still made once) are a group of their own: on virtual clocks they need no
        # quiet beside the stacks, and in the drills' group they made it the suite's longest
        if name in DRILL_FILES and _scenario(item) in FEATURE_SCENARIOS:
            group = "feature-drills"
        item.add_marker(pytest.mark.xdist_group(group))


def _scenario(item: pytest.Item) -> str | None:
    callspec = getattr(item, "callspec", None)
    return None if callspec is None else callspec.params.get("name")
