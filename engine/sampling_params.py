"""Per-request sampling parameters, validated at construction (vLLM's names)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from engine.errors import RequestError
from engine.structured.params import StructuredOutputsParams

# vLLM's rule: a temperature this small is greedy (dividing logits by it overflows).
GREEDY_TEMPERATURE_EPSILON = 1e-5
MIN_SEED, MAX_SEED = -(2**63), 2**63 - 1  # what torch.Generator.manual_seed takes
MAX_TOP_K = 2**31 - 1
# vLLM's default --max-logprobs; OpenAI allows 20 top logprobs in chat, 5 in completions.
MAX_LOGPROBS = 20
MAX_ABS_PENALTY = 2.0  # OpenAI's range for presence_penalty and frequency_penalty
MAX_ABS_LOGIT_BIAS = 100.0  # OpenAI's range for a logit_bias value


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens and when to stop.

    ``temperature`` 0 (or below 1e-5) means greedy. ``top_k`` 0 or -1 disables top-k; ``top_p`` 1.0
    disables nucleus sampling; ``min_p`` 0 disables min-p. ``seed`` makes a request's random
    draws reproducible whatever else is in the batch. Stop strings are removed from the
    returned text.

    Penalties follow vLLM: ``presence_penalty`` and ``frequency_penalty`` (OpenAI's, in
    [-2, 2]) act on the output tokens so far; ``repetition_penalty`` (> 0, 1 is off) on
    prompt and output tokens. ``logit_bias`` maps token ids to a bias in [-100, 100] added
    to the logits (its ids are checked against the vocabulary by the engine).
    ``min_tokens`` suppresses EOS and ``stop_token_ids`` until that many tokens are out.
    ``logprobs`` None returns none; N returns the sampled token's log-probability and the N
    most likely tokens' (0 to 20), taken from the model's raw distribution (vLLM's default).
    ``structured_outputs`` constrains the output to a JSON schema, a regex, a choice or a
    grammar (``engine.structured``); the request stops when the constraint is complete.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    min_p: float = 0.0
    seed: int | None = None
    stop: tuple[str, ...] = field(default=())
    stop_token_ids: tuple[int, ...] = field(default=())
    ignore_eos: bool = False
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    repetition_penalty: float = 1.0
    # (token id, bias) pairs, sorted by id; a mapping is accepted and converted
    logit_bias: tuple[tuple[int, float], ...] = field(default=())
    min_tokens: int = 0
    logprobs: int | None = None
    structured_outputs: StructuredOutputsParams | None = None

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        object.__setattr__(self, "logit_bias", _logit_bias_pairs(self.logit_bias))
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise RequestError(f"max_tokens={self.max_tokens!r}: must be an integer")
        if self.max_tokens < 1:
            raise RequestError(f"max_tokens={self.max_tokens}: must be at least 1")
        if not self.temperature >= 0.0 or math.isinf(self.temperature):
            raise RequestError(
                f"temperature={self.temperature}: must be finite and >= 0 (0 means greedy)"
            )
        if not 0.0 < self.top_p <= 1.0:
            raise RequestError(f"top_p={self.top_p}: must be in (0, 1]")
        if not isinstance(self.top_k, int) or not -1 <= self.top_k <= MAX_TOP_K:
            raise RequestError(
                f"top_k={self.top_k!r}: must be -1, 0 (disabled) or a positive integer "
                f"up to {MAX_TOP_K}"
            )
        if not 0.0 <= self.min_p <= 1.0:
            raise RequestError(f"min_p={self.min_p}: must be in [0, 1] (0 disables it)")
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not MIN_SEED <= self.seed <= MAX_SEED
        ):
            raise RequestError(f"seed={self.seed!r}: must be a 64-bit signed integer")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise RequestError(f"stop={self.stop!r}: stop strings must be non-empty strings")
        for name in ("presence_penalty", "frequency_penalty"):
            value = getattr(self, name)
            if not -MAX_ABS_PENALTY <= value <= MAX_ABS_PENALTY:
                raise RequestError(f"{name}={value}: must be in [-2, 2] (0 is off)")
        if not 0.0 < self.repetition_penalty < math.inf:
            raise RequestError(
                f"repetition_penalty={self.repetition_penalty}: must be finite and > 0 (1 is off)"
            )
        if not _is_int(self.min_tokens) or not 0 <= self.min_tokens <= self.max_tokens:
            raise RequestError(
                f"min_tokens={self.min_tokens!r}: must be an integer in [0, max_tokens="
                f"{self.max_tokens}]"
            )
        if self.logprobs is not None and (
            not _is_int(self.logprobs) or not 0 <= self.logprobs <= MAX_LOGPROBS
        ):
            raise RequestError(
                f"logprobs={self.logprobs!r}: must be an integer in [0, {MAX_LOGPROBS}]"
            )
        if self.structured_outputs is not None and not isinstance(
            self.structured_outputs, StructuredOutputsParams
        ):
            raise RequestError(
                f"structured_outputs={self.structured_outputs!r}: must be a "
                "StructuredOutputsParams or None"
            )

    @property
    def is_greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE_EPSILON

    @property
    def has_penalties(self) -> bool:
        return (
            self.presence_penalty != 0.0
            or self.frequency_penalty != 0.0
            or self.repetition_penalty != 1.0
        )


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _logit_bias_pairs(
    bias: Mapping[int, float] | tuple[tuple[int, float], ...] | None,
) -> tuple[tuple[int, float], ...]:
    pairs = bias.items() if isinstance(bias, Mapping) else (bias or ())
    result: dict[int, float] = {}
    for token_id, value in pairs:
        if not _is_int(token_id) or token_id < 0:
            raise RequestError(f"logit_bias={token_id!r}: token ids must be integers >= 0")
        problem = logit_bias_value_problem(token_id, value)
        if problem is not None:
            raise RequestError(f"logit_bias={value!r}: {problem}")
        result[token_id] = float(value)
    return tuple(sorted(result.items()))


def logit_bias_value_problem(token_id: int, value: object) -> str | None:
    """What is wrong with ``value`` as the bias of ``token_id`` (None: nothing); the API
    edge (``engine/server/protocol.py``) and ``SamplingParams`` both word it so."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"the bias of token {token_id} must be a number in [-100, 100] (got {value!r})"
    if not -MAX_ABS_LOGIT_BIAS <= value <= MAX_ABS_LOGIT_BIAS:
        return f"the bias of token {token_id} must be in [-100, 100] (got {value})"
    return None
