"""The collectors store: SQLAlchemy models, Alembic schema, and the repository API."""

from collectors.store.connection import DB_URL_ENV, DEFAULT_PATH, default_url, sqlite_url
from collectors.store.records import (
    DuplicateSeriesError,
    ScrapeRecord,
    SemanticsMismatchError,
    SeriesInfo,
)
from collectors.store.repository import Store

__all__ = [
    "DB_URL_ENV",
    "DEFAULT_PATH",
    "DuplicateSeriesError",
    "ScrapeRecord",
    "SemanticsMismatchError",
    "SeriesInfo",
    "Store",
    "default_url",
    "sqlite_url",
]
