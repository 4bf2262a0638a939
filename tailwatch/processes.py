"""Every child process Tailwatch starts, started one way: ``tailwatch up``'s engines,
collector and console, and the alert drill's collector (``tailwatch.alert_drill``).

Each child runs in a process group of its own, logging to ``<log_dir>/<name>.log``, is gated
on its HTTP health (a URL answering 200, or the collector's ``GET /targets`` showing its
targets ``up``), and is stopped with SIGTERM to its whole group (SIGKILL after a grace
period); :class:`Stack` holds them in start order, stops them in dependency order and
restarts one in its place. :func:`collector_config` is the one ``tailwatch.yaml`` mapping a
launched collector reads.

NOTE: a group of its own, not the supervisor's: a terminal sends Ctrl-C to its whole
foreground group, and the collector would then stop while the engines still flushed their
last spans to it. Only the supervisor gets the signal; it stops the children in order.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

#: How long one child may take to answer its health URL (a cold torch import on a busy
#: machine takes most of it).
START_TIMEOUT_SECONDS = 180.0
#: How long a child gets to drain after SIGTERM before its group is killed.
STOP_TIMEOUT_SECONDS = 30.0
#: The children named ``engine-0``, ``engine-1``, ...
ENGINE_PREFIX = "engine-"


class StartError(RuntimeError):
    """A child exited or did not become healthy in time; the message names it and its log."""


@dataclass
class Child:
    name: str
    process: subprocess.Popen
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid


def tailwatch_command(*args: str) -> list[str]:
    """``tailwatch ARGS...`` on this interpreter (the checkout or venv running now)."""
    return [sys.executable, "-m", "tailwatch.cli", *args]


def spawn(
    name: str,
    command: list[str],
    log_dir: Path,
    env: Mapping[str, str],
    *,
    append: bool = False,
    cwd: Path | None = None,
) -> Child:
    """Start ``command`` in a new process group, stdout and stderr to ``<log_dir>/<name>.log``
    (appended to with ``append``: a restarted child keeps its first run's log)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    log_path = log_dir / f"{name}.log"
    # NOTE: closed here once the child holds its own handle.
    with log_path.open("a" if append else "w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=cwd,
            process_group=0,
        )
    return Child(name, process, log_path)


def wait_healthy(
    child: Child,
    is_healthy: Callable[[], bool],
    timeout_seconds: float = START_TIMEOUT_SECONDS,
) -> None:
    """Return once ``is_healthy()`` is true; raise :class:`StartError` (with the child's last
    ``error:`` line, read back from its log) if it exits first or the timeout passes."""
    deadline = time.monotonic() + timeout_seconds
    while time.monotonic() < deadline:
        if child.process.poll() is not None:
            raise StartError(
                f"the {child.name} exited with code {child.process.returncode}: "
                f"{last_error(child.log_path)} (log: {child.log_path})"
            )
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError):
            if is_healthy():
                return
        time.sleep(0.3)
    raise StartError(
        f"the {child.name} was not healthy within {timeout_seconds:.0f} s (log: {child.log_path})"
    )


def answers_200(url: str) -> Callable[[], bool]:
    return lambda: httpx.get(url, timeout=2).status_code == 200


def targets_up(collector_url: str, count: int) -> Callable[[], bool]:
    """Whether the collector at ``collector_url`` reports at least ``count`` targets ``up``
    (``GET /targets``; with ``count`` 0, whether it answers)."""

    def check() -> bool:
        body = httpx.get(f"{collector_url}/targets", timeout=2).json()
        return sum(t["health"] == "up" for t in body["targets"]) >= count

    return check


def last_error(log_path: Path) -> str:
    """The log's last ``error:`` line, else its last non-empty line."""
    try:
        lines = [line for line in log_path.read_text("utf-8", "replace").splitlines() if line]
    except OSError:
        return "no log"
    errors = [line for line in lines if line.startswith("error:")]
    return (errors or lines or ["no output"])[-1].strip()


