"""Where the store lives and how it connects: SQLite (WAL) by default, any SQLAlchemy URL."""

from __future__ import annotations

import os
from pathlib import Path

from sqlalchemy import Engine, create_engine, event

#: Where the embedded store lives unless ``TAILWATCH_DB_URL`` or an explicit URL says otherwise.
DEFAULT_PATH = Path(".tailwatch") / "tailwatch.db"
DB_URL_ENV = "TAILWATCH_DB_URL"


def default_url() -> str:
    """``TAILWATCH_DB_URL`` when set, else SQLite at ``.tailwatch/tailwatch.db``."""
    return os.environ.get(DB_URL_ENV) or sqlite_url(DEFAULT_PATH)


def sqlite_url(path: str | os.PathLike[str]) -> str:
    """The SQLAlchemy URL of a SQLite file (its folder is created)."""
    file = Path(path)
    file.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{file}"


class StoreDriverError(RuntimeError):
    """The URL names a database whose Python driver is not installed."""


def make_engine(url: str) -> Engine:
    """An engine for ``url``; SQLite connections get WAL, foreign keys and NORMAL sync.
    Raises :class:`StoreDriverError`, saying what to install, when the driver is missing."""
    try:
        engine = create_engine(url)
    except ModuleNotFoundError as error:
        scheme = url.split(":", 1)[0]
        hint = ""
        if scheme.startswith("postgresql"):
            hint = (
                "; for PostgreSQL install psycopg 3 (pip install 'tailwatch[postgres]') and "
                "use a URL of the form postgresql+psycopg://user:pass@host:5432/db"
            )
        raise StoreDriverError(
            f"no driver for {scheme}: module {error.name!r} is not installed{hint}"
        ) from None
    if engine.dialect.name == "sqlite":
        event.listen(engine, "connect", _sqlite_pragmas)
    return engine


def _sqlite_pragmas(connection: object, _record: object) -> None:
    cursor = connection.cursor()  # type: ignore[attr-defined]
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
