"""Request state: token ids, progress, status, and the timestamp of every lifecycle event.

Timestamps come from the engine's injectable monotonic clock; ``arrival_wall_time``
anchors them to the epoch for traces.
"""

from __future__ import annotations

import enum
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

from engine.lora.request import LoRARequest
from engine.sampling_params import SamplingParams

FinishReason = Literal["stop", "length", "abort"]


class RequestStatus(enum.Enum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED_STOPPED = "finished_stopped"
    FINISHED_LENGTH = "finished_length"
    FINISHED_ABORTED = "finished_aborted"

    @property
    def is_finished(self) -> bool:
        return self in _FINISHED

    @property
    def finish_reason(self) -> FinishReason | None:
        return _FINISH_REASONS.get(self)


_FINISH_REASONS: dict[RequestStatus, FinishReason] = {
    RequestStatus.FINISHED_STOPPED: "stop",
    RequestStatus.FINISHED_LENGTH: "length",
    RequestStatus.FINISHED_ABORTED: "abort",
}
_FINISHED = frozenset(_FINISH_REASONS)


class GrammarCompile(NamedTuple):
    """A structured request's grammar lookup when it joined the engine: when (engine clock),
    its kind, whether the compiled grammar was cached, and the compile's seconds (0 on a hit)."""

    time: float
    kind: str
    cache_hit: bool
    compile_seconds: float


@dataclass(eq=False)
class Request:
    request_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    arrival_time: float
    eos_token_ids: frozenset[int] = frozenset()
    priority: int = 0
    # Extra key mixed into the first block's prefix hash: requests with different salts
    # (tenants) never share KV blocks.
    cache_salt: str | None = None
    arrival_wall_time: float = 0.0
    # The LoRA adapter it runs with (None: the base model); also a prefix-hash extra key,
    # so the same prompt under two adapters (or under one and the base) shares no block.
    lora_request: LoRARequest | None = None

    status: RequestStatus = RequestStatus.WAITING
    output_token_ids: list[int] = field(default_factory=list)
    # NOTE: kept as tokens arrive so penalties cost O(distinct tokens), not a recount
    output_token_counts: Counter[int] = field(default_factory=Counter)
    all_token_ids: list[int] = field(init=False)
    num_computed_tokens: int = 0
    # Prompt tokens served from the prefix cache at first scheduling; -1 until then.
    num_cached_tokens: int = -1
    num_preemptions: int = 0
    # Full-block prefix hashes over all_token_ids, extended as tokens arrive.
    block_hashes: list[bytes] = field(default_factory=list)
    stop_reason: int | str | None = None
    # Draft tokens proposed for the next step (speculative decoding); verified, not output.
    spec_token_ids: list[int] = field(default_factory=list)
    grammar_compile: GrammarCompile | None = None

    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    token_times: list[float] = field(default_factory=list)
    preempted_times: list[float] = field(default_factory=list)
    # (time scheduled, first position, number of tokens) of each prompt chunk computed,
    # recomputation after a preemption included.
    prefill_chunks: list[tuple[float, int, int]] = field(default_factory=list)
    # The tokens the current admission (or resumption) must compute before sampling again:
    # a step that starts below it is a prefill chunk, whatever its size.
    prefill_end: int = 0
    finished_time: float | None = None

    _distinct_prompt_token_ids: frozenset[int] | None = field(default=None, init=False)

    def __post_init__(self) -> None:
        self.all_token_ids = list(self.prompt_token_ids)

    @property
    def lora_int_id(self) -> int | None:
        return None if self.lora_request is None else self.lora_request.lora_int_id

    def distinct_prompt_token_ids(self) -> frozenset[int]:
        """The prompt's token ids as a set (computed once, for repetition_penalty)."""
        if self._distinct_prompt_token_ids is None:
            self._distinct_prompt_token_ids = frozenset(self.prompt_token_ids)
        return self._distinct_prompt_token_ids

    @property
    def num_tokens(self) -> int:
        return len(self.all_token_ids)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    @property
    def num_tokens_to_compute(self) -> int:
        return len(self.all_token_ids) - self.num_computed_tokens

    @property
    def is_finished(self) -> bool:
        return self.status.is_finished

    def append_output_token(self, token_id: int, now: float) -> None:
        self.output_token_ids.append(token_id)
        self.output_token_counts[token_id] += 1
        self.all_token_ids.append(token_id)
        if self.first_token_time is None:
            self.first_token_time = now
        self.token_times.append(now)