def stop(child: Child, timeout_seconds: float = STOP_TIMEOUT_SECONDS) -> str:
    """SIGTERM to the child's group, wait, then SIGKILL the group; the group is killed even
    when the child itself exited, so nothing it started outlives it. A Ctrl-C while waiting
    (where the caller has not set it aside) kills the group at once. Returns a sentence."""
    process = child.process
    if process.poll() is None:
        _signal_group(child.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            _signal_group(child.pid, signal.SIGKILL)
            process.wait()
            return f"{child.name}: did not stop in {timeout_seconds:.0f} s, killed"
        except KeyboardInterrupt:
            _signal_group(child.pid, signal.SIGKILL)
            process.wait()
            return f"{child.name}: killed (a second Ctrl-C)"
        verb = "stopped" if process.returncode in (0, -signal.SIGTERM) else "exited"
        outcome = f"{verb} (code {process.returncode})"
    else:
        outcome = f"had already exited (code {process.returncode})"
    _signal_group(child.pid, signal.SIGKILL)
    return f"{child.name}: {outcome}"


def _signal_group(pgid: int, sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def port_is_free(host: str, port: int) -> bool:
    """Whether ``host:port`` can be bound now (SO_REUSEADDR, as the servers bind)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_port(host: str = "127.0.0.1") -> int:
    """A port nothing listens on now (the kernel's pick)."""
    with socket.socket() as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


class Stack:
    """The running children, in start order; :meth:`stop_all` stops them in reverse, except
    that the engines stop before the collector (:meth:`stop_order`). As a context manager it
    stops them all on the way out, saying nothing."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []

    def __enter__(self) -> Stack:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop_all(lambda line: None)

    def start(
        self,
        name: str,
        command: list[str],
        env: Mapping[str, str],
        healthy: Callable[[], bool],
        *,
        cwd: Path | None = None,
    ) -> Child:
        """Start ``command`` as ``name`` and wait until ``healthy()``.

        NOTE: the child is in :attr:`children` before its health wait, so a signal during
        the wait still stops it."""
        child = spawn(name, command, self.log_dir, env, cwd=cwd)
        self.children.append(child)
        wait_healthy(child, healthy)
        return child

    def restart(
        self,
        name: str,
        command: list[str],
        env: Mapping[str, str],
        healthy: Callable[[], bool],
        say: Callable[[str], None],
    ) -> Child:
        """Stop the child ``name`` and start ``command`` in its place (its log appended
        to), health-gated; it keeps its place in the stop order."""
        index = next(i for i, child in enumerate(self.children) if child.name == name)
        say(stop(self.children[index]))
        child = spawn(name, command, self.log_dir, env, append=True)
        self.children[index] = child
        wait_healthy(child, healthy)
        return child

    def exited(self) -> Child | None:
        return next((c for c in self.children if c.process.poll() is not None), None)

    def watch(
        self, say: Callable[[str], None], each_tick: Callable[[], None] = lambda: None
    ) -> int:
        """Until a child exits: call ``each_tick`` every half second, then say which child
        exited, with its code and log, and return 1 (the launcher's exit code). Ctrl-C and
        SIGTERM end it as ``KeyboardInterrupt`` (the caller stops the rest)."""
        while True:
            time.sleep(0.5)
            each_tick()
            dead = self.exited()
            if dead is not None:
                say(
                    f"error: the {dead.name} exited (code {dead.process.returncode}); "
                    f"see {dead.log_path}"
                )
                return 1

    def stop_order(self) -> list[Child]:
        """Reverse start order, with the engines moved before the collector.

        NOTE: the engines start first (the collector is gated on scraping them), but an
        engine exports its last spans as it drains, to the collector's OTLP receiver: a
        collector stopped first loses the spans of the last requests (docs/tracing.md,
        "Shutdown order")."""
        engines = [c for c in reversed(self.children) if c.name.startswith(ENGINE_PREFIX)]
        rest = [c for c in reversed(self.children) if not c.name.startswith(ENGINE_PREFIX)]
        at = next((i for i, c in enumerate(rest) if c.name == "collector"), len(rest))
        return rest[:at] + engines + rest[at:]

    def stop_all(self, say: Callable[[str], None]) -> None:
        for child in self.stop_order():
            say(stop(child))


@dataclass(frozen=True)
class CollectorClock:
    """How often a launched collector scrapes and evaluates, and how its rule windows and
    ``for:`` are scaled (``None``: the configuration's defaults, production's clock)."""

    scrape_interval_seconds: float = 5.0
    #: ``None``: the collector's default timeout.
    scrape_timeout_seconds: float | None = None
    window_scale: float | None = None
    evaluation_interval_seconds: float | None = None


def collector_config(
    db_url: str,
    targets: Sequence[str] | Path,
    clock: CollectorClock = CollectorClock(),
    *,
    gpu: str = "auto",
    rules: Mapping[str, Any] | None = None,
) -> dict:
    """The ``tailwatch.yaml`` mapping of a collector that Tailwatch launches, with the alert
    evaluator inside it (``alerts.in_collector``): the store at ``db_url``; ``targets``
    either engine base URLs (scraped at ``<url>/metrics`` as ``replica-<i>``, labelled
    ``replica: <i>``) or a file_sd targets file the collector watches; ``rules`` overrides
    of the built-in rules (``alerts.rules``)."""
    collector: dict[str, Any] = {"scrape_interval_seconds": clock.scrape_interval_seconds}
    if clock.scrape_timeout_seconds is not None:
        collector["scrape_timeout_seconds"] = clock.scrape_timeout_seconds
    collector["gpu"] = gpu
    if isinstance(targets, Path):
        collector["targets_file"] = str(targets)
    else:
        collector["targets"] = [
            {"url": f"{url}/metrics", "name": f"replica-{i}", "labels": {"replica": str(i)}}
            for i, url in enumerate(targets)
        ]
    alerts: dict[str, Any] = {"in_collector": True}
    if clock.window_scale is not None:
        alerts["window_scale"] = clock.window_scale
    if clock.evaluation_interval_seconds is not None:
        alerts["evaluation_interval"] = clock.evaluation_interval_seconds
    if rules:
        alerts["rules"] = dict(rules)
    return {"database_url": db_url, "collector": collector, "alerts": alerts}
