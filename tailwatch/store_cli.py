"""``tailwatch store migrate``: bring a store's schema to the latest revision.

Readers (``Store(url, migrate=False)``: reports, the console, the alert evaluator) never
migrate; when they find an old schema they say to run this (the collector, a writer,
migrates on open)."""

from __future__ import annotations

from typing import Annotated

import typer
from alembic.util import CommandError
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError

from collectors.error_text import first_line
from collectors.store import default_url
from collectors.store.connection import StoreDriverError, make_engine
from collectors.store.schema import current_revision, head_revision, upgrade_schema
from tailwatch.cli_options import cli_error, typer_app

store_app = typer_app(help="The metrics store: its schema (see docs/collectors.md).")


@store_app.command()
def migrate(
    db: Annotated[
        str | None,
        typer.Option(
            "--db",
            help="SQLAlchemy URL of the store (default: TAILWATCH_DB_URL, "
            "else .tailwatch/tailwatch.db).",
        ),
    ] = None,
) -> None:
    """Upgrade the store's schema to the latest Alembic revision (idempotent)."""
    if db is not None and not db.strip():
        raise cli_error(f"--db {db!r}: expected a SQLAlchemy URL, e.g. sqlite:///tailwatch.db")
    url = db or default_url()
    try:
        engine = make_engine(url)
    except (ArgumentError, StoreDriverError, ValueError) as error:
        raise cli_error(f"--db {_masked(url)!r}: {first_line(error)}") from None
    masked = engine.url.render_as_string(hide_password=True)
    try:
        before = current_revision(engine)
        upgrade_schema(engine)
        after = current_revision(engine)
    except (SQLAlchemyError, CommandError) as error:  # CommandError: a revision we lack
        raise cli_error(f"cannot migrate the store at {masked}: {first_line(error)}") from None
    finally:
        engine.dispose()
    if before == after:
        typer.echo(f"the store at {masked} is at the latest schema revision {after}")
    else:
        typer.echo(
            f"migrated the store at {masked} from revision {before or '(none)'} to {after} "
            f"(latest: {head_revision()})"
        )


def _masked(url: str) -> str:
    """``url`` with any password masked (as given when it does not parse)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
