"""Revision 0005 (incidents, rule failures, notifier memory): a store at 0004 holding alert
history and a firing alert upgrades with one incident per firing episode backfilled, and the
evaluator's next saves go on from them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import insert

from alerts import Alert, AlertState, Transition
from alerts.sql import alert_state_of
from alerts.sql.codec import encode_alert
from collectors.store import SchemaOutOfDateError, Store, sqlite_url
from collectors.store.connection import make_engine
from collectors.store.models import AlertStateRow, AlertTransitionRow
from collectors.store.schema import alembic_config, upgrade_schema
from tests.services import postgres_database

KV = Alert.pending({"alertname": "KV", "severity": "page", "target": "r\x00"}, 100.0)
FIRST = KV.fire(160.0, value=0.9)
FIRST_DONE = FIRST.resolve(400.0, value=0.2)
QUEUE = Alert.pending({"alertname": "Queue"}, 900.0).fire(960.0, value=41.0)
AGAIN = Alert.pending(KV.labels, 1_000.0).fire(1_060.0, value=0.95)


def _transition(alert: Alert, at: float, before: AlertState) -> dict:
    return {
        "at_seconds": at,
        "fingerprint": alert.fingerprint,
        "alertname": alert.name.replace("\x00", "\ufffd"),
        "from_state": before.value,
        "to_state": alert.state.value,
        "alert_json": encode_alert(alert),
    }


def _at_0004(url: str) -> None:
    engine = make_engine(url)
    try:
        upgrade_schema(engine, "0004")
        with engine.begin() as connection:
            connection.execute(
                insert(AlertTransitionRow),
                [
                    _transition(KV, 100.0, AlertState.INACTIVE),
                    _transition(FIRST, 160.0, AlertState.PENDING),
                    _transition(FIRST_DONE, 400.0, AlertState.FIRING),
                    _transition(QUEUE, 960.0, AlertState.PENDING),
                    _transition(AGAIN, 1_060.0, AlertState.PENDING),
                ],
            )
            connection.execute(
                insert(AlertStateRow),
                [
                    {
                        "fingerprint": a.fingerprint,
                        "position": i,
                        "alertname": a.name,
                        "state": a.state.value,
                        "active_at_seconds": a.active_at_seconds,
                        "started_at_seconds": a.started_at_seconds,
                        "alert_json": encode_alert(a),
                    }
                    for i, a in enumerate([QUEUE, AGAIN])
                ],
            )
    finally:
        engine.dispose()


@pytest.fixture
def old_url(backend: str, tmp_path: Path) -> Iterator[str]:
    if backend == "sqlite":
        url = sqlite_url(tmp_path / "old.db")
        _at_0004(url)
        yield url
        return
    with postgres_database() as url:
        _at_0004(url)
        yield url


def test_the_incidents_revision_follows_0004() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_revision("0005").down_revision == "0004"


def test_a_0004_store_upgrades_with_its_episodes_as_incidents(old_url: str) -> None:
    with pytest.raises(SchemaOutOfDateError):
        Store(old_url, migrate=False)
    writer = Store(old_url)  # migrates
    try:
        state = alert_state_of(writer)
        listed = [(i.id, i.alertname, i.state, i.started_at_seconds) for i in state.incidents()]
        # ids in order of start; open ones listed first, newest first
        assert listed == [(3, "KV", "firing", 1_060.0), (2, "Queue", "firing", 960.0), (1, "KV", "resolved", 160.0)]  # fmt: skip
        first = state.incident(1)
        assert first is not None and first.alert == FIRST_DONE
        assert first.labels.get("target") == "r\x00" and first.pending_since_seconds == 100.0
        assert state.active_alerts() == [QUEUE, AGAIN]
        # the next evaluation resolves QUEUE into incident 2 and opens no duplicate for AGAIN
        done = QUEUE.resolve(1_200.0)
        state.save_evaluation(
            [AGAIN], [Transition(1_200.0, done.fingerprint, AlertState.FIRING, done.state, done)]
        )
        assert [(i.id, i.state) for i in state.incidents()] == [
            (3, "firing"),
            (2, "resolved"),
            (1, "resolved"),
        ]
        # a new episode gets a new id after the backfilled ones
        new = Alert.pending({"alertname": "New"}, 1_300.0).fire(1_300.0)
        state.save_evaluation(
            [AGAIN, new], [Transition(1_300.0, new.fingerprint, AlertState.PENDING, new.state, new)]
        )
        assert state.incidents(limit=1)[0].id == 4
    finally:
        writer.close()
