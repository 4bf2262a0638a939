"""Request fields this engine accepts only at the value that means "off".

Each changes what is generated (tools, structured output, echo, beam search, ...) and is
not implemented, so a request that turns one on gets a 400 naming the field rather than
an answer that silently ignores it. The default value — which OpenAI's SDKs and
frameworks send on every call (``n=1``, ``tools=[]``) — is accepted, and so is null.
(Structured outputs — ``response_format``, ``structured_outputs``, ``guided_*`` — are
served: ``engine/server/structured_outputs.py``.) Fields that do not change the output (``store``,
``metadata``, ``service_tier``, ...) and unknown fields are ignored, as vLLM does.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class DefaultOnly:
    """What a field accepts (besides null), said for the error message."""

    accepts: Callable[[Any], bool]
    accepted: str


def _equals(*values: Any) -> DefaultOnly:
    # NOTE: type-exact, so True does not pass for 1 nor 0 for false
    def accepts(value: Any) -> bool:
        return any(type(value) is type(v) and value == v for v in values)

    return DefaultOnly(accepts, " or ".join(_json(v) for v in values))


def _equal_to(default: list[Any] | dict[str, Any]) -> DefaultOnly:
    """A JSON array or object field whose only "off" value is ``default``."""
    return DefaultOnly(lambda value: value == default, json.dumps(default))


# Only null (or leaving the field out) means off.
_NULL = DefaultOnly(lambda value: False, "")


def _json(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return repr(value) if isinstance(value, str) else str(value)


# Both routes (OpenAI's fields first, then vLLM's extras).
GENERATION = {
    "best_of": _equals(1),
    "use_beam_search": _equals(False),
    "prompt_logprobs": _NULL,
    "allowed_token_ids": _NULL,
    "bad_words": _equal_to([]),
    "logits_processors": _NULL,
    "truncate_prompt_tokens": _NULL,
    "include_stop_str_in_output": _equals(False),
    "skip_special_tokens": _equals(True),
    "return_tokens_as_token_ids": _equals(False),
}
CHAT = {
    "tools": _equal_to([]),
    "tool_choice": _equals("none"),
    "functions": _equal_to([]),
    "function_call": _equals("none"),
    "audio": _NULL,
    "modalities": _equal_to(["text"]),
    "web_search_options": _NULL,
    "verbosity": _equals("medium"),
    "echo": _equals(False),
    "add_generation_prompt": _equals(True),
    "continue_final_message": _equals(False),
    "chat_template": _NULL,
    "chat_template_kwargs": _equal_to({}),
    "documents": _NULL,
}
STREAM_OPTIONS = {
    "continuous_usage_stats": _equals(False),
}
COMPLETION = {
    "echo": _equals(False),
    "suffix": _equals(""),
}


def require_default(table: dict[str, DefaultOnly], name: str, value: Any) -> Any:
    """``value`` if it means "off" for field ``name``; else ``ValueError`` saying why."""
    if value is None:
        return value
    rule = table[name]
    if not rule.accepts(value):
        also = f" or {rule.accepted}" if rule.accepted else ""
        raise ValueError(
            f"not supported by this server (got {_shown(value)}); send null{also} or omit the field"
        )
    return value


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
