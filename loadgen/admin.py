"""The engine side a load test reads or nudges: ``/admin/config`` knobs and ``/metrics``.

Both are optional on a target: knobs are skipped (``None``) when the admin API is off
(404) or the token is missing or wrong (401/403).
"""

from __future__ import annotations

import os
from typing import Any

import httpx
from prometheus_client.parser import text_string_to_metric_families

from loadgen.errors import TargetError

ADMIN_TOKEN_ENV = "TAILWATCH_ADMIN_TOKEN"


def _headers(token: str | None) -> dict[str, str]:
    token = token if token is not None else os.environ.get(ADMIN_TOKEN_ENV)
    return {"Authorization": f"Bearer {token}"} if token else {}


async def read_knobs(
    client: httpx.AsyncClient, base_url: str, token: str | None = None
) -> dict[str, Any] | None:
    """The knobs in force, or None when the server does not expose them to us."""
    try:
        reply = await client.get(f"{base_url}/admin/config", headers=_headers(token), timeout=10)
    except httpx.HTTPError:
        return None
    if reply.status_code != 200:
        return None
    try:
        knobs = reply.json()
    except ValueError:
        return None
    return knobs if isinstance(knobs, dict) else None


async def patch_knobs(
    client: httpx.AsyncClient, base_url: str, changes: dict[str, Any], token: str | None = None
) -> dict[str, Any]:
    """Apply knob or fault changes; raises ``TargetError`` with the server's message when
    the admin API refuses them (off: 404; no or wrong token: 401/403; a bad value: 400)."""
    reply = await client.patch(
        f"{base_url}/admin/config", json=changes, headers=_headers(token), timeout=30
    )
    if reply.status_code != 200:
        raise TargetError(
            f"PATCH {base_url}/admin/config {changes} answered {reply.status_code}: "
            f"{reply.text[:200]} (set {ADMIN_TOKEN_ENV} to the server's admin token)"
        )
    return reply.json()


async def scrape(client: httpx.AsyncClient, base_url: str) -> dict[tuple[str, frozenset], float]:
    """Every sample of ``GET /metrics``: (sample name, labels) → value."""
    reply = await client.get(f"{base_url}/metrics", timeout=10)
    reply.raise_for_status()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(reply.text)
        for s in family.samples
    }


def total(samples: dict[tuple[str, frozenset], float], name: str, **labels: str) -> float:
    """Sum of the samples named ``name`` whose labels include ``labels``."""
    want = set(labels.items())
    return sum(v for (n, ls), v in samples.items() if n == name and want <= ls)
