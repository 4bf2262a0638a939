"""How a store is opened: ``Store`` implements the store protocols, and a reader
(``migrate=False``) never migrates: it refuses an absent or old schema with an error that says
how to migrate, and opens a current one without writing. ``tailwatch store migrate`` is that
migration."""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect as inspect_schema
from sqlalchemy import text
from typer.testing import CliRunner

from collectors.canonical import CanonicalSample, Kind
from collectors.store import (
    MetricsReader,
    RequestReader,
    SchemaOutOfDateError,
    ScrapeRecord,
    ScrapeStore,
    Store,
    TraceStore,
    sqlite_url,
)
from collectors.store.connection import make_engine
from collectors.store.schema import current_revision, head_revision, upgrade_schema
from tailwatch.cli import app
from tests.services import postgres_database

PROTOCOLS = (MetricsReader, RequestReader, ScrapeStore, TraceStore)


@pytest.fixture
def fresh_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """The URL of a database with nothing in it, not even Alembic's table."""
    if backend == "sqlite":
        yield sqlite_url(tmp_path / "fresh.db")
        return
    with postgres_database() as url:
        yield url


def _protocol_methods(protocol: type) -> list[str]:
    return sorted(
        name for name, value in vars(protocol).items() if callable(value) and name[0] != "_"
    )


@pytest.mark.parametrize("protocol", PROTOCOLS, ids=lambda p: p.__name__)
def test_store_satisfies_each_protocol_with_the_same_signatures(store: Store, protocol) -> None:
    assert isinstance(store, protocol)
    methods = _protocol_methods(protocol)
    assert methods  # the protocol names methods: the isinstance check above means something
    for name in methods:
        wanted = inspect.signature(getattr(protocol, name)).parameters
        have = inspect.signature(getattr(Store, name)).parameters
        # NOTE: names, kinds and defaults must agree (annotations are spelled differently).
        assert [(p.name, p.kind, p.default) for p in have.values()] == [
            (p.name, p.kind, p.default) for p in wanted.values()
        ], name


def _tables(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return sorted(inspect_schema(connection).get_table_names())
    finally:
        engine.dispose()


def test_a_reader_refuses_a_database_without_a_schema(fresh_url: str, backend: str) -> None:
    with pytest.raises(SchemaOutOfDateError) as caught:
        Store(fresh_url, migrate=False)
    error = caught.value
    assert error.revision is None and error.head == head_revision()
    message = str(error)
    assert "has no Tailwatch schema" in message and head_revision() in message
    assert "tailwatch store migrate --db" in message
    if backend == "sqlite":
        # nothing was created: not even the file
        assert not Path(fresh_url.removeprefix("sqlite:///")).exists()
    else:
        assert "tailwatch:***@" in message and ":tailwatch@" not in message  # password masked
        assert _tables(fresh_url) == []


def test_a_reader_refuses_an_old_schema_and_leaves_it_old(fresh_url: str) -> None:
    engine = make_engine(fresh_url)
    try:
        upgrade_schema(engine, "0002")
        with pytest.raises(SchemaOutOfDateError) as caught:
            Store(fresh_url, migrate=False)
        assert (caught.value.revision, caught.value.head) == ("0002", head_revision())
        assert "is at schema revision 0002" in str(caught.value)
        assert current_revision(engine) == "0002"
        assert "histogram_rollups" not in _tables(fresh_url)  # 0003's table
    finally:
        engine.dispose()


def test_a_reader_opens_a_current_schema_and_writes_nothing(fresh_url: str, backend: str) -> None:
    writer = Store(fresh_url)
    sample = CanonicalSample("prompt_tokens_total", (("target", "a"),), 5.0, Kind.COUNTER)
    assert writer.write_scrape(ScrapeRecord("a", 10.0, samples=(sample,)))
    writer.close()
    before = _fingerprint(fresh_url, backend)
    reader = Store(fresh_url, migrate=False)
    try:
        assert reader.scrapes("a") == [(10.0, True, "")]
        assert reader.samples("prompt_tokens_total", {}, 0, 20) == {
            (("target", "a"),): [(10.0, 5.0)]
        }
        assert reader.counter_window("prompt_tokens_total", {}, 0, 20) is None  # one reading
    finally:
        reader.close()
    assert _fingerprint(fresh_url, backend) == before


def _fingerprint(url: str, backend: str) -> object:
    """What a write would change: the SQLite file's bytes; PostgreSQL's row counts and
    schema revision."""
    if backend == "sqlite":
        return hashlib.sha256(Path(url.removeprefix("sqlite:///")).read_bytes()).hexdigest()
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            tables = sorted(inspect_schema(connection).get_table_names())
            counts = {
                t: connection.execute(text(f'SELECT count(*) FROM "{t}"')).scalar() for t in tables
            }
            return counts, current_revision(engine)
    finally:
        engine.dispose()


# -- tailwatch store migrate ------------------------------------------------------------------

runner = CliRunner()


def test_the_migrate_command_brings_a_store_to_head_once(fresh_url: str) -> None:
    first = runner.invoke(app, ["store", "migrate", "--db", fresh_url])
    assert first.exit_code == 0, first.output
    assert f"to {head_revision()}" in first.output and "(none)" in first.output
    Store(fresh_url, migrate=False).close()  # a reader now opens it
    again = runner.invoke(app, ["store", "migrate", "--db", fresh_url])
    assert again.exit_code == 0, again.output
    assert f"at the latest schema revision {head_revision()}" in again.output


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "Could not parse SQLAlchemy URL"),
        ("nope://user:secret@host/db", "--db 'nope://user:***@host/db'"),
        ("postgresql+psycopg://user:secret@127.0.0.1:1/db", "cannot migrate the store at"),
    ],
)
def test_the_migrate_command_names_a_bad_url_in_one_line(url: str, message: str) -> None:
    result = runner.invoke(app, ["store", "migrate", "--db", url])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert message in lines[0] and "secret" not in lines[0]
    assert "Traceback" not in result.output


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(url=st.text(max_size=60).filter(lambda s: "://" not in s))
def test_the_migrate_command_refuses_any_non_url_in_one_line(
    url: str, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # NOTE: nothing may land in the working tree, whatever happens
    result = runner.invoke(app, ["store", "migrate", "--db", url])
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: --db"), result.output
    assert "Traceback" not in result.output
