"""``--speculative-config``: vLLM's JSON flag and keys, validated once into a frozen value.

Only vLLM's ``ngram`` method (prompt lookup) is served: it needs no draft model. The keys
and their defaults are vLLM's (``vllm/config/speculative.py``): ``num_speculative_tokens``
is required; with neither ``prompt_lookup_min`` nor ``prompt_lookup_max`` both are 5, with
one of them the other takes its value, and min may not exceed max.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

NGRAM = "ngram"
KNOB = "speculative_config"
# NOTE: vLLM's default when neither lookup bound is given ("arbitrarily chosen", its TODO says).
DEFAULT_PROMPT_LOOKUP = 5
# NOTE: vLLM sets no bound; one series of vllm:spec_decode_num_accepted_tokens_per_pos is made
# per position, so an unbounded k would let a flag make unbounded series.
MAX_SPECULATIVE_TOKENS = 64
KEYS = ("method", "num_speculative_tokens", "prompt_lookup_max", "prompt_lookup_min")
# vLLM's older spelling of the method ({"model": "[ngram]"} or "ngram" as the model).
_NGRAM_NAMES = ("ngram", "[ngram]")


def _fail(why: str) -> ConfigError:
    return ConfigError(f"{KNOB}: {why}")


def _positive_int(key: str, value: Any, upper: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(f"{key}={value!r}: must be a positive integer")
    if upper is not None and value > upper:
        raise _fail(f"{key}={value}: must be at most {upper}")
    return value


@dataclass(frozen=True)
class SpeculativeConfig:
    """n-gram speculation: propose up to ``num_speculative_tokens`` tokens that followed the
    longest earlier match (``prompt_lookup_min`` to ``prompt_lookup_max`` tokens long) of the
    sequence's suffix, and verify them in one forward pass."""

    num_speculative_tokens: int
    prompt_lookup_max: int = DEFAULT_PROMPT_LOOKUP
    prompt_lookup_min: int = DEFAULT_PROMPT_LOOKUP
    method: str = NGRAM

    def __post_init__(self) -> None:
        if self.method not in _NGRAM_NAMES:
            raise _fail(
                f"method={self.method!r}: only 'ngram' (prompt lookup, no draft model) is "
                "supported by this engine"
            )
        object.__setattr__(self, "method", NGRAM)
        _positive_int("num_speculative_tokens", self.num_speculative_tokens, MAX_SPECULATIVE_TOKENS)
        _positive_int("prompt_lookup_min", self.prompt_lookup_min)
        _positive_int("prompt_lookup_max", self.prompt_lookup_max)
        if self.prompt_lookup_min > self.prompt_lookup_max:
            raise _fail(
                f"prompt_lookup_min={self.prompt_lookup_min} must be <= "
                f"prompt_lookup_max={self.prompt_lookup_max}"
            )

    @classmethod
    def parse(cls, value: Any) -> SpeculativeConfig | None:
        """The config of a flag's JSON text, a mapping (a YAML ``engine:`` key) or an instance;
        None (or an empty string) is no speculation. ``ConfigError`` naming the key otherwise."""
        if value is None or isinstance(value, SpeculativeConfig):
            return value
        if isinstance(value, str):
            if not value.strip():
                return None
            try:
                value = json.loads(value)
            except json.JSONDecodeError as error:
                raise _fail(
                    f"not valid JSON ({error.msg} at character {error.pos}); pass an object "
                    'such as \'{"method": "ngram", "num_speculative_tokens": 3}\''
                ) from None
        if not isinstance(value, Mapping):
            raise _fail(f"must be a JSON object, got {_shown(value)}")
        unknown = sorted(str(k) for k in value if k not in (*KEYS, "model"))
        if unknown:
            raise _fail(f"unknown keys {unknown}; this engine takes {', '.join(KEYS)}")
        keys = dict(value)
        method = keys.pop("method", None)
        model = keys.pop("model", None)
        if method is None:
            method = model if model in _NGRAM_NAMES else None
        elif model is not None and model not in _NGRAM_NAMES:
            raise _fail(f"model={model!r}: a draft model is not supported; use method 'ngram'")
        if method is None:
            raise _fail("method is required; this engine supports 'ngram'")
        if method not in _NGRAM_NAMES:
            raise _fail(
                f"method={method!r}: only 'ngram' (prompt lookup, no draft model) is "
                "supported by this engine"
            )
        if "num_speculative_tokens" not in keys:
            raise _fail("num_speculative_tokens is required (the most draft tokens per step)")
        low, high = keys.get("prompt_lookup_min"), keys.get("prompt_lookup_max")
        if low is None and high is None:
            low = high = DEFAULT_PROMPT_LOOKUP
        elif low is None:
            low = high
        elif high is None:
            high = low
        return cls(
            num_speculative_tokens=keys["num_speculative_tokens"],
            prompt_lookup_max=high,
            prompt_lookup_min=low,
            method=method,
        )

    def to_json(self) -> str:
        """The flag's JSON text (keys sorted): what ``parse`` reads back."""
        return json.dumps(
            {
                "method": self.method,
                "num_speculative_tokens": self.num_speculative_tokens,
                "prompt_lookup_max": self.prompt_lookup_max,
                "prompt_lookup_min": self.prompt_lookup_min,
            },
            sort_keys=True,
            separators=(",", ":"),
        )


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
