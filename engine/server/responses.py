"""Response bodies of the OpenAI API routes, as plain dicts (one per SSE chunk, so cheap).

Shapes follow OpenAI's (and vLLM's): ``chat.completion`` / ``chat.completion.chunk`` and
``text_completion``, ``usage`` with ``prompt_tokens_details.cached_tokens``, and
``finish_reason`` ``stop`` or ``length`` (``abort`` when the server gave up on the request,
as vLLM reports it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from engine.outputs import RequestOutput, TokenLogprobs

# vLLM's floor for a logprob in a response: -inf is not JSON.
MIN_LOGPROB = -9999.0


@dataclass(frozen=True)
class ResponseMeta:
    """What every body and chunk of one response repeats."""

    response_id: str
    created: int
    model: str
    include_usage: bool = False
    # a token id's text, set when the request asked for logprobs
    decode_token: Callable[[int], str] | None = None


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


def chat_logprobs(meta: ResponseMeta, logprobs: Sequence[TokenLogprobs]) -> dict[str, Any] | None:
    """OpenAI's chat ``logprobs``: ``{"content": [{token, logprob, bytes, top_logprobs}]}``."""
    if meta.decode_token is None:
        return None

    def entry(token: str, logprob: float) -> dict[str, Any]:
        return {
            "token": token,
            "logprob": logprob,
            "bytes": list(token.encode("utf-8", errors="replace")),
        }

    content = [
        {**entry(*sampled), "top_logprobs": [entry(*t) for t in top]}
        for sampled, top in _decoded(meta.decode_token, logprobs)
    ]
    return {"content": content, "refusal": None}


def completion_logprobs(
    meta: ResponseMeta, logprobs: Sequence[TokenLogprobs], text_offset: int = 0
) -> tuple[dict[str, Any] | None, int]:
    """OpenAI's completions ``logprobs`` (``tokens``, ``token_logprobs``, ``top_logprobs``,
    ``text_offset``) and the offset after the last token, for the next chunk.

    As in vLLM, each ``top_logprobs`` dict holds the sampled token and the top N, keyed by
    token text, and offsets count the characters of the token texts from ``text_offset``.
    """
    if meta.decode_token is None:
        return None, text_offset
    tokens, token_logprobs, top_logprobs, offsets = [], [], [], []
    for (token, logprob), top in _decoded(meta.decode_token, logprobs):
        tokens.append(token)
        token_logprobs.append(logprob)
        top_logprobs.append(dict([(token, logprob), *top]))
        offsets.append(text_offset)
        text_offset += len(token)
    body = {
        "tokens": tokens,
        "token_logprobs": token_logprobs,
        "top_logprobs": top_logprobs,
        "text_offset": offsets,
    }
    return body, text_offset


def _decoded(
    decode: Callable[[int], str], logprobs: Sequence[TokenLogprobs]
) -> Iterator[tuple[tuple[str, float], list[tuple[str, float]]]]:
    """Per token, (text, logprob) of the sampled token and of its top N, as both
    formats show them: decoded, and with -inf raised to ``MIN_LOGPROB``."""

    def shown(token_id: int, logprob: float) -> tuple[str, float]:
        return decode(token_id), max(logprob, MIN_LOGPROB)

    for lp in logprobs:
        yield shown(lp.token_id, lp.logprob), [shown(*t) for t in lp.top]


def chat_completion(
    meta: ResponseMeta, text: str, last: RequestOutput, logprobs: Sequence[TokenLogprobs] = ()
) -> dict[str, Any]:
    choice = {
        "index": 0,
        "message": {"role": "assistant", "content": text},
        "logprobs": chat_logprobs(meta, logprobs),
        "finish_reason": last.finish_reason,
        "stop_reason": last.stop_reason,
    }
    return {**_envelope(meta, "chat.completion", [choice]), "usage": usage(last)}


def text_completion(
    meta: ResponseMeta, text: str, last: RequestOutput, logprobs: Sequence[TokenLogprobs] = ()
) -> dict[str, Any]:
    choice = {
        "index": 0,
        "text": text,
        "logprobs": completion_logprobs(meta, logprobs)[0],
        "finish_reason": last.finish_reason,
        "stop_reason": last.stop_reason,
    }
    return {**_envelope(meta, "text_completion", [choice]), "usage": usage(last)}


def chat_chunk(
    meta: ResponseMeta,
    delta: dict[str, Any],
    finish_reason: str | None = None,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    choice = {"index": 0, "delta": delta, "logprobs": logprobs, "finish_reason": finish_reason}
    chunk = _envelope(meta, "chat.completion.chunk", [choice])
    if meta.include_usage:
        chunk["usage"] = None  # NOTE: OpenAI sends null usage on every chunk but the last
    return chunk


def text_chunk(
    meta: ResponseMeta,
    text: str,
    finish_reason: str | None = None,
    logprobs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    choice = {"index": 0, "text": text, "logprobs": logprobs, "finish_reason": finish_reason}
    chunk = _envelope(meta, "text_completion", [choice])
    if meta.include_usage:
        chunk["usage"] = None
    return chunk


def usage_chunk(meta: ResponseMeta, kind: str, last: RequestOutput) -> dict[str, Any]:
    """The extra last chunk of ``stream_options.include_usage``: no choices, only usage."""
    return {**_envelope(meta, kind, []), "usage": usage(last)}
