"""``tailwatch up --prometheus URL``: Tailwatch on the Prometheus you already run, nothing
copied.

1. Discover the engines the server holds (:mod:`collectors.prometheus.discovery`: every name
   the dialect table maps, by target and model, over the last 7 days) and print them; a server
   with none is one line saying what was looked for, and exit code 1.
2. Without ``slos:`` in ``--config``, propose SLOs from the same 7 days (whatever of them the
   server holds: a window over a server reads what exists), the rule of ``tailwatch slo
   propose``.
3. Write ``.tailwatch/up.yaml`` with a ``prometheus:`` section (URL and ``--match``), so the
   evaluator and the console build their metrics reader with
   :func:`collectors.readers.reader_for`, and start the evaluator (``tailwatch alerts run``,
   gated on its first evaluation in the store) and the console. No collector runs: the store
   keeps only Tailwatch's own records (alerts, incidents, silences, lab runs).

SIGINT or SIGTERM stops both in reverse order (:mod:`tailwatch.processes`).
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from alerts.sql import alert_state_of
from collectors.error_text import first_line
from collectors.prometheus import PrometheusReader, PrometheusSourceError
from collectors.prometheus.discovery import Discovery, discover, discovery_table, nothing_found_line
from collectors.slo_proposals import ProposalError, ProposalReport, propose_slos
from collectors.store import Store, default_url
from tailwatch.processes import Stack, StartError, answers_200, tailwatch_command
from tailwatch.up_slos import config_text, copied_config, has_slos, proposed_line, write_atomically

STATE_DIR = Path(".tailwatch")
HOST = "127.0.0.1"
#: How far back discovery and the SLO proposals look.
LOOKBACK_SECONDS = 7 * 86400.0


@dataclass(frozen=True)
class PrometheusUpOptions:
    url: str
    match: str = ""
    db_url: str | None = None
    config: Path | None = None
    console_port: int = 8501
    #: The evaluator's interval (``alerts run --interval``); ``None``: the config's.
    evaluation_interval: str | None = None


def discover_engines(
    options: PrometheusUpOptions, now: float, say: Callable[[str], None]
) -> tuple[PrometheusReader, Discovery] | None:
    """The reader and what it found, printed; ``None`` (said in one ``error:`` line) when the
    server cannot be read or holds no engine series."""
    reader = PrometheusReader(options.url, match=options.match)
    try:
        found = discover(reader, now - LOOKBACK_SECONDS, now)
    except (PrometheusSourceError, httpx.HTTPError, ValueError) as error:
        say(f"error: cannot read {options.url}: {first_line(error)}")
        reader.close()
        return None
    if not found.targets:
        say(nothing_found_line(found))
        reader.close()
        return None
    num_instances = len({t.instance for t in found.targets})
    say(f"{options.url} holds {num_instances} engine targets ({len(found.models)} models):")
    say(discovery_table(found))
    return reader, found


def proposals(reader: PrometheusReader, now: float, say: Callable[[str], None]):
    """SLOs from the last 7 days the server holds; ``None`` (said) when none can be proposed."""
    try:
        report = propose_slos(reader, now - LOOKBACK_SECONDS, now)
    except (ProposalError, PrometheusSourceError, httpx.HTTPError, ValueError) as error:
        say(f"no SLOs proposed: {first_line(error)}; the stack runs without SLOs")
        return None
    if not report.proposed:
        reasons = "; ".join(f"{i.name}: {i.reason}" for i in report.indicators)
        say(f"no SLOs proposed ({reasons}); the stack runs without SLOs")
        return None
    return report


def up_config(options: PrometheusUpOptions, report: ProposalReport | None) -> dict[str, Any]:
    """The mapping written to ``.tailwatch/up.yaml``: the user's (when given), the server as
    ``prometheus:``, and nothing to scrape."""
    mapping = copied_config(options.config) if options.config is not None else {}
    section: dict[str, Any] = {"url": options.url}
    if options.match:
        section["match"] = options.match
    mapping["prometheus"] = {**dict(mapping.get("prometheus") or {}), **section}
    return mapping


def evaluated_since(db_url: str, since: float) -> Callable[[], bool]:
    """Whether the evaluator has saved an evaluation at or after ``since`` in the store."""

    def check() -> bool:
        try:
            store = Store(db_url, migrate=False)
        except Exception:  # NOTE: no schema yet: the evaluator creates it as it opens the store
            return False
        try:
            last = alert_state_of(store).evaluation_health().last_evaluation_seconds
        finally:
            store.close()
        return last is not None and last >= since

    return check


def run_up_prometheus(options: PrometheusUpOptions, say: Callable[[str], None]) -> int:
    """Discover, propose, start the evaluator and the console, wait for a signal (or a
    child's death), stop them; the exit code."""
    now = time.time()
    opened = discover_engines(options, now, say)
    if opened is None:
        return 1
    reader, _ = opened
    configured = options.config is not None and has_slos(copied_config(options.config))
    with reader:
        report = None if configured else proposals(reader, now, say)
    STATE_DIR.mkdir(exist_ok=True)
    path = STATE_DIR / "up.yaml"
    header = "written by `tailwatch up --prometheus`: metrics read from the server, nothing copied"
    mapping = up_config(options, report)
    write_atomically(path, config_text(mapping, header, report))
    if report is not None:
        say(proposed_line(report, "the server's last 7 days", path))
    db_url = options.db_url or default_url()
    # NOTE: no collector runs to create the store: its schema is made (or migrated) here,
    # before the evaluator (which opens it without migrating) and the console.
    Store(db_url).close()
    console_url = f"http://{HOST}:{options.console_port}"
    previous = {
        sig: signal.signal(sig, _raise_interrupt) for sig in (signal.SIGINT, signal.SIGTERM)
    }
    stack = Stack(STATE_DIR / "logs")
    env = dict(os.environ)
    code = 0
    try:
        say(f"starting the alert evaluator on {options.url} (store {db_url}) ...")
        evaluate = ["alerts", "run", "--config", str(path), "--db", db_url]
        if options.evaluation_interval is not None:
            evaluate += ["--interval", options.evaluation_interval]
        stack.start("evaluator", tailwatch_command(*evaluate), env, evaluated_since(db_url, now))
        say(f"starting the console at {console_url} ...")
        console = ["console", "--db", db_url, "--config", str(path)]
        console += ["--port", str(options.console_port)]
        stack.start(
            "console",
            tailwatch_command(*console),
            env,
            answers_200(f"{console_url}/_stcore/health"),
        )
        say(
            "\n".join(
                [
                    "Tailwatch is up.",
                    f"  console      {console_url}",
                    f"  metrics      {options.url}{f' (match {options.match})' if options.match else ''}",
                    f"  store        {db_url}  (alerts, incidents, silences only)",
                    f"  logs         {STATE_DIR / 'logs'}/",
                    "Ctrl-C stops everything.",
                ]
            )
        )
        code = stack.watch(say)
    except StartError as error:
        say(f"error: {error}")
        code = 1
    except KeyboardInterrupt:
        say("stopping ...")
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)
        stack.stop_all(say)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return code


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
