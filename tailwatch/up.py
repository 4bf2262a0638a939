"""``tailwatch up``: the whole stack on loopback, in dependency order, health-gated.

1. The engine replicas (``tailwatch engine serve``, tracing to the collector's OTLP
   receiver), each gated on ``/ready``.
2. The collector (``tailwatch collect`` with the alert evaluator inside it, which starts once
   the first round of scrapes is stored: ``tailwatch.collect_evaluation``), gated on
   ``GET /targets`` reporting every replica ``up``.
3. The console (``tailwatch console``), gated on Streamlit's ``/_stcore/health``.
4. With ``--demo``, traffic and a rotating incident drill (:mod:`tailwatch.up_demo`); at
   the stop, what the store holds of the run is checked against the engines' own counters
   (:mod:`tailwatch.up_counts`), and a mismatch is exit code 1.
5. With no ``slos:`` configured, SLOs proposed from the store's last hour, or else from the
   stack's first traffic, written into the configuration it runs on, and the collector
   restarted to alert on them (:mod:`tailwatch.up_slos`).

SIGINT or SIGTERM stops it all in reverse order (:mod:`tailwatch.processes`). Every
port is checked before anything starts; the pids and URLs are written to
``.tailwatch/up.json`` while it runs.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx

from collectors.store import default_url
from tailwatch.config import load_config
from tailwatch.processes import (
    ENGINE_PREFIX,
    CollectorClock,
    Stack,
    StartError,
    answers_200,
    port_is_free,
    tailwatch_command,
    targets_up,
)
from tailwatch.processes import collector_config as launched_collector_config
from tailwatch.up_counts import RunCheck
from tailwatch.up_demo import CALIBRATION_BASELINE_SECONDS, Demo
from tailwatch.up_slos import OwnSLOs, copied_config, has_slos, read_mapping

STATE_DIR = Path(".tailwatch")
HOST = "127.0.0.1"
ADMIN_TOKEN_ENV = "TAILWATCH_ADMIN_TOKEN"
#: The demo's clock: rule windows and ``for:`` at a twentieth (a 5 m window is 15 s), so a
#: drill's alert fires within its perturbation and an incident shows within ~2 minutes.
DEMO_WINDOW_SCALE = 0.05
DEMO_EVALUATION_INTERVAL_SECONDS = 1.0
DEMO_SCRAPE_INTERVAL_SECONDS = 1.0


@dataclass(frozen=True)
class UpOptions:
    replicas: int = 1
    db_url: str | None = None
    demo: bool = False
    config: Path | None = None
    engine_port: int = 8000
    collector_port: int = 4318
    console_port: int = 8501


def taken_port(options: UpOptions) -> str | None:
    """One sentence naming the first port that is in use or given twice, and the flag that
    moves it; None when every port is free."""
    wanted = [
        (options.engine_port + i, f"engine replica {i}", "--engine-port")
        for i in range(options.replicas)
    ]
    wanted += [
        (options.collector_port, "collector", "--collector-port"),
        (options.console_port, "console", "--console-port"),
    ]
    # NOTE: the flags' own mistakes first (a port given twice, past the range): they are the
    # same on every machine, whatever else happens to hold a port at the moment
    seen: dict[int, str] = {}
    for port, what, flag in wanted:
        if port in seen:
            return f"port {port} is wanted by both the {seen[port]} and the {what}; change {flag}"
        seen[port] = what
        if port > 65535:
            return f"port {port} (the {what}) is past 65535; lower {flag}"
    for port, what, flag in wanted:
        if not port_is_free(HOST, port):
            return (
                f"port {port} (the {what}) is already in use on {HOST}; "
                f"stop what holds it or pick another with {flag}"
            )
    return None


def collector_config(options: UpOptions, engine_urls: list[str], db_url: str) -> dict:
    """The configuration written to ``.tailwatch/up.yaml`` when the user gives none."""
    clock = CollectorClock()
    if options.demo:
        clock = CollectorClock(
            scrape_interval_seconds=DEMO_SCRAPE_INTERVAL_SECONDS,
            window_scale=DEMO_WINDOW_SCALE,
            evaluation_interval_seconds=DEMO_EVALUATION_INTERVAL_SECONDS,
        )
    return launched_collector_config(db_url, engine_urls, clock)


def run_up(options: UpOptions, say: Callable[[str], None]) -> int:
    """Start the stack, wait for a signal (or a child's death), stop it; the exit code."""
    configured, known_targets = None, set()
    if options.config is not None:
        settings = load_config(options.config)
        configured = settings.database_url
        known_targets = {t.url.rstrip("/") for t in settings.collector.targets}
    db_url = options.db_url or configured or default_url()
    log_dir = STATE_DIR / "logs"
    engine_urls = [f"http://{HOST}:{options.engine_port + i}" for i in range(options.replicas)]
    collector_url = f"http://{HOST}:{options.collector_port}"
    console_url = f"http://{HOST}:{options.console_port}"
    config, own = _config(options, engine_urls, db_url, say)
    # NOTE: as for `tailwatch engine serve`, the admin API (live knob patches) is on when
    # TAILWATCH_ADMIN_TOKEN is set; the demo's drills need it, with a random token if unset.
    env = dict(os.environ)
    token = env.get(ADMIN_TOKEN_ENV) or secrets.token_hex(16)
    if options.demo:
        env[ADMIN_TOKEN_ENV] = token
    previous = {
        sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    stack = Stack(log_dir)
    code = 0
    demo = None
    check = None
    started_at = time.time()
    try:
        for i, url in enumerate(engine_urls):
            say(f"starting engine replica {i} at {url} ...")
            stack.start(
                f"{ENGINE_PREFIX}{i}",
                _engine_command(options.engine_port + i, collector_url, options.demo),
                env,
                answers_200(f"{url}/ready"),
            )
        say(f"starting the collector at {collector_url} (store {db_url}) ...")
        collect = ["collect", "--config", str(config), "--alerts", "--db-url", db_url]
        collect += ["--listen", f"{HOST}:{options.collector_port}"]
        if options.config is not None:
            # NOTE: the user's targets plus the replicas started here, each scraped once
            # (`tailwatch init` already lists the first replica, 127.0.0.1:8000).
            extra = [f"{url}/metrics" for url in engine_urls]
            collect += [a for url in extra if url not in known_targets for a in ("--target", url)]
        collector_up = targets_up(collector_url, len(engine_urls))
        stack.start("collector", tailwatch_command(*collect), env, collector_up)
        say(f"starting the console at {console_url} ...")
        # NOTE: the file the collector reads, so the console shows the same SLOs.
        console = ["console", "--db", db_url, "--port", str(options.console_port)]
        console += ["--config", str(config)]
        stack.start(
            "console",
            tailwatch_command(*console),
            env,
            answers_200(f"{console_url}/_stcore/health"),
        )
        _write_state(stack, engine_urls, collector_url, console_url, db_url)
        say(_ready_text(engine_urls, collector_url, console_url, db_url, log_dir, options.demo))
        if options.demo:
            check = _run_check(db_url, collector_url, engine_urls, started_at, say)
            longer = CALIBRATION_BASELINE_SECONDS if own is not None else 0.0
            demo = Demo(
                engine_urls, token, say, log_dir / "demo.log", min_first_baseline_seconds=longer
            )
            demo.start()
        if own is not None:
            baseline = demo.first_baseline_seconds if demo is not None else None
            own.start(time.time(), baseline, db_url, say)

        def adopt_proposed_slos() -> None:
            nonlocal own
            if own is not None and own.poll(time.time(), say):
                # NOTE: the evaluator builds its burn-rate rules from slos: when it starts;
                # its alert state is in the store, so a restart loses none (up_slos.py).
                say("restarting the collector so its evaluator alerts on these SLOs ...")
                stack.restart("collector", tailwatch_command(*collect), env, collector_up, say)
                _write_state(stack, engine_urls, collector_url, console_url, db_url)
                own = None
            if demo is not None and (own is None or not own.calibrating):
                demo.calibration_ended()  # NOTE: after the restart: the drill waits on it

        code = stack.watch(say, adopt_proposed_slos)
    except StartError as error:
        say(f"error: {error}")
        code = 1
    except KeyboardInterrupt:
        say("stopping ...")
    finally:
        # NOTE: still ours while the children stop; a second signal does not cut it short.
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        if demo is not None:
            demo.stop()
            if check is not None:
                check.finish(say)
        if own is not None:
            own.close()
        stack.stop_all(say)
        (STATE_DIR / "up.json").unlink(missing_ok=True)
        # NOTE: after the stop: the engines have flushed their last spans, the collector
        # has written what it held.
        if demo is not None and check is not None and not check.report(say) and code == 0:
            code = 1
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code


def _run_check(
    db_url: str,
    collector_url: str,
    engine_urls: list[str],
    started_at: float,
    say: Callable[[str], None],
) -> RunCheck | None:
    """The demo's count check (:mod:`tailwatch.up_counts`), its baseline scrape stored
    before the first request; None, said, when the collector cannot say its targets."""
    try:
        check = RunCheck(db_url, collector_url, engine_urls, started_at)
    except (httpx.HTTPError, ValueError, KeyError) as error:
        say(f"(no count check at the end: the collector's /targets did not answer: {error})")
        return None
    check.baseline(say)
    return check


def _config(
    options: UpOptions, engine_urls: list[str], db_url: str, say: Callable[[str], None]
) -> tuple[Path, OwnSLOs | None]:
    """The configuration the collector and console read, and, when it has no ``slos:``, the
    :class:`~tailwatch.up_slos.OwnSLOs` that will write proposals into it (else ``None``)."""
    if options.config is not None and has_slos(read_mapping(options.config)):
        return options.config, None
    STATE_DIR.mkdir(exist_ok=True)
    if options.config is None:
        mapping = collector_config(options, engine_urls, db_url)
        header = "written by `tailwatch up`; pass --config to use your own"
    else:
        mapping = copied_config(options.config)
        header = (
            f"written by `tailwatch up`: {options.config}, which has no slos:, with proposed "
            f"SLOs added;\nedit {options.config}, not this copy"
        )
    own = OwnSLOs(STATE_DIR / "up.yaml", mapping, header)
    # NOTE: a demo's history holds its own drills (a third of every cycle is an incident),
    # and proposals from it had a 10 s TTFT threshold that no drill could burn: the demo
    # calibrates on its first clean baseline every time.
    if not options.demo and own.adopt_history(db_url, time.time(), say):
        return own.path, None
    return own.path, own


def _engine_command(port: int, collector_url: str, demo: bool) -> list[str]:
    command = ["engine", "serve", "--model", "tiny", "--host", HOST, "--port", str(port)]
    command += ["--otlp-endpoint", f"{collector_url}/v1/traces", "--no-access-log"]
    # NOTE: the drills' engine (loadgen/scenarios): a 512-token context and 256 KV blocks.
    command += ["--max-model-len", "512", "--num-gpu-blocks", "256"] if demo else []
    command += ["--max-waiting-requests", "64", "--drain-timeout", "5"]
    return tailwatch_command(*command)


def _write_state(stack: Stack, engines, collector, console, db_url) -> None:
    state = {
        "pids": {c.name: c.pid for c in stack.children},
        "urls": {"engines": engines, "collector": collector, "console": console},
        "database_url": db_url,
    }
    (STATE_DIR / "up.json").write_text(json.dumps(state, indent=2) + "\n")


def _ready_text(engines, collector, console, db_url, log_dir, demo) -> str:
    lines = [
        "Tailwatch is up.",
        f"  console      {console}",
        *(f"  engine {i}     {url}/v1  (metrics {url}/metrics)" for i, url in enumerate(engines)),
        f"  collector    {collector}/targets  (OTLP {collector}/v1/traces)",
        f"  store        {db_url}",
        f"  logs         {log_dir}/",
    ]
    if demo:
        lines.append("  demo         traffic from acme, globex, initech; a drill every few minutes")
    lines.append("Ctrl-C stops everything.")
    return "\n".join(lines)


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
