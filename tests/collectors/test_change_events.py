"""Change events in the store (revision 0008): the memory, SQLite and PostgreSQL stores give the same
answers (idempotent writes, the newest events oldest first, a target's own), refuse the same
reads, keep any text exactly (NUL as U+FFFD, cut at 512 characters), and a 0007 store
upgrades with the table empty."""

from __future__ import annotations

import math
from collections.abc import Iterator

import pytest
from alembic.script import ScriptDirectory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import inspect

from collectors.store import SchemaOutOfDateError, Store, sqlite_url
from collectors.store.change_records import (
    MAX_TEXT_CHARS,
    ChangeEvent,
    ChangeEventError,
    ChangeKind,
    describe_change,
)
from collectors.store.connection import make_engine
from collectors.store.fake_changes import MemoryChanges
from collectors.store.protocols import ChangeReader, ChangeStore
from collectors.store.schema import alembic_config, upgrade_schema
from tests.collectors.conftest import _empty_postgres as empty_postgres

T0 = 1_800_000_000.0
EVENTS = [
    ChangeEvent(T0 + 10, "replica-0", ChangeKind.KNOB, "max_num_seqs", "32", "4",
                "tailwatch:knob_changes_total"),
    ChangeEvent(T0 + 10, "replica-1", ChangeKind.KNOB, "max_num_seqs", "32", "4",
                "tailwatch:knob_changes_total"),
    ChangeEvent(T0 + 20, "replica-2", ChangeKind.TARGET, "restarted", "a1", "b2", "instance id"),
    ChangeEvent(T0 + 30, "", ChangeKind.TRAFFIC, "batch", "0.000", "0.210", "tenant"),
    ChangeEvent(T0 + 40, "replica-0", ChangeKind.CONFIG, "quantization", "none", "int8",
                "vllm:model_info"),
]  # fmt: skip


@pytest.fixture(params=["memory", "sqlite", "postgresql"])
def changes(request: pytest.FixtureRequest, tmp_path) -> Iterator[MemoryChanges | Store]:
    if request.param == "memory":
        yield MemoryChanges()
        return
    if request.param == "sqlite":
        url = sqlite_url(tmp_path / "tw.db")
    else:
        url = request.getfixturevalue("postgres_store_url")
        empty_postgres(url)
    store = Store(url)
    try:
        yield store
    finally:
        store.close()


def test_both_stores_implement_the_protocols(changes) -> None:
    assert isinstance(changes, ChangeStore) and isinstance(changes, ChangeReader)


def test_writes_are_idempotent_and_reads_come_oldest_first(changes) -> None:
    assert changes.write_change_events(list(reversed(EVENTS))) == len(EVENTS)
    assert changes.write_change_events([*EVENTS, EVENTS[0]]) == 0
    assert changes.change_events(T0, T0 + 100) == EVENTS
    assert changes.change_events(T0 + 20, T0 + 30) == EVENTS[2:4]
    assert changes.change_events(T0, T0 + 100, target="replica-0") == [EVENTS[0], EVENTS[4]]
    assert changes.change_events(T0, T0 + 100, target="") == [EVENTS[3]]


def test_a_limit_keeps_the_newest_and_cuts_a_shared_time_by_identity(changes) -> None:
    changes.write_change_events(EVENTS)
    assert changes.change_events(-math.inf, math.inf, limit=2) == EVENTS[3:]
    # the two replicas changed at the same time: the cut keeps the later identity
    assert changes.change_events(T0, T0 + 10, limit=1) == [EVENTS[1]]


@pytest.mark.parametrize(
    ("start", "end", "limit", "message"),
    [
        (math.nan, T0, 10, "start=nan"),
        (T0, "now", 10, "end='now'"),
        (T0, T0 + 1, 0, "limit=0"),
        (T0, T0 + 1, True, "limit=True"),
    ],
)
def test_bad_reads_name_the_argument(changes, start, end, limit, message) -> None:
    with pytest.raises(ValueError, match=message):
        changes.change_events(start, end, limit=limit)


