"""Per-request sampling parameters, validated at construction (vLLM's names)."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.errors import RequestError

# vLLM's rule: a temperature this small is greedy (dividing logits by it overflows).
GREEDY_TEMPERATURE_EPSILON = 1e-5
MIN_SEED, MAX_SEED = -(2**63), 2**63 - 1  # what torch.Generator.manual_seed takes
MAX_TOP_K = 2**31 - 1


@dataclass(frozen=True)
class SamplingParams:
    """How to pick tokens and when to stop.

    ``temperature`` 0 (or below 1e-5) means greedy. ``top_k`` 0 or -1 disables top-k; ``top_p`` 1.0
    disables nucleus sampling. ``seed`` makes a request's random draws reproducible
    whatever else is in the batch. Stop strings are removed from the returned text.
    """

    max_tokens: int = 16
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int | None = None
    stop: tuple[str, ...] = field(default=())
    stop_token_ids: tuple[int, ...] = field(default=())
    ignore_eos: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.stop, str):
            object.__setattr__(self, "stop", (self.stop,))
        else:
            object.__setattr__(self, "stop", tuple(self.stop))
        object.__setattr__(self, "stop_token_ids", tuple(self.stop_token_ids))
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int):
            raise RequestError(f"max_tokens={self.max_tokens!r}: must be an integer")
        if self.max_tokens < 1:
            raise RequestError(f"max_tokens={self.max_tokens}: must be at least 1")
        if not self.temperature >= 0.0:
            raise RequestError(f"temperature={self.temperature}: must be >= 0 (0 means greedy)")
        if not 0.0 < self.top_p <= 1.0:
            raise RequestError(f"top_p={self.top_p}: must be in (0, 1]")
        if not isinstance(self.top_k, int) or not -1 <= self.top_k <= MAX_TOP_K:
            raise RequestError(
                f"top_k={self.top_k!r}: must be -1, 0 (disabled) or a positive integer "
                f"up to {MAX_TOP_K}"
            )
        if self.seed is not None and (
            isinstance(self.seed, bool)
            or not isinstance(self.seed, int)
            or not MIN_SEED <= self.seed <= MAX_SEED
        ):
            raise RequestError(f"seed={self.seed!r}: must be a 64-bit signed integer")
        if any(not isinstance(s, str) or not s for s in self.stop):
            raise RequestError(f"stop={self.stop!r}: stop strings must be non-empty strings")

    @property
    def is_greedy(self) -> bool:
        return self.temperature < GREEDY_TEMPERATURE_EPSILON
