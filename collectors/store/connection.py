"""Where the store lives and how it connects: SQLite (WAL) by default, any SQLAlchemy URL."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
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


@contextlib.contextmanager
def scratch_postgres_database(admin_url: str, prefix: str = "tw_scratch") -> Iterator[str]:
    """A new, empty PostgreSQL database next to ``admin_url``'s (whose role may ``CREATE
    DATABASE``), dropped on exit; yields its URL. For tests and benchmarks."""
    from sqlalchemy import text
    from sqlalchemy.engine import make_url

    base = make_url(admin_url)
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    try:
        with admin.connect() as connection:
            connection.execute(text(f'CREATE DATABASE "{name}"'))
        yield base.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
