"""What the commands that read the store share: ``--db`` and opening the store, ``--now``,
``--json``, durations, and printing a table or JSON (``tailwatch alerts``, ``incident``,
``slo``, ``replay``, ``console``).

Every command opens the store with ``migrate=False``: it never changes the schema behind the
collector's back, and an old schema gets the error that says how to migrate. ``--now``
(Unix seconds) replaces the clock, for scripts and tests."""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, Any

import typer
from rich.console import Console

from alerts import RuleError
from alerts.rules import parse_duration as parse_rule_duration
from collectors.error_text import first_line
from collectors.store import Store, default_url
from tailwatch.cli_options import cli_error

DbOption = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="SQLAlchemy URL of the store (default: TAILWATCH_DB_URL, else .tailwatch/tailwatch.db).",
    ),
]
NowOption = Annotated[
    float | None,
    typer.Option("--now", help="Evaluate states at this time (Unix seconds; default: now)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")]


@contextmanager
def open_store(db: str | None) -> Iterator[Any]:
    """The store at ``db``, opened read-only in schema (``migrate=False``); any failure to
    open it is one ``error:`` line."""
    if db is not None and not db.strip():
        raise cli_error(f"--db {db!r}: expected a SQLAlchemy URL, e.g. sqlite:///tailwatch.db")
    try:
        store = Store(db or default_url(), migrate=False)
    except Exception as error:  # NOTE: any URL, driver or schema error is one line
        raise cli_error(f"cannot open the store: {first_line(error)}") from None
    try:
        yield store
    finally:
        store.close()


def parse_now(now: float | None) -> float:
    if now is None:
        return time.time()
    if not math.isfinite(now):
        raise cli_error(f"--now {now!r}: must be a finite time in Unix seconds")
    return now


def parse_duration(flag: str, text: str) -> float:
    """``text`` (``90s``, ``5m``, ``1h30m``, ``2d``, or bare seconds) as positive seconds, or
    a ``cli_error`` naming ``flag``."""
    raw = text.strip()
    try:
        value: float | str = float(raw)  # bare seconds
    except ValueError:
        value = raw
    if isinstance(value, float) and not value > 0:  # NOTE: also NaN
        raise cli_error(f"{flag} {text!r}: must be a positive duration, like 30m or 2h")
    try:
        seconds = parse_rule_duration(flag, flag, value)
    except RuleError as error:
        raise cli_error(f"{flag} {text!r}: {error.problem}") from None
    if seconds <= 0:
        raise cli_error(f"{flag} {text!r}: must be a positive duration, like 30m or 2h")
    return seconds


def print_json(value: Any) -> None:
    # NOTE: ensure_ascii keeps any control character in a label escaped in the output.
    typer.echo(json.dumps(value, indent=2, ensure_ascii=True))


def print_table(table: Any) -> None:
    Console().print(table)
