"""What the database could not take at shutdown, kept in a file for the next start.

The files are pickles written and read only by the collector, trusted like the database file
next to them. A save replaces the file atomically (written aside, then renamed); a load
removes it, or moves a file it cannot read aside to ``<path>.unreadable`` for inspection.
"""

from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any


class UnreadableSpillError(Exception):
    """A saved file could not be read; it was moved aside. The message names both paths."""


def save(path: str | os.PathLike[str], kind: str, items: list[Any]) -> None:
    """Write ``items`` under the format name ``kind``; raises ``OSError``."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    aside = target.with_name(target.name + ".tmp")
    with open(aside, "wb") as file:
        pickle.dump((kind, items), file)
    os.replace(aside, target)


def load(path: str | os.PathLike[str], kind: str, item_type: type) -> list[Any] | None:
    """The items saved under ``kind`` (each an ``item_type``), the file removed; ``None``
    when there is no file. Raises :class:`UnreadableSpillError` once the file is aside."""
    source = Path(path)
    if not source.exists():
        return None
    try:
        with open(source, "rb") as file:
            saved_kind, items = pickle.load(file)
        if saved_kind != kind or not all(isinstance(item, item_type) for item in items):
            raise ValueError(f"not a {kind} file")
    except Exception as error:  # NOTE: a bad file must not stop the collector starting
        aside = source.with_name(source.name + ".unreadable")
        os.replace(source, aside)
        raise UnreadableSpillError(f"{source} ({error}); moved to {aside}") from None
    source.unlink()
    return items
