"""The live knobs of an engine: ``GET /admin/config`` and ``PATCH /admin/config`` with the
admin token (``engine/server/admin.py``), as plain results a page shows. No Streamlit.

The token goes in the ``Authorization`` header only: never in a URL, a message or a log.
Every failure is a :class:`KnobReply` whose ``error`` is the engine's own message when it
sent one (a 400 naming the knob, 401 no token, 403 a wrong one, 404 the admin API off) or
says the engine could not be reached.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import httpx

TIMEOUT_SECONDS = 5.0
#: The knobs the engine changes while running (``engine.config.LIVE_KNOBS``, and the
#: server's admission and fault knobs); others are shown but not offered for edit.
EDITABLE_KNOBS = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "num_usable_gpu_blocks",
    "max_waiting_requests",
    "max_concurrency_per_tenant",
    "step_delay_seconds",
    "prefill_seconds_per_token",
)
_HINTS = {
    401: "the engine wants its admin token (TAILWATCH_ADMIN_TOKEN, or type it above)",
    403: "the engine refused this admin token",
    404: "the engine's admin API is off: start it with TAILWATCH_ADMIN_TOKEN set",
}


@dataclass(frozen=True)
class KnobReply:
    """``knobs`` in force (after a PATCH: with ``changes``, the engine's events), or
    ``error``: what went wrong, for the page to show."""

    knobs: Mapping[str, Any] = field(default_factory=dict)
    changes: tuple[Mapping[str, Any], ...] = ()
    error: str = ""
    status_code: int | None = None


def engine_url(target: str) -> str | None:
    """The engine's base URL for a scrape target named ``host:port`` (the collector's
    default name, ``collectors.config.target_from_url``), or a target that is a URL;
    ``None`` when the name is neither (the page asks for the URL)."""
    text = target.strip()
    if "://" in text:
        parts = urlsplit(text)
        if parts.scheme in ("http", "https") and parts.hostname:
            return f"{parts.scheme}://{parts.netloc}"
        return None
    try:
        parts = urlsplit(f"http://{text}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or port is None or "/" in text:
        return None
    return f"http://{parts.netloc}"


def _headers(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"} if token else {}


def _error(reply: httpx.Response, what: str) -> KnobReply:
    message = ""
    try:
        body = reply.json()
        if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
            message = str(body["error"].get("message", ""))
    except ValueError:
        message = reply.text[:200]
    hint = _HINTS.get(reply.status_code, "")
    text = f"{what} answered {reply.status_code}: {message or reply.reason_phrase}"
    return KnobReply(error=text + (f" ({hint})" if hint else ""), status_code=reply.status_code)


def _unreachable(url: str, error: httpx.HTTPError) -> KnobReply:
    return KnobReply(error=f"cannot reach the engine at {url}: {type(error).__name__} {error}")


def read_knobs(url: str, token: str, *, transport: httpx.BaseTransport | None = None) -> KnobReply:
    """The knobs in force at ``url`` (``GET /admin/config``)."""
    try:
        with httpx.Client(timeout=TIMEOUT_SECONDS, transport=transport) as client:
            reply = client.get(f"{url}/admin/config", headers=_headers(token))
    except httpx.HTTPError as error:
        return _unreachable(url, error)
    if reply.status_code != 200:
        return _error(reply, "GET /admin/config")
    try:
        knobs = reply.json()
    except ValueError:
        return KnobReply(error=f"GET /admin/config at {url} did not answer JSON")
    if not isinstance(knobs, Mapping):
        return KnobReply(error=f"GET /admin/config at {url} answered {type(knobs).__name__}")
    return KnobReply(knobs=dict(knobs), status_code=200)


def patch_knobs(
    url: str,
    token: str,
    changes: Mapping[str, Any],
    *,
    transport: httpx.BaseTransport | None = None,
) -> KnobReply:
    """Apply ``changes`` (``PATCH /admin/config``, all or nothing); the engine validates."""
    try:
        with httpx.Client(timeout=TIMEOUT_SECONDS, transport=transport) as client:
            reply = client.patch(f"{url}/admin/config", json=dict(changes), headers=_headers(token))
    except httpx.HTTPError as error:
        return _unreachable(url, error)
    if reply.status_code != 200:
        return _error(reply, "PATCH /admin/config")
    try:
        body = reply.json()
    except ValueError:
        body = None
    if not isinstance(body, Mapping):
        return KnobReply(error=f"PATCH /admin/config at {url} did not answer a JSON object")
    return KnobReply(
        knobs=dict(body.get("config", {})),
        changes=tuple(body.get("changes", ())),
        status_code=200,
    )


def parse_value(text: str, current: Any) -> tuple[Any, str]:
    """``(value, error)``: a typed value as JSON (``512``, ``true``, ``null``, ``0.05``), a
    bare word as a string. ``error`` names the text when it is empty or not finite; the
    engine judges the rest (its 400 names the knob)."""
    raw = text.strip()
    if not raw:
        return None, "the new value is empty: type a number, true/false, or null"
    try:
        value = json.loads(raw)
    except ValueError:
        value = raw
    if isinstance(value, float) and not math.isfinite(value):
        return None, f"{raw!r} is not a finite number"
    if isinstance(current, bool) and isinstance(value, str) and value.lower() in ("on", "off"):
        value = value.lower() == "on"
    return value, ""
