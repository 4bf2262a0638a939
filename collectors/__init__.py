"""Tailwatch collectors: concurrent scrapes of engine targets (static or from a file_sd
file), their dialects normalised onto canonical families, the OTLP trace receiver, the
Prometheus HTTP API source, NVML GPU telemetry, and the SQL store (``docs/collectors.md``).
"""

from collectors.canonical import (
    CanonicalHistogram,
    CanonicalSample,
    Exemplar,
    Flag,
    Kind,
    Normalised,
    RawSample,
)
from collectors.collector import Collector
from collectors.config import CollectorConfig
from collectors.dialect_rules import Dialect
from collectors.dialects import detect_dialects, normalise, primary_dialect
from collectors.scrape import Scraper, Target

__all__ = [
    "CanonicalHistogram",
    "CanonicalSample",
    "Collector",
    "CollectorConfig",
    "Dialect",
    "Exemplar",
    "Flag",
    "Kind",
    "Normalised",
    "RawSample",
    "Scraper",
    "Target",
    "detect_dialects",
    "normalise",
    "primary_dialect",
]
