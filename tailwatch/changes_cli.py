"""``tailwatch changes list``: the change events the collector recorded (a target's info
labels, live knobs, targets added, removed or restarted, the traffic mix: docs/collectors.md,
"Change events"), newest first, in the last ``--since``; of one ``--target`` or ``--kind``."""

from __future__ import annotations

import math
from typing import Annotated

import typer

from alerts.views import KIND_CHOICES, change_json, changes_table, newest_changes
from collectors.error_text import first_line
from tailwatch.cli_options import cli_error, typer_app
from tailwatch.incident_cli import MAX_LIMIT, parse_limit
from tailwatch.store_options import (
    DbOption,
    JsonOption,
    NowOption,
    open_store,
    parse_duration,
    parse_now,
    print_json,
    print_table,
)

changes_app = typer_app(
    name="changes",
    help="What changed: the change events the collector recorded (see docs/collectors.md).",
)


def parse_kind(text: str | None) -> str | None:
    """``--kind``: one of :data:`KIND_CHOICES`, or one ``error:`` line."""
    if text is None:
        return None
    kind = text.strip()
    if kind not in KIND_CHOICES:
        raise cli_error(f"--kind {text!r}: must be one of {', '.join(KIND_CHOICES)}")
    return kind


@changes_app.command("list")
def list_changes(
    since: Annotated[
        str, typer.Option("--since", help="List changes this long ago or later.")
    ] = "24h",
    target: Annotated[
        str | None,
        typer.Option("--target", help="Only this target's changes ('' for the fleet's traffic)."),
    ] = None,
    kind: Annotated[
        str | None,
        typer.Option("--kind", help=f"Only changes of this kind ({', '.join(KIND_CHOICES)})."),
    ] = None,
    limit: Annotated[
        str, typer.Option("--limit", help=f"At most this many, the newest (1-{MAX_LIMIT}).")
    ] = "100",
    as_json: JsonOption = False,
    db: DbOption = None,
    now: NowOption = None,
) -> None:
    """List the changes of the last --since, newest first: when (UTC, and how long ago), on
    which target, what changed from what to what, and where it was seen."""
    since_seconds = parse_duration("--since", since)
    count = parse_limit(limit)
    wanted = parse_kind(kind)
    at = parse_now(now)
    start = at - since_seconds
    with open_store(db) as store:
        try:
            chosen = newest_changes(store, start, at, target=target, kind=wanted, limit=count)
        except Exception as error:  # NOTE: what the store cannot answer is one line
            raise cli_error(f"cannot read the change events: {first_line(error)}") from None
    if as_json:
        print_json([change_json(e) for e in chosen])
    else:
        print_table(changes_table(chosen, at, start if math.isfinite(start) else at))
