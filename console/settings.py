"""Where the console reads its settings: the environment that ``tailwatch console`` sets.

``TAILWATCH_DB_URL`` (the store, read-only), ``TAILWATCH_CONFIG`` (a ``tailwatch.yaml`` for
its ``slos:``), ``TAILWATCH_LIVE`` (seconds between live refreshes; ``0`` turns them off, as
the browser tests do), ``TAILWATCH_ADMIN_TOKEN`` (the token write actions ask for).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass

from collectors.store.connection import DB_URL_ENV, default_url

CONFIG_ENV = "TAILWATCH_CONFIG"
LIVE_ENV = "TAILWATCH_LIVE"
ADMIN_TOKEN_ENV = "TAILWATCH_ADMIN_TOKEN"
DEFAULT_LIVE_SECONDS = 15.0


@dataclass(frozen=True)
class ConsoleSettings:
    """``live_seconds`` ``None``: live refresh off."""

    db_url: str
    config_path: str | None
    live_seconds: float | None
    has_admin_token: bool


def load_settings(environ: Mapping[str, str] | None = None) -> ConsoleSettings:
    """The settings from ``environ`` (default ``os.environ``). A bad ``TAILWATCH_LIVE``
    raises ``ValueError`` naming it (the CLI validates it before starting)."""
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
    )
