"""Tailwatch collectors: engine dialects normalised onto canonical families, and the store.

Scraping, the OTLP receiver, the Prometheus source and NVML are not written yet
(``docs/collectors.md``).
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
from collectors.dialect_rules import Dialect
from collectors.dialects import detect_dialects, normalise, primary_dialect

__all__ = [
    "CanonicalHistogram",
    "CanonicalSample",
    "Dialect",
    "Exemplar",
    "Flag",
    "Kind",
    "Normalised",
    "RawSample",
    "detect_dialects",
    "normalise",
    "primary_dialect",
]
