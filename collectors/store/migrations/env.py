"""Alembic environment: runs on the connection ``collectors.store.schema`` hands over."""

from __future__ import annotations

from alembic import context

from collectors.store.models import Base

if context.is_offline_mode():
    raise RuntimeError(
        "offline (SQL script) migrations are not supported; run "
        "collectors.store.schema.upgrade_schema(engine) against a live database"
    )

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=Base.metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()
