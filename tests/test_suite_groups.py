"""The suite's grouping works: under ``make test`` (pytest-xdist, ``--dist loadgroup``) every
test's node id carries the group ``tests/conftest.py`` gave it, which is what the scheduler
sends to one worker. Without it the drills run once per worker and the tests that start
whole stacks run beside them (tests/conftest.py says why both matter); nothing else would
notice, since every test still passes."""

from __future__ import annotations

import os

import pytest


def test_a_test_under_loadgroup_carries_its_group_in_its_node_id(request) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER") is None or not request.config.getvalue("loadgroup"):
        pytest.skip("not run by `make test` (pytest-xdist with --dist loadgroup)")
    group = request.node.get_closest_marker("xdist_group")
    assert group is not None and group.args == ("test_suite_groups.py",)
    assert request.node.nodeid.endswith("@test_suite_groups.py"), request.node.nodeid
