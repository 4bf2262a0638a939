"""The children of ``tailwatch up``: each one started in a process group of its own, logging
to ``.tailwatch/logs/<name>.log``, gated on a health URL, and stopped with SIGTERM to its
whole group (SIGKILL after a timeout); :class:`Stack` holds them in start order, stops them
in dependency order and restarts one in its place.

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
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

#: How long one child may take to answer its health URL (a cold torch import on a busy
#: machine takes most of it).
START_TIMEOUT_SECONDS = 180.0
#: How long a child gets to drain after SIGTERM before its group is killed.
STOP_TIMEOUT_SECONDS = 30.0


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


def spawn(
    name: str, command: list[str], log_dir: Path, env: Mapping[str, str], *, append: bool = False
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
    when the child itself exited, so nothing it started outlives it. Returns a sentence."""
    process = child.process
    if process.poll() is None:
        _signal_group(child.pid, signal.SIGTERM)
        try:
            process.wait(timeout=timeout_seconds)
        except subprocess.TimeoutExpired:
            _signal_group(child.pid, signal.SIGKILL)
            process.wait()
            return f"{child.name}: did not stop in {timeout_seconds:.0f} s, killed"
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


#: The children named ``engine-0``, ``engine-1``, ...
ENGINE_PREFIX = "engine-"


class Stack:
    """The running children, in start order; :meth:`stop_all` stops them in reverse, except
    that the engines stop before the collector (:meth:`stop_order`)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []

    def start(self, name: str, command: list[str], env: dict, healthy: Callable[[], bool]):
        child = spawn(name, command, self.log_dir, env)
        self.children.append(child)
        wait_healthy(child, healthy)
        return child

    def restart(
        self,
        name: str,
        command: list[str],
        env: dict,
        healthy: Callable[[], bool],
        say: Callable[[str], None],
    ) -> Child:
        """Stop the child ``name`` and start ``command`` in its place (its log appended
        to), health-gated; it keeps its place in the stop order.

        NOTE: the new child is in :attr:`children` before its health wait, so a signal
        during the wait still stops it."""
        index = next(i for i, child in enumerate(self.children) if child.name == name)
        say(stop(self.children[index]))
        child = spawn(name, command, self.log_dir, env, append=True)
        self.children[index] = child
        wait_healthy(child, healthy)
        return child

    def exited(self) -> Child | None:
        return next((c for c in self.children if c.process.poll() is not None), None)

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
