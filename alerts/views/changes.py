"""What ``tailwatch changes list`` shows and the console's incident timeline lists: change
events (:class:`collectors.store.change_records.ChangeEvent`) as plain dicts (the ``--json``
form) and as a rich table, newest first; times in UTC with how long ago, never Unix seconds.
Pure over the events and ``now_seconds``."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from alerts.views.display import age, iso, printable
from collectors.store.change_records import ChangeEvent, ChangeKind, describe_change
from collectors.store.protocols import ChangeReader

#: How the fleet's own changes (the traffic mix) name their target.
FLEET = "fleet"
KIND_CHOICES = tuple(k.value for k in ChangeKind)
#: The most events one list reads from the store before choosing a kind.
MAX_READ = 10_000


def newest_changes(
    changes: ChangeReader,
    start: float,
    end: float,
    *,
    target: str | None = None,
    kind: str | None = None,
    limit: int = 100,
) -> list[ChangeEvent]:
    """The newest ``limit`` change events in ``[start, end]`` (of ``target``, of ``kind``,
    when given), newest first; of a kind, among the newest :data:`MAX_READ` in the range."""
    events = changes.change_events(start, end, target=target, limit=MAX_READ)
    chosen = [e for e in events if kind is None or e.kind.value == kind]
    return sorted(chosen, key=lambda e: e.key, reverse=True)[:limit]


def change_json(event: ChangeEvent) -> dict[str, Any]:
    return {
        "at": iso(event.at_seconds),
        "target": event.target or None,
        "kind": event.kind.value,
        "subject": event.subject,
        "before": event.before,
        "after": event.after,
        "source": event.source,
        "what": describe_change(event),
    }


def change_row(event: ChangeEvent, now_seconds: float) -> tuple[str, str, str, str, str]:
    """``(at, target, kind, what, source)`` as the table and the console show them."""
    return (
        f"{iso(event.at_seconds)} ({age(now_seconds - event.at_seconds)} ago)",
        printable(event.target) or FLEET,
        event.kind.value,
        printable(describe_change(event)),
        printable(event.source),
    )


def changes_table(events: list[ChangeEvent], now_seconds: float, since_seconds: float) -> Table:
    """``events`` (newest first, as :func:`newest_changes` gives them) under a title that
    says from when and how many."""
    table = Table(
        title=f"{len(events)} change(s) from {iso(since_seconds)} to {iso(now_seconds)}, "
        "newest first"
    )
    for column in ("at", "target", "kind", "what changed", "seen in"):
        table.add_column(column, overflow="fold")
    for event in events:
        table.add_row(*(Text(cell) for cell in change_row(event, now_seconds)))
    return table
