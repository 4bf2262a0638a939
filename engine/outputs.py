"""What the engine hands back to callers after each step."""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import NamedTuple

from engine.request import FinishReason, GrammarCompile, Request


class Logprob(NamedTuple):
    token_id: int
    logprob: float


class TokenLogprobs(NamedTuple):
    """One sampled token's log-probability, its rank (1 is the most likely; ties count as
    ahead) and the requested number of most likely tokens, best first.

    Taken from the model's raw distribution, before penalties, temperature and filters
    (vLLM's default ``logprobs_mode``); a logprob may be ``-inf``.
    """

    token_id: int
    logprob: float
    rank: int
    top: tuple[Logprob, ...]


@dataclass(frozen=True)
class RequestTimings:
    """Lifecycle timestamps on the engine's monotonic clock, in seconds.

    ``arrival_wall_time`` is the epoch time of ``arrival_time``; add
    ``t - arrival_time`` to it to place any other timestamp on the wall clock.
    """

    arrival_time: float
    arrival_wall_time: float
    first_scheduled_time: float | None
    first_token_time: float | None
    token_times: tuple[float, ...]
    preempted_times: tuple[float, ...]
    finished_time: float | None
    # (time scheduled, first position, number of tokens) per prompt chunk computed
    prefill_chunks: tuple[tuple[float, int, int], ...] = ()
    # a structured request's grammar lookup (compiled or cached) when it joined the engine
    grammar_compile: GrammarCompile | None = None

    @property
    def queue_seconds(self) -> float | None:
        if self.first_scheduled_time is None:
            return None
        return self.first_scheduled_time - self.arrival_time

    @property
    def ttft_seconds(self) -> float | None:
        if self.first_token_time is None:
            return None
        return self.first_token_time - self.arrival_time

    @property
    def e2e_seconds(self) -> float | None:
        if self.finished_time is None:
            return None
        return self.finished_time - self.arrival_time

    @property
    def inter_token_seconds(self) -> tuple[float, ...]:
        t = self.token_times
        return tuple(b - a for a, b in itertools.pairwise(t))

    @classmethod
    def of(cls, request: Request) -> RequestTimings:
        return cls(
            arrival_time=request.arrival_time,
            arrival_wall_time=request.arrival_wall_time,
            first_scheduled_time=request.first_scheduled_time,
            first_token_time=request.first_token_time,
            token_times=tuple(request.token_times),
            preempted_times=tuple(request.preempted_times),
            finished_time=request.finished_time,
            prefill_chunks=tuple(request.prefill_chunks),
            grammar_compile=request.grammar_compile,
        )


@dataclass(frozen=True)
class RequestOutput:
    """One request's progress in one step; ``timings`` is set once it has finished."""

    request_id: str
    new_token_ids: tuple[int, ...]
    new_text: str
    finished: bool
    finish_reason: FinishReason | None
    num_prompt_tokens: int
    num_output_tokens: int
    num_cached_tokens: int
    num_preemptions: int
    arrival_time: float = 0.0
    # engine-clock time of the newest token (None for an abort with no new token)
    token_time: float | None = None
    stop_reason: int | str | None = None
    timings: RequestTimings | None = None
    # one per new token id when the request asked for logprobs, else empty
    new_logprobs: tuple[TokenLogprobs, ...] = ()
    # the LoRA adapter the request runs with (None: the base model)
    lora_name: str | None = None


@dataclass(frozen=True)
class CompletionOutput:
    """A whole finished request, as ``LLM.generate`` returns it."""

    request_id: str
    prompt_token_ids: tuple[int, ...]
    token_ids: tuple[int, ...]
    text: str
    finish_reason: FinishReason
    num_cached_tokens: int
    num_preemptions: int
    timings: RequestTimings
    # one per token id when ``SamplingParams.logprobs`` is set, else empty
    logprobs: tuple[TokenLogprobs, ...] = ()
