"""``tailwatch.processes``, the one launcher: a child in its own process group, health-gated,
its log's last ``error:`` line named when it dies first, and stopped with SIGTERM to its
group (SIGKILL after the grace period), leaving nothing behind."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from tailwatch.processes import Stack, StartError, spawn, stop
from tests.up.test_up import _gone

SLEEPER = [sys.executable, "-c", "import time; time.sleep(60)"]
#: Ignores SIGTERM, so only the SIGKILL after the grace period ends it.
STUBBORN = [
    sys.executable,
    "-c",
    "import signal, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "print('ready', flush=True); time.sleep(60)",
]


def test_a_stack_stops_its_children_in_their_own_groups(tmp_path: Path) -> None:
    with Stack(tmp_path) as stack:
        child = stack.start("sleeper", SLEEPER, os.environ, lambda: True)
        assert os.getpgid(child.pid) == child.pid != os.getpgid(0)
    assert child.process.returncode is not None and _gone(child.pid)
    assert (tmp_path / "sleeper.log").exists()


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period(tmp_path: Path) -> None:
    child = spawn("stubborn", STUBBORN, tmp_path, os.environ)
    log = tmp_path / "stubborn.log"
    deadline = time.monotonic() + 60
    while "ready" not in log.read_text():  # its SIGTERM handler is set
        assert child.process.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    assert stop(child, timeout_seconds=0.5) == "stubborn: did not stop in 0 s, killed"
    assert _gone(child.pid)


def test_a_child_that_exits_before_it_is_healthy_names_its_error(tmp_path: Path) -> None:
    failing = [sys.executable, "-c", "print('error: port 1 is taken'); raise SystemExit(2)"]
    with Stack(tmp_path) as stack, pytest.raises(StartError) as raised:
        stack.start("engine-0", failing, os.environ, lambda: False)
    assert "the engine-0 exited with code 2: error: port 1 is taken" in str(raised.value)
