"""Where the console reads its settings: the environment that ``tailwatch console`` sets.

``TAILWATCH_DB_URL`` (the store, read-only), ``TAILWATCH_METRICS_URL`` and
``TAILWATCH_METRICS_MATCH`` (a Prometheus-compatible server the metrics are read from instead
of the store's own: ``collectors.metrics_source``), ``TAILWATCH_CONFIG`` (a ``tailwatch.yaml`` for
its ``slos:``), ``TAILWATCH_LIVE`` (seconds between live refreshes; ``0`` turns them off, as
the browser tests do), ``TAILWATCH_ADMIN_TOKEN`` (the token write actions ask for).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from collectors.metrics_source import MetricsSource, metrics_source_of
from collectors.store.connection import DB_URL_ENV, default_url

CONFIG_ENV = "TAILWATCH_CONFIG"
LIVE_ENV = "TAILWATCH_LIVE"
ADMIN_TOKEN_ENV = "TAILWATCH_ADMIN_TOKEN"
DEFAULT_LIVE_SECONDS = 15.0


@dataclass(frozen=True)
class ConsoleSettings:
    """``live_seconds`` ``None``: live refresh off. ``metrics`` ``None``: metrics from the
    store; else from that server (the store keeps alerts, incidents, requests, traces, lab
    runs either way)."""

    db_url: str
    config_path: str | None
    live_seconds: float | None
    has_admin_token: bool
    metrics: MetricsSource | None = None


def load_settings(environ: Mapping[str, str] | None = None) -> ConsoleSettings:
    """The settings from ``environ`` (default ``os.environ``). A bad ``TAILWATCH_LIVE`` or
    ``TAILWATCH_METRICS_URL`` raises ``ValueError`` naming it (the CLI validates both before
    starting)."""
    env = os.environ if environ is None else environ
    raw_live = env.get(LIVE_ENV, "")
    live: float | None = DEFAULT_LIVE_SECONDS
    if raw_live.strip():
        try:
            live = float(raw_live)
        except ValueError:
            raise ValueError(
                f"{LIVE_ENV}={raw_live!r}: expected seconds (0 turns it off)"
            ) from None
        if not math.isfinite(live) or live < 0:
            raise ValueError(f"{LIVE_ENV}={raw_live!r}: expected seconds >= 0 (0 turns it off)")
        live = live or None
    return ConsoleSettings(
        db_url=env.get(DB_URL_ENV) or default_url(),
        config_path=env.get(CONFIG_ENV) or None,
        live_seconds=live,
        has_admin_token=bool(env.get(ADMIN_TOKEN_ENV)),
        metrics=metrics_source_of(None, env),
    )
