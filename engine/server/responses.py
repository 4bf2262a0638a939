"""Response bodies of the OpenAI API routes, as plain dicts (one per SSE chunk, so cheap).

Shapes follow OpenAI's (and vLLM's): ``chat.completion`` / ``chat.completion.chunk`` and
``text_completion``, ``usage`` with ``prompt_tokens_details.cached_tokens``, and
``finish_reason`` ``stop`` or ``length`` (``abort`` when the server gave up on the request,
as vLLM reports it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.outputs import RequestOutput


@dataclass(frozen=True)
class ResponseMeta:
    """What every body and chunk of one response repeats."""

    response_id: str
    created: int
    model: str
    include_usage: bool = False


def usage(output: RequestOutput) -> dict[str, Any]:
    return {
        "prompt_tokens": output.num_prompt_tokens,
        "completion_tokens": output.num_output_tokens,
        "total_tokens": output.num_prompt_tokens + output.num_output_tokens,
        "prompt_tokens_details": {"cached_tokens": output.num_cached_tokens},
    }


def _envelope(meta: ResponseMeta, kind: str, choices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": meta.response_id,
        "object": kind,
        "created": meta.created,
        "model": meta.model,
        "choices": choices,
    }


def chat_completion(meta: ResponseMeta, text: str, last: RequestOutput) -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "logprobs": None,
        "finish_reason": last.finish_reason,
        "stop_reason": last.stop_reason,
    }
    return {**_envelope(meta, "chat.completion", [choice]), "usage": usage(last)}


def text_completion(meta: ResponseMeta, text: str, last: RequestOutput) -> dict[str, Any]:
    choice = {
        "index": 0,
        "text": text,
        "logprobs": None,
        "finish_reason": last.finish_reason,
        "stop_reason": last.stop_reason,
    }
    return {**_envelope(meta, "text_completion", [choice]), "usage": usage(last)}


def chat_chunk(
    meta: ResponseMeta, delta: dict[str, Any], finish_reason: str | None = None
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
    chunk = _envelope(meta, "chat.completion.chunk", [choice])
    if meta.include_usage:
        chunk["usage"] = None  # NOTE: OpenAI sends null usage on every chunk but the last
    return chunk


def text_chunk(meta: ResponseMeta, text: str, finish_reason: str | None = None) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}
    chunk = _envelope(meta, "text_completion", [choice])
    if meta.include_usage:
        chunk["usage"] = None
    return chunk


def usage_chunk(meta: ResponseMeta, kind: str, last: RequestOutput) -> dict[str, Any]:
    """The extra last chunk of ``stream_options.include_usage``: no choices, only usage."""
    return {**_envelope(meta, kind, []), "usage": usage(last)}
