"""Errors in OpenAI's shape, and the handlers that map every failure onto one.

Every error body is ``{"error": {"message", "type", "param", "code"}}``, the shape the
``openai`` client reads into ``APIStatusError.message/.type/.param/.code``. The status
decides which exception class the client raises: 400 ``BadRequestError``, 401
``AuthenticationError``, 403 ``PermissionDeniedError``, 404 ``NotFoundError``, 429
``RateLimitError``, 5xx ``InternalServerError``. A caller's mistake is always a 4xx; a
500 says only that the server failed, never why (the traceback goes to the log).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from engine.async_engine import (
    EngineDeadError,
    EngineDrainingError,
    QueueFullError,
    StepFailedError,
)
from engine.errors import ConfigError, EngineError, RequestError

logger = logging.getLogger("tailwatch.server")

# OpenAI's error types by status (what api.openai.com sends).
_ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    429: "rate_limit_error",
    500: "server_error",
    503: "service_unavailable",
}
# Engine messages name the offending field first: "max_tokens=0: must be at least 1".
_LEADING_FIELD = re.compile(r"^([a-z_]+)=")
# Where FastAPI found a field; not part of the field's name.
_SOURCES = ("body", "header", "query", "path", "cookie")


class APIError(Exception):
    """An error the server answers with; raise it from a route."""

    def __init__(
        self,
        status_code: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.message = message
        self.param = param
        self.code = code
        self.headers = headers


def error_body(
    status_code: int, message: str, param: str | None = None, code: str | None = None
) -> dict[str, Any]:
    default = "server_error" if status_code >= 500 else "invalid_request_error"
    error_type = _ERROR_TYPES.get(status_code, default)
    return {"error": {"message": message, "type": error_type, "param": param, "code": code}}


def error_response(error: APIError) -> JSONResponse:
    return JSONResponse(
        error_body(error.status_code, error.message, error.param, error.code),
        status_code=error.status_code,
        headers=error.headers,
    )


def from_engine_error(error: EngineError) -> APIError:
    """The HTTP answer to an engine refusal (bad input, full queue, draining)."""
    if isinstance(error, QueueFullError):
        return APIError(
            429,
            str(error),
            code=error.reason,
            headers={"Retry-After": str(error.retry_after_seconds)},
        )
    if isinstance(error, EngineDrainingError):
        return APIError(503, str(error), code="draining")
    # NOTE: an engine failure is not the caller's fault: 500 for a request a failed step
    # took down (the engine goes on), 503 once the engine is dead (try another replica).
    if isinstance(error, StepFailedError):
        return APIError(500, str(error), code="engine_step_failed")
    if isinstance(error, EngineDeadError):
        return APIError(503, str(error), code="engine_dead")
    if isinstance(error, RequestError | ConfigError):
        match = _LEADING_FIELD.match(str(error))
        return APIError(400, str(error), param=match.group(1) if match else None)
    # the engine loop died: not the caller's fault, and nothing they can fix
    logger.error("engine failure: %s", error)
    return APIError(500, "the engine failed; see the server log", code="engine_error")


def _validation_message(exc: RequestValidationError) -> tuple[str, str | None]:
    errors = exc.errors()
    if not errors:
        return "invalid request", None
    first = errors[0]
    if first.get("type") == "json_invalid":
        detail = (first.get("ctx") or {}).get("error", "")
        return f"the request body is not valid JSON: {detail}".rstrip(": "), None
    path = _field_path(first.get("loc", ()))
    message = first.get("msg", "invalid value").removeprefix("Value error, ")
    if not path:
        return f"the request body is invalid: {message}", None
    num_more = len(errors) - 1
    more = f" (and {num_more} more problem{'s' if num_more > 1 else ''})" if num_more else ""
    return f"{path}: {message}{more}", path


def _field_path(loc: Sequence[str | int]) -> str:
    """``("body", "messages", 0, "content")`` → ``messages[0].content``;
    ``("header", "x-priority")`` → ``x-priority``."""
    path = ""
    for part in loc[1:] if loc and loc[0] in _SOURCES else loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path


def install_error_handlers(app: FastAPI) -> None:
    """Map validation, HTTP, engine and unexpected errors onto OpenAI-shaped bodies."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        # NOTE: OpenAI and vLLM answer an invalid body with 400; FastAPI's default is 422,
        # which the openai client would raise as UnprocessableEntityError.
        message, param = _validation_message(exc)
        return error_response(APIError(400, message, param=param))

    @app.exception_handler(HTTPException)
    async def _http(request: Request, exc: HTTPException) -> JSONResponse:
        return error_response(
            APIError(exc.status_code, str(exc.detail), headers=getattr(exc, "headers", None))
        )

    @app.exception_handler(EngineError)
    async def _engine(request: Request, exc: EngineError) -> JSONResponse:
        return error_response(from_engine_error(exc))

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # NOTE: Starlette re-raises after sending this, so the server logs the traceback.
        return error_response(APIError(500, "internal server error", code="internal_error"))
