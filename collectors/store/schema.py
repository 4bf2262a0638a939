"""Schema management: the store's tables are created and upgraded only through Alembic
revisions in ``collectors/store/migrations`` (run programmatically, no ``alembic.ini``).

A writer brings the schema to the latest revision on open (:func:`upgrade_schema`); a
reader checks it instead (:func:`require_current_schema`) and never writes: a reader that
migrated would take the write lock from the collector, or change a database it only meant
to look at.
"""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")
#: How a user brings a store's schema up to date.
MIGRATE_COMMAND = "tailwatch store migrate --db URL"


class SchemaOutOfDateError(RuntimeError):
    """A store opened without migrating (``Store(url, migrate=False)``) is not at the
    schema revision this Tailwatch expects. ``revision`` is the database's (``None``: no
    schema at all), ``head`` the expected one; ``url`` has its password masked."""

    def __init__(self, url: str, revision: str | None, head: str, *, is_known: bool) -> None:
        if revision is None:
            found = "has no Tailwatch schema (no Alembic revision)"
        elif is_known:
            found = f"is at schema revision {revision}"
        else:
            found = (
                f"is at schema revision {revision}, which this Tailwatch does not know "
                "(a newer Tailwatch migrated it? upgrade Tailwatch)"
            )
        super().__init__(
            f"the store at {url} {found}; this Tailwatch reads revision {head}. Migrate it "
            f"with `{MIGRATE_COMMAND.replace('URL', url)}` (a writer such as `tailwatch "
            "collect` migrates on open)"
        )
        self.url = url
        self.revision = revision
        self.head = head


def alembic_config() -> Config:
    """An Alembic configuration pointing at the store's migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def head_revision() -> str:
    """The latest revision of the store's schema."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None, "the store's migrations have one head"
    return head


def upgrade_schema(engine: Engine, revision: str = "head") -> None:
    """Bring the database behind ``engine`` to ``revision`` (idempotent)."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)


def current_revision(engine: Engine) -> str | None:
    """The database's Alembic revision (``None``: no schema); reads only. A SQLite file that
    does not exist is not created."""
    database = engine.url.database or ""
    is_file = engine.url.get_backend_name() == "sqlite" and database not in ("", ":memory:")
    if is_file and not database.startswith("file:") and not Path(database).exists():
        return None
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def require_current_schema(engine: Engine) -> None:
    """Raise :class:`SchemaOutOfDateError` unless the database is at the head revision."""
    head = head_revision()
    revision = current_revision(engine)
    if revision != head:
        script = ScriptDirectory.from_config(alembic_config())
        is_known = revision is not None and revision in {
            r.revision for r in script.walk_revisions()
        }
        masked = engine.url.render_as_string(hide_password=True)
        raise SchemaOutOfDateError(masked, revision, head, is_known=is_known)
