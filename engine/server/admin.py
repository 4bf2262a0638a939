"""The admin API: live knobs, fault injection and the record of every change.

Mounted only when an admin token is configured (``TAILWATCH_ADMIN_TOKEN``); otherwise
``/admin/*`` is 404 like any unknown path. Every call needs ``Authorization: Bearer
<token>``: none is 401, a wrong one 403, and neither reads the body or changes a thing.

- ``GET /admin/config``: the knobs in force (``AsyncEngine.knobs()``).
- ``PATCH /admin/config``: a JSON object of knob → value, validated all or nothing and
  applied between two engine steps; a bad value is a 400 naming the knob.
- ``GET /admin/events``: the changes so far, oldest first, with epoch ``time``.
"""

from __future__ import annotations

import hmac
import json
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends, Request

from engine.errors import ConfigError
from engine.server.context import server_context
from engine.server.errors import APIError, from_engine_error

if TYPE_CHECKING:
    from engine.llm_engine import KnobChange


def require_admin(request: Request) -> None:
    token = server_context(request).admin_token
    scheme, _, given = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not given.strip():
        raise APIError(
            401,
            "the admin API needs an 'Authorization: Bearer <token>' header",
            code="missing_token",
            headers={"WWW-Authenticate": "Bearer"},
        )
    if token is None or not hmac.compare_digest(given.strip().encode(), token.encode()):
        raise APIError(403, "the admin token is not valid", code="invalid_token")


router = APIRouter(prefix="/admin", dependencies=[Depends(require_admin)])


@router.get("/config")
async def get_config(request: Request) -> dict[str, Any]:
    return server_context(request).async_engine.knobs()


@router.patch("/config")
async def patch_config(request: Request) -> dict[str, Any]:
    # NOTE: the body is read here, after the token check, so that an unauthorised call
    # learns nothing about what it sent.
    try:
        changes = json.loads(await request.body())
    except ValueError as error:
        raise APIError(400, f"the request body is not valid JSON: {error}") from None
    if not isinstance(changes, dict):
        raise APIError(
            400, 'the body must be a JSON object of knob → value, e.g. {"max_num_seqs": 8}'
        )
    async_engine = server_context(request).async_engine
    try:
        applied = await async_engine.update_knobs(changes)
    except ConfigError as error:
        raise from_engine_error(error) from None
    events = [_event(change) for change in applied]
    return {"changes": events, "config": async_engine.knobs()}


@router.get("/events")
async def get_events(request: Request) -> dict[str, Any]:
    events = list(server_context(request).async_engine.events)
    return {"events": [_event(change) for change in events]}


def _event(change: KnobChange) -> dict[str, Any]:
    return {
        "time": round(change.wall_time, 6),
        "knob": change.knob,
        "old": change.old_value,
        "new": change.new_value,
    }
