"""``tailwatch.yaml`` as the application reads it: the top level and each package's section.

The shape of the file is in :mod:`collectors.config`'s docstring. Each package validates its
own section into its own typed config (``collector:`` and ``store:`` in
:mod:`collectors.config`, ``slos:`` in :func:`slo.load_slos`, ``alerts:`` in
:func:`alerts.rules.config.load_alerts`); this module, where the application is assembled,
reads the file and puts them together, so no package below it has to know the others'
sections (``collectors`` imports nothing of ``alerts``).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alerts.rules import AlertsConfig, load_alerts
from collectors.config import (
    CollectorConfig,
    ConfigError,
    StoreConfig,
    check_mapping,
    load_yaml,
    optional_str,
    parse_collector_section,
    parse_store_section,
)
from collectors.metrics_source import MetricsSource, metrics_source_of, parse_prometheus_section
from collectors.store.connection import DB_URL_ENV
from slo import SLOSpec, SLOSpecError, load_slos

__all__ = ["ConfigError", "TailwatchConfig", "load_config", "parse_config"]

#: The keys of the top level.
SECTIONS = {"database_url", "collector", "store", "slos", "alerts", "prometheus"}


@dataclass(frozen=True)
class TailwatchConfig:
    """``database_url`` ``None``: the store's default (SQLite at ``.tailwatch/tailwatch.db``,
    whose folder is made only when the store opens)."""

    database_url: str | None
    collector: CollectorConfig
    store: StoreConfig = field(default_factory=StoreConfig)
    #: ``slos:``, validated by ``slo.load_slos`` (docs/slo.md, "The SLO model").
    slos: tuple[SLOSpec, ...] = ()
    #: ``alerts:``, validated by ``alerts.rules.config.load_alerts`` (docs/alerts.md);
    #: ``None`` only for a config built without :func:`parse_config`.
    alerts: AlertsConfig | None = None
    #: ``prometheus:`` (or ``TAILWATCH_METRICS_URL``): the server the evaluator and the
    #: console read metrics from; ``None``: the store's own (:mod:`collectors.metrics_source`).
    metrics: MetricsSource | None = None


def load_config(path: str | os.PathLike[str] | None) -> TailwatchConfig:
    """Read and validate ``path`` (``None``: defaults only). ``TAILWATCH_DB_URL``, when set,
    overrides ``database_url``; no URL at all leaves it ``None`` (the store's default).
    ``TAILWATCH_METRICS_URL``, when set, overrides ``prometheus.url``."""
    data: Any = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
        data = load_yaml(text, str(path))
    base_dir = Path(path).parent if path is not None else None
    return parse_config({} if data is None else data, base_dir=base_dir)


def parse_config(data: Any, base_dir: Path | None = None) -> TailwatchConfig:
    """Validate an already-loaded mapping (see :mod:`collectors.config` for the shape).
    ``base_dir``: the config file's folder, which a relative ``targets_file`` is under."""
    root = check_mapping(data, "(top level)", SECTIONS)
    database_url = os.environ.get(DB_URL_ENV) or optional_str(root, "database_url", "")
    collector = parse_collector_section(root.get("collector", {}), "collector", base_dir)
    store = parse_store_section(root.get("store", {}), "store")
    try:
        slos = load_slos(root)
    except SLOSpecError as error:  # NOTE: chained, so .slo_name and .field stay reachable
        raise ConfigError(f"slos: {error}") from error
    try:
        alerts = load_alerts(root.get("alerts"), slos)
    except ValueError as error:  # NOTE: chained, so .rule and .field stay reachable
        raise ConfigError(f"alerts: {error}") from error
    metrics = metrics_source_of(parse_prometheus_section(root.get("prometheus")), os.environ)
    return TailwatchConfig(database_url or None, collector, store, slos, alerts, metrics)
