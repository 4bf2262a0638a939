"""The collectors store: SQLAlchemy models, Alembic schema, and the repository API."""

from collectors.store.connection import DB_URL_ENV, DEFAULT_PATH, default_url, sqlite_url
from collectors.store.records import (
    DuplicateSeriesError,
    ScrapeRecord,
    SemanticsMismatchError,
    SeriesInfo,
)
from collectors.store.repository import Store
from collectors.store.windows import LayoutChangeError, WindowSemantics

__all__ = [
    "DB_URL_ENV",
    "DEFAULT_PATH",
    "DuplicateSeriesError",
    "LayoutChangeError",
    "ScrapeRecord",
    "SemanticsMismatchError",
    "SeriesInfo",
    "Store",
    "WindowSemantics",
    "default_url",
    "sqlite_url",
]