@pytest.mark.parametrize(
    ("at", "message"),
    [(math.nan, "must be finite"), (math.inf, "must be finite"), (True, "Unix seconds")],
)
def test_an_event_needs_a_finite_time(at, message) -> None:
    with pytest.raises(ChangeEventError, match=f"at_seconds=.*{message}"):
        ChangeEvent(at, "r", ChangeKind.KNOB, "x")


def test_an_event_names_a_field_that_is_not_text() -> None:
    with pytest.raises(ChangeEventError, match="subject=3"):
        ChangeEvent(T0, "r", ChangeKind.KNOB, 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="'knobs'"):
        ChangeEvent(T0, "r", "knobs", "x")  # type: ignore[arg-type]


def test_events_read_as_what_changed() -> None:
    assert [describe_change(e) for e in EVENTS] == [
        "max_num_seqs 32 → 4",
        "max_num_seqs 32 → 4",
        "restarted",
        "tenant batch 0% → 21% of requests",
        "quantization (vllm:model_info) none → int8",
    ]
    assert describe_change(ChangeEvent(T0, "r", ChangeKind.KNOB, "step_delay_seconds")) == (
        "step_delay_seconds"
    )


_text = st.text(max_size=600)


@pytest.fixture(scope="module")
def one_store(tmp_path_factory) -> Iterator[Store]:
    store = Store(sqlite_url(tmp_path_factory.mktemp("fuzz") / "tw.db"))
    try:
        yield store
    finally:
        store.close()


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    at=st.floats(allow_nan=False, allow_infinity=False),
    target=_text,
    subject=_text,
    before=_text,
    after=_text,
    source=_text,
    kind=st.sampled_from(list(ChangeKind)),
)
def test_any_text_and_time_is_kept_exactly_once(
    one_store, at, target, subject, before, after, source, kind
) -> None:
    event = ChangeEvent(at, target, kind, subject, before, after, source)
    assert all("\x00" not in x and len(x) <= MAX_TEXT_CHARS for x in (event.target, event.subject))
    one_store.write_change_events([event, event])
    assert one_store.write_change_events([event]) == 0
    # NOTE: an earlier example may have stored the same identity (time, target, kind, source,
    # subject) with other values: the store keeps the first of a change found twice
    stored = one_store.change_events(event.at_seconds, event.at_seconds, target=event.target)
    (same,) = [e for e in stored if e.key == event.key]
    assert (same.kind, same.subject, same.source) == (event.kind, event.subject, event.source)
    assert MemoryChanges([event, same]).change_events(-math.inf, math.inf) == [event]


# -- revision 0008 --------------------------------------------------------------------------


def test_the_change_revision_follows_0007_and_is_the_head() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_revision("0008").down_revision == "0007"
    assert script.get_current_head() == "0008"


def test_a_0007_store_upgrades_with_the_change_table(tmp_path) -> None:
    url = sqlite_url(tmp_path / "old.db")
    engine = make_engine(url)
    upgrade_schema(engine, "0007")
    assert "change_events" not in inspect(engine).get_table_names()
    engine.dispose()
    with pytest.raises(SchemaOutOfDateError, match="revision 0007"):
        Store(url, migrate=False)
    store = Store(url)
    try:
        indexes = {i["name"] for i in inspect(store.engine).get_indexes("change_events")}
        assert {"ix_change_events_at", "ix_change_events_target_at"} <= indexes
        assert store.change_events(-math.inf, math.inf) == []
        assert store.write_change_events(EVENTS) == len(EVENTS)
    finally:
        store.close()


def test_maintenance_deletes_events_past_the_alert_retention(store: Store) -> None:
    day = 86400.0
    old = ChangeEvent(T0 - 31 * day, "replica-0", ChangeKind.TARGET, "added", source="scrapes")
    store.write_change_events([old, *EVENTS])
    report = store.maintain(T0)
    assert report.change_events_deleted == 1
    assert store.change_events(-math.inf, math.inf) == EVENTS
