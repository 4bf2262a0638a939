"""Revision 0006 (the knob lab's tables): it follows 0005, a 0005 store is refused by a reader
until migrated, and a writer's upgrade adds ``lab_runs`` and ``lab_points`` (and their
indexes) beside the data already there."""

from __future__ import annotations

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import inspect

from collectors.store import SchemaOutOfDateError, Store, sqlite_url
from collectors.store.connection import make_engine
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind
from collectors.store.schema import alembic_config, upgrade_schema


def test_the_lab_revision_follows_0005() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    assert script.get_revision("0006").down_revision == "0005"
    assert script.get_revision("0007").down_revision == "0006"


def test_a_0005_store_upgrades_with_the_lab_tables(tmp_path) -> None:
    url = sqlite_url(tmp_path / "old.db")
    engine = make_engine(url)
    upgrade_schema(engine, "0005")
    assert "lab_runs" not in inspect(engine).get_table_names()
    engine.dispose()
    with pytest.raises(SchemaOutOfDateError, match="revision 0005"):
        Store(url, migrate=False)
    store = Store(url)
    try:
        indexes = {i["name"] for i in inspect(store.engine).get_indexes("lab_runs")}
        assert {"ix_lab_runs_kind_created_at", "ix_lab_runs_created_at"} <= indexes
        assert "ix_lab_points_run_id" in {
            i["name"] for i in inspect(store.engine).get_indexes("lab_points")
        }
        run = LabRun(LabRunKind.SWEEP, "s", 1.0, "tiny", False, {}, {}, rates=(1.0,))
        run_id = store.create_lab_run(run)
        store.add_lab_point(LabPoint(run_id, None, 1.0, 0, {"slo_attainment": 1.0}))
        assert len(store.lab_points(run_id)) == 1
    finally:
        store.close()
