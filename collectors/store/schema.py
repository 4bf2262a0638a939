"""Schema management: the store's tables are created and upgraded only through Alembic
revisions in ``collectors/store/migrations`` (run programmatically, no ``alembic.ini``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Engine

MIGRATIONS = Path(__file__).with_name("migrations")


def alembic_config() -> Config:
    """An Alembic configuration pointing at the store's migration scripts."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    return config


def upgrade_schema(engine: Engine, revision: str = "head") -> None:
    """Bring the database behind ``engine`` to ``revision`` (idempotent)."""
    config = alembic_config()
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
