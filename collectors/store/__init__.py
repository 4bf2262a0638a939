"""The collectors store: SQLAlchemy models, Alembic schema, and the repository API.

:class:`Store` is the SQL implementation of the protocols in
:mod:`collectors.store.protocols` (``MetricsReader``, ``RequestReader``, ``ScrapeStore``,
``TraceStore``); consumers depend on those.
"""

from collectors.store.connection import DB_URL_ENV, DEFAULT_PATH, default_url, sqlite_url
from collectors.store.protocols import MetricsReader, RequestReader, ScrapeStore, TraceStore
from collectors.store.records import (
    CounterStep,
    DuplicateSeriesError,
    HistogramStep,
    QuantileStep,
    ScrapeRecord,
    ScrapeStatus,
    SemanticsMismatchError,
    SeriesInfo,
    StoredExemplar,
)
from collectors.store.repository import Store
from collectors.store.retention import MaintenanceReport, RetentionPolicy
from collectors.store.schema import SchemaOutOfDateError
from collectors.store.window_semantics import LayoutChangeError, WindowSemantics

__all__ = [
    "DB_URL_ENV",
    "DEFAULT_PATH",
    "CounterStep",
    "DuplicateSeriesError",
    "HistogramStep",
    "LayoutChangeError",
    "MaintenanceReport",
    "MetricsReader",
    "QuantileStep",
    "RequestReader",
    "RetentionPolicy",
    "SchemaOutOfDateError",
    "ScrapeRecord",
    "ScrapeStatus",
    "ScrapeStore",
    "SemanticsMismatchError",
    "SeriesInfo",
    "Store",
    "StoredExemplar",
    "TraceStore",
    "WindowSemantics",
    "default_url",
    "sqlite_url",
]
