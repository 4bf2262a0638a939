"""SQL plumbing every part of the store shares: bounded ``IN (...)`` lists and plain bulk
inserts in the driver's own parameter style."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

from sqlalchemy import Connection

#: Bound parameters per ``IN (...)`` list or bulk delete: far below SQLite's and
#: PostgreSQL's limits, and small enough that one statement stays cheap to plan.
CHUNK_SIZE = 500

_Item = TypeVar("_Item")


def chunks(items: Sequence[_Item], size: int = CHUNK_SIZE) -> Iterator[Sequence[_Item]]:
    """``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


def insert_sql(connection: Connection, table_name: str, columns: Sequence[str]) -> str:
    """A plain ``INSERT`` of ``columns`` into ``table_name``, in the driver's parameter style.

    NOTE: bulk rows go to the driver's ``executemany`` as plain tuples: building them through
    SQLAlchemy Core costs more CPU than the database spends storing them."""
    marker = "?" if connection.dialect.paramstyle == "qmark" else "%s"
    names = ", ".join(f'"{c}"' for c in columns)
    values = ", ".join([marker] * len(columns))
    return f'INSERT INTO "{table_name}" ({names}) VALUES ({values})'
