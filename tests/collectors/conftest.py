"""Store fixtures: every test that takes ``store`` (or ``store_url``) runs on SQLite and on
PostgreSQL.

PostgreSQL comes from ``tests.services.postgres_database`` (``TAILWATCH_TEST_PG_URL``): one
database per test session, its tables emptied before each test, so the suite pays for the
migration once. Without a server the ``postgresql`` cases skip (or fail under
``TAILWATCH_REQUIRE_SERVICES=1``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, inspect, text

from collectors.store import Store, sqlite_url
from tests.services import postgres_database

BACKENDS = ("sqlite", "postgresql")


@pytest.fixture(scope="session")
def postgres_store_url() -> Iterator[str]:
    """One PostgreSQL database for the session (dropped at its end)."""
    with postgres_database() as url:
        yield url


def _empty_postgres(url: str) -> None:
    """Empty every table but Alembic's (ids restart), so each test starts from nothing."""
    engine = create_engine(url)
    try:
        with engine.begin() as connection:
            tables = [t for t in inspect(connection).get_table_names() if t != "alembic_version"]
            if tables:
                names = ", ".join(f'"{t}"' for t in tables)
                connection.execute(text(f"TRUNCATE TABLE {names} RESTART IDENTITY CASCADE"))
    finally:
        engine.dispose()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def store_url(backend: str, request: pytest.FixtureRequest, tmp_path) -> str:
    """The URL of an empty store database on ``backend``."""
    if backend == "sqlite":
        return sqlite_url(tmp_path / "tw.db")
    url = request.getfixturevalue("postgres_store_url")
    _empty_postgres(url)
    return url


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An open :class:`Store` on an empty database, SQLite or PostgreSQL."""
    s = Store(store_url)
    try:
        yield s
    finally:
        s.close()
