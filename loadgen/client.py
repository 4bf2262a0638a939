"""One streamed request over the OpenAI API, timed on the client.

TTFT is from the send to the first chunk that delivers tokens; each later such chunk adds
one inter-token gap (a server that coalesces tokens into one chunk gives fewer gaps); e2e ends at ``[DONE]``. Token counts come from the ``usage`` chunk
(``stream_options.include_usage``), so they are the server's own counts.
"""

from __future__ import annotations

import json
import math
import time

import httpx

from loadgen.record import RequestResult
from loadgen.workload import ScheduledRequest, schema_of

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"


def request_body(request: ScheduledRequest, model: str, route: str) -> dict:
    body: dict = {
        "model": request.model or model,
        "max_tokens": request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
        # NOTE: the output length is part of the workload, so the model may not end early.
        "ignore_eos": True,
        "temperature": 0.0,
    }
    if route == CHAT:
        text = "".join(map(chr, request.prompt_token_ids))
        body["messages"] = [{"role": "user", "content": text}]
    else:
        body["prompt"] = list(request.prompt_token_ids)
    if request.schema is not None:
        schema = schema_of(request.stream, request.schema)
        json_schema = {"name": f"schema_{request.schema}", "schema": schema}
        body["response_format"] = {"type": "json_schema", "json_schema": json_schema}
    if request.tenant is not None:
        body["user"] = request.tenant
    if request.priority is not None:
        body["priority"] = request.priority
    return body


def request_headers(request: ScheduledRequest) -> dict[str, str]:
    headers = {}
    if request.tenant is not None:
        headers["X-Tenant"] = request.tenant
    if request.priority is not None:
        headers["X-Priority"] = str(request.priority)
    return headers


async def send(
    client: httpx.AsyncClient,
    base_url: str,
    route: str,
    body: dict,
    headers: dict[str, str],
    result: RequestResult,
) -> None:
    """Fill ``result`` in place (so a cancelled request keeps what was measured)."""
    start = time.perf_counter()
    last = None
    try:
        async with client.stream("POST", base_url + route, json=body, headers=headers) as reply:
            result.status = reply.status_code
            if reply.status_code != 200:
                result.retry_after_seconds = _retry_after_seconds(reply.headers.get("retry-after"))
                text = (await reply.aread()).decode(errors="replace")
                result.error = _error_code(text) or f"http_{reply.status_code}"
                return
            async for line in reply.aiter_lines():
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                chunk = json.loads(data)
                if "error" in chunk:
                    result.error = str(chunk["error"].get("code") or chunk["error"].get("type"))
                    continue
                result.response_id = result.response_id or chunk.get("id", "")
                for choice in chunk.get("choices") or ():
                    result.finish_reason = choice.get("finish_reason") or result.finish_reason
                if _is_token_event(chunk):
                    now = time.perf_counter()
                    if last is None:
                        result.ttft_seconds = now - start
                    else:
                        result.itl_seconds.append(now - last)
                    last = now
                usage = chunk.get("usage")
                if usage:
                    result.prompt_tokens = usage.get("prompt_tokens", 0)
                    result.output_tokens = usage.get("completion_tokens", 0)
    except httpx.TimeoutException:
        result.error = "timeout"
    except httpx.TransportError as error:
        result.error = f"transport: {type(error).__name__}"
    except ValueError as error:
        result.error = f"bad_stream: {error}"
    finally:
        result.e2e_seconds = time.perf_counter() - start


def _is_token_event(chunk: dict) -> bool:
    """A chunk that delivers generated tokens. Its text may be empty (a byte-level model's
    partial UTF-8 waits in the detokenizer); the chat stream's first, role-only chunk is
    not one: a server may send it before any token exists."""
    choices = chunk.get("choices") or ()
    return any("role" not in (choice.get("delta") or {}) for choice in choices)


def _retry_after_seconds(header: str | None) -> float | None:
    """Retry-After as seconds: the delay-seconds form only (what vLLM and our engine send);
    an HTTP-date or garbage is None rather than a guess."""
    if header is None:
        return None
    try:
        seconds = float(header.strip())
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def _error_code(text: str) -> str:
    try:
        error = json.loads(text).get("error") or {}
    except (ValueError, AttributeError):
        return ""
    return str(error.get("code") or error.get("type") or "") if isinstance(error, dict) else ""
