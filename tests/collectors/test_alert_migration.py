"""Revision 0004 (alert states, history, silences): a store at 0003 with data in it upgrades
without losing any, and a reader refuses it until it does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory

from alerts import Alert, AlertState, Transition
from alerts.sql import alert_state_of
from collectors.canonical import CanonicalSample, Kind
from collectors.store import SchemaOutOfDateError, ScrapeRecord, Store, sqlite_url
from collectors.store.connection import make_engine
from collectors.store.schema import (
    alembic_config,
    current_revision,
    head_revision,
    upgrade_schema,
)
from tests.services import postgres_database


@pytest.fixture
def old_url(backend: str, tmp_path: Path) -> Iterator[str]:
    """A database migrated to 0003 (the revision before the alert tables), with one scrape."""
    if backend == "sqlite":
        url = sqlite_url(tmp_path / "old.db")
        _at_0003(url)
        yield url
        return
    with postgres_database() as url:
        _at_0003(url)
        yield url


def _at_0003(url: str) -> None:
    engine = make_engine(url)
    try:
        upgrade_schema(engine, "0003")
        with engine.begin() as connection:
            connection.exec_driver_sql("INSERT INTO targets (name, dialect) VALUES ('a', 'vllm')")
            connection.exec_driver_sql(
                "INSERT INTO scrapes (target_id, timestamp_seconds, is_up, error) "
                "VALUES (1, 10.0, true, '')"
            )
    finally:
        engine.dispose()


def test_the_alerts_revision_follows_0003() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_revision("0004").down_revision == "0003"


def test_a_reader_refuses_a_0003_store(old_url: str) -> None:
    with pytest.raises(SchemaOutOfDateError) as caught:
        Store(old_url, migrate=False)
    assert (caught.value.revision, caught.value.head) == ("0003", head_revision())
    engine = make_engine(old_url)
    try:
        assert current_revision(engine) == "0003"
    finally:
        engine.dispose()


def test_a_0003_store_with_data_upgrades_and_keeps_it(old_url: str) -> None:
    writer = Store(old_url)  # a writer migrates on open
    try:
        assert writer.scrapes("a") == [(10.0, True, "")]
        sample = CanonicalSample("prompt_tokens_total", (("target", "a"),), 5.0, Kind.COUNTER)
        assert writer.write_scrape(ScrapeRecord("a", 20.0, samples=(sample,)))
        alert = Alert.pending({"alertname": "KV"}, 30.0)
        alert_state_of(writer).save_evaluation(
            [alert], [Transition(30.0, alert.fingerprint, AlertState.INACTIVE, alert.state, alert)]
        )
    finally:
        writer.close()
    reader = Store(old_url, migrate=False)
    try:
        assert [s.timestamp_seconds for s in reader.scrapes("a")] == [10.0, 20.0]
        assert alert_state_of(reader).active_alerts() == [alert]
        assert [t.alert for t in alert_state_of(reader).history(0, 100)] == [alert]
    finally:
        reader.close()
