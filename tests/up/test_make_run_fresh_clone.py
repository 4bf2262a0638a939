"""A newcomer's first commands, end to end: ``git clone`` the repository, ``make run`` in the
clone (on free ports, with a time limit), the console answers, the demo's first drill raises
an incident, and Ctrl-C (SIGINT to make's process group) leaves no process behind.

What is real: the clone (of the checkout's committed HEAD: uncommitted changes are not in
it), the Makefile's ``run`` recipe and its install steps (``pip install --upgrade pip``,
``torch``, ``-e '.[test]'``, the stamp), the editable install of the clone into its own
``.venv`` (the test checks that the stack imports the clone's code), ``tailwatch up --demo``
with its engine, collector + evaluator and console, and the incident in the clone's store.

What is shortcut, and why: a fresh ``.venv`` would download and install torch and every
dependency (minutes, and a network or package index the suite may not have). So before
``make run`` the test creates the clone's ``.venv`` itself (``python -m venv``, which the
Makefile then reuses) with a ``.pth`` file naming this interpreter's site-packages, and
removes the venv's bundled setuptools so the newer one there is used. pip runs with
``PIP_NO_INDEX=1`` (no index, no network: a dependency that is not already satisfied fails
the install instead of being fetched) and ``PIP_NO_BUILD_ISOLATION=0`` (the build backend is
the one present). The test checks that pip installed nothing into the clone's venv but the
clone itself. The demo's cycle is shortened with ``TAILWATCH_DEMO_CYCLE_SECONDS`` (10 s
baseline, 20 s perturbation, 10 s recovery instead of 60/45/45) and one replica is started
(``make run ARGS=...``). The first baseline lasts until the SLO calibration has proposed (the
clone's store is new and has no ``slos:``; 90 s at most) and the stack has restarted its
collector, then 10 s more before the first drill, whose incident comes within about two minutes; its alert clock
(``window_scale`` 0.05) is the demo's own.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import httpx
import pytest

from tests.services import free_port, missing_service
from tests.up.test_up import STOP_TIMEOUT_SECONDS, _gone

pytestmark = pytest.mark.timeout(600)
ROOT = Path(__file__).resolve().parents[2]
#: baseline, perturbation, recovery seconds of each demo cycle in this test.
CYCLE = "10,20,10"
#: Bounded waits, generous for a busy 2-core machine.
INSTALL_AND_START_TIMEOUT_SECONDS = 300
INCIDENT_TIMEOUT_SECONDS = 240
ANNOUNCE = re.compile(r"drill 1 '(?P<drill>[\w-]+)'.*watch for the (?P<alert>[\w-]+) alert")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        missing_service(f"no {name} on PATH: the fresh-clone test runs `git clone` and `make run`")
    return path  # type: ignore[return-value]


def _clone(tmp_path: Path) -> Path:
    git = _tool("git")
    inside = subprocess.run(
        [git, "-C", str(ROOT), "rev-parse", "--show-toplevel"], capture_output=True, text=True
    )
    if inside.returncode != 0:
        missing_service(f"{ROOT} is not a git checkout: nothing to clone ({inside.stderr.strip()})")
    clone = tmp_path / "tailwatch"
    subprocess.run([git, "clone", "--quiet", str(ROOT), str(clone)], check=True, timeout=120)
    return clone


def _prepare_venv(clone: Path) -> Path:
    """The shortcut (see the module docstring): the clone's .venv sees this interpreter's
    packages, so the Makefile's install steps find every dependency already satisfied."""
    venv = clone / ".venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=180)
    python = venv / "bin" / "python"
    ours = {*site.getsitepackages(), sysconfig.get_paths()["purelib"]}
    if site.ENABLE_USER_SITE:
        ours.add(site.getusersitepackages())
    theirs = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            text=True,
        ).strip()
    )
    (theirs / "zz-tailwatch-test-parent.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    # NOTE: Python 3.11's ensurepip bundles setuptools 65, older than what torch and our
    # build need; without it the parent's setuptools is used (3.12+ bundles none: a no-op).
    subprocess.run(
        [str(python), "-m", "pip", "uninstall", "--quiet", "--yes", "setuptools"],
        check=True, timeout=120, env=_env(),
    )  # fmt: skip
    return theirs


def _env() -> dict[str, str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "OMP_NUM_THREADS": "1"}
    # NOTE: the clone's code must be what runs, not the checkout's (a PYTHONPATH would win).
    for name in ("PYTHONPATH", "TAILWATCH_DB_URL", "TAILWATCH_ADMIN_TOKEN"):
        env.pop(name, None)
    env |= {"PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0"}
    env["TAILWATCH_DEMO_CYCLE_SECONDS"] = CYCLE
    return env


def _wait(what: str, check, timeout_seconds: float, make: subprocess.Popen, log: Path):
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if make.poll() is not None:
            pytest.fail(f"make run exited ({make.returncode}) before {what}:\n{log.read_text()}")
        result = check()
        if result:
            return result
        time.sleep(1.0)
    pytest.fail(f"no {what} within {timeout_seconds} s:\n{log.read_text()}")


def test_make_run_in_a_fresh_clone_answers_and_shows_an_incident(tmp_path: Path) -> None:
    make_bin = _tool("make")
    clone = _clone(tmp_path)
    site_packages = _prepare_venv(clone)
    ports = [free_port() for _ in range(3)]
    args = f"--replicas 1 --engine-port {ports[0]} --collector-port {ports[1]} "
    args += f"--console-port {ports[2]}"
    log = tmp_path / "make-run.log"
    with log.open("w") as out:
        make = subprocess.Popen(
            [make_bin, "run", f"ARGS={args}"],
            cwd=clone, env=_env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    state_path = clone / ".tailwatch" / "up.json"
    state: dict = {}
    try:
        state = _wait(
            "stack up",
            lambda: state_path.exists() and json.loads(state_path.read_text()),
            INSTALL_AND_START_TIMEOUT_SECONDS, make, log,
        )  # fmt: skip
        _check_install(clone, site_packages, state["pids"], log)
        console = state["urls"]["console"]
        assert console == f"http://127.0.0.1:{ports[2]}"
        assert httpx.get(f"{console}/_stcore/health", timeout=10).text == "ok"
        announced = _wait(
            "drill announcement", lambda: ANNOUNCE.search(log.read_text()), 120, make, log
        )
        assert announced["drill"] == "overload", log.read_text()
        incidents = _wait(
            f"{announced['alert']} incident",
            lambda: _incidents(clone, state["database_url"], announced["alert"]),
            INCIDENT_TIMEOUT_SECONDS, make, log,
        )  # fmt: skip
        assert incidents[0]["severity"] == "page", incidents
    finally:
        # Ctrl-C in a terminal: SIGINT to the foreground group (make and `tailwatch up`).
        with contextlib.suppress(ProcessLookupError):  # make may have exited already
            os.killpg(make.pid, signal.SIGINT)
        try:
            make.wait(timeout=STOP_TIMEOUT_SECONDS)
        except subprocess.TimeoutExpired:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
            pytest.fail(f"make run did not stop in {STOP_TIMEOUT_SECONDS} s:\n{log.read_text()}")
    output = log.read_text()
    assert "stopping ..." in output, output
    assert _gone(make.pid), output  # make, `tailwatch up` (its group) ...
    pids = state.get("pids", {})
    assert sorted(pids) == ["collector", "console", "engine-0"], pids
    assert all(_gone(pid) for pid in pids.values()), (pids, output)  # ... and every child
    assert not state_path.exists()


def _check_install(clone: Path, site_packages: Path, pids: dict, log: Path) -> None:
    """pip installed nothing but the clone itself, the clone's venv imports the clone's code,
    and the stack's processes run on the clone's venv."""
    installed = {p.name.split("-")[0].lower() for p in site_packages.glob("*.dist-info")}
    assert installed <= {"pip", "tailwatch"}, (installed, log.read_text())
    assert "tailwatch" in installed
    # NOTE: from /, where the current directory cannot supply the packages.
    code = "import tailwatch, engine; print(tailwatch.__file__); print(engine.__file__)"
    where = subprocess.check_output(
        [str(clone / ".venv" / "bin" / "python"), "-c", code],
        cwd=clone.anchor, env=_env(), text=True,
    )  # fmt: skip
    assert all(Path(line).is_relative_to(clone) for line in where.split()), where
    for pid in pids.values():
        interpreter = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[0].decode()
        assert Path(interpreter).is_relative_to(clone / ".venv"), (pid, interpreter)


def _incidents(clone: Path, db_url: str, alertname: str) -> list[dict]:
    """The clone's own `tailwatch incident list --json`, filtered to ``alertname``."""
    result = subprocess.run(
        [str(clone / ".venv" / "bin" / "tailwatch"), "incident", "list", "--json", "--db", db_url],
        cwd=clone, env=_env(), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return [i for i in json.loads(result.stdout) if i["alertname"] == alertname]
