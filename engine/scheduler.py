"""Scheduling policy: one token budget per step, in vLLM v1's style. No torch.

Every request carries ``num_computed_tokens``; a step gives each scheduled request
some number of new tokens to compute. Chunked prefill, prefix hits and resumed
preemptions all fall out of that one rule. Order within a step:

1. running requests that are decoding (one token each),
2. running requests part-way through their prompt (chunked prefill),
3. admissions from the waiting queue, up to ``max_num_seqs`` running — skipped in a
   step that had to preempt. With LoRA, a waiting request whose adapter would make more
   than ``max_loras`` distinct adapters running is passed over (it keeps its place; the
   requests behind it, the base model's included, are still admitted).

When the KV pool runs dry, a running request is preempted by recompute: its blocks are
freed, its progress reset, and it goes back to the front of the waiting queue.

The limits (``SchedulerLimits``) are one frozen value, replaced whole between steps.
A step's prefill chunks are recorded on their requests when the step's outputs are
applied, so a chunk unscheduled by a later preemption in the same step is never seen.

Speculative decoding: a decoding request with draft tokens (``Request.spec_token_ids``)
computes its last token and its drafts in one step, as many drafts as ``max_model_len`` and
the budget leave room for once every other decode has its one token, in blocks allocated for
all of them; when the pool has no room for the drafts the request decodes without them
rather than preempt anyone. Rejected
drafts are rolled back when the outputs are applied: their KV slots stay allocated and are
overwritten by the tokens that really come there.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from engine.block_pool import KVBlock
from engine.config import EngineConfig, SchedulerLimits, SchedulingPolicy
from engine.kv_cache import KVCacheManager
from engine.lora.request import LoRARequest
from engine.lora.slots import AdapterSlots
from engine.request import Request, RequestStatus
from engine.request_queue import make_queue
from engine.sampling_params import SamplingParams


@dataclass(frozen=True)
class ScheduledRequest:
    request_id: str
    # Tokens to compute this step, starting at position ``num_computed_tokens``.
    token_ids: tuple[int, ...]
    num_computed_tokens: int
    # True for a first scheduling or a resumption after preemption: ``block_ids`` is
    # then the whole block table; otherwise it lists only blocks added this step.
    is_new: bool
    block_ids: tuple[int, ...]
    # True when this step completes the request's known tokens, so a token is sampled.
    samples_token: bool
    sampling_params: SamplingParams
    # The adapter the request runs with (None: the base model).
    lora_request: LoRARequest | None = None
    # The drafts verified this step, the last ones of ``token_ids`` (speculative decoding).
    draft_token_ids: tuple[int, ...] = ()

    @property
    def num_new_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class SchedulerOutput:
    scheduled: tuple[ScheduledRequest, ...]
    preempted_request_ids: tuple[str, ...]
    # Finished or aborted since the previous step: the runner drops their state.
    finished_request_ids: tuple[str, ...]
    # When the step was scheduled (scheduler clock): the time of its prefill chunks.
    scheduled_time: float

    @property
    def num_scheduled_tokens(self) -> int:
        return sum(s.num_new_tokens for s in self.scheduled)

    @property
    def is_empty(self) -> bool:
        return not self.scheduled


@dataclass(frozen=True)
class SchedulerStats:
    num_running: int
    num_waiting: int
    kv_cache_usage: float
    num_preemptions_total: int
    prefix_cache_queries_tokens: int
    prefix_cache_hits_tokens: int


class _Allocation(NamedTuple):
    """New blocks for a request (None if it was itself preempted), and every request
    preempted to make room, in order."""

    new_blocks: list[KVBlock] | None
    victims: list[Request]


class Scheduler:
    def __init__(
        self,
        config: EngineConfig,
        kv_cache: KVCacheManager,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.kv_cache = kv_cache
        self.clock = clock
        self.policy = SchedulingPolicy.parse(config.scheduling_policy)
        self.limits: SchedulerLimits = config.scheduler_limits()
        self.requests: dict[str, Request] = {}
        self.waiting = make_queue(self.policy)
        self.running: list[Request] = []
        self.num_preemptions_total = 0
        self._finished_ids: list[str] = []
        lora = config.lora_config()
        # Running and waiting requests per adapter, and the max_loras rule (None: LoRA off).
        self.lora_slots = AdapterSlots(lora.max_loras) if lora is not None else None

    # -- public API ------------------------------------------------------------------------

    def add_request(self, request: Request) -> None:
        if request.request_id in self.requests:
            raise ValueError(f"request_id {request.request_id!r} is already in the engine")
        self.requests[request.request_id] = request
        self.waiting.add(request)
        if self.lora_slots is not None:
            self.lora_slots.added(request.lora_request)

    def has_unfinished_requests(self) -> bool:
        return bool(self.requests)

    def set_limits(self, limits: SchedulerLimits) -> None:
        """Replace the limits whole, between steps (a live knob change).

        Lowering ``max_num_seqs`` preempts nothing: it stops admissions until enough
        running requests finish.
        """
        if not isinstance(limits, SchedulerLimits):
            raise TypeError(f"limits={limits!r}: must be a SchedulerLimits")
        self.limits = limits

    @property
    def num_usable_blocks(self) -> int:
        """KV blocks requests may use: the pool less any reserved by a knob change."""
        return self.kv_cache.num_usable_blocks

    def set_num_usable_blocks(self, num_blocks: int) -> None:
        """Shrink or restore the KV pool between steps; held blocks are withheld only as
        their requests release them."""
        self.kv_cache.set_num_usable_blocks(num_blocks)

    def set_prefix_caching(self, enabled: bool) -> None:
        """Turn prefix caching on or off between steps; off forgets every cached hash."""
        if self.kv_cache.enable_caching != enabled:
            self.kv_cache.set_caching(enabled)

    def schedule(self) -> SchedulerOutput:
        now = self.clock()
        limits = self.limits
        budget = limits.max_num_batched_tokens
        scheduled: dict[str, ScheduledRequest] = {}
        preempted: list[Request] = []

        decoding = [r for r in self.running if r.num_tokens_to_compute == 1]
        prefilling = [r for r in self.running if r.num_tokens_to_compute > 1]
        for index, request in enumerate(decoding + prefilling):
            if budget <= 0:
                break
            if request.status is not RequestStatus.RUNNING:
                continue  # preempted earlier in this step to make room
            num_new = min(request.num_tokens_to_compute, budget)
            if num_new < request.num_tokens_to_compute and not limits.enable_chunked_prefill:
                continue
            # NOTE: drafts take only budget the decodes after this one do not need, so every
            # running request still decodes each step (vLLM lets drafts crowd them out)
            reserved = max(0, len(decoding) - index - 1)
            drafts = self._drafts_that_fit(request, num_new, budget - reserved, limits)
            if drafts:
                new_blocks = self.kv_cache.allocate_slots(request, num_new + len(drafts))
                if new_blocks is not None:
                    scheduled[request.request_id] = self._scheduled(
                        request, num_new, new_blocks, False, drafts
                    )
                    budget -= num_new + len(drafts)
                    continue
                # NOTE: no room for the drafts: decode without them (below), preempting only
                # if even that does not fit, as without speculation
            allocation = self._allocate_or_preempt(request, num_new, now)
            for victim in allocation.victims:
                budget += self._unschedule(victim, scheduled)
            preempted.extend(allocation.victims)
            if allocation.new_blocks is None:
                continue
            scheduled[request.request_id] = self._scheduled(
                request, num_new, allocation.new_blocks, False
            )
            budget -= num_new

        if not preempted:
            budget = self._admit(limits, budget, scheduled, now)

        finished, self._finished_ids = tuple(self._finished_ids), []
        return SchedulerOutput(
            scheduled=tuple(scheduled.values()),
            preempted_request_ids=tuple(r.request_id for r in preempted),
            finished_request_ids=finished,
            scheduled_time=now,
        )

    def update_from_output(
        self,
        output: SchedulerOutput,
        sampled_token_ids: Sequence[int | None],
        accepted_draft_token_ids: Mapping[str, Sequence[int]] | None = None,
        on_token: Callable[[Request], bool] | None = None,
    ) -> list[Request]:
        """Record a step's progress; returns the requests that received new tokens.

        A request that verified drafts gets its accepted drafts (``accepted_draft_token_ids``,
        by request id; none if absent) and then its sampled token, and its rejected drafts
        are rolled back. ``on_token`` is called after each token is appended; when it returns
        True (the request stops there) the rest of its tokens from this step are dropped.
        """
        now = self.clock()
        accepted_drafts = accepted_draft_token_ids or {}
        updated: list[Request] = []
        for item, token_id in zip(output.scheduled, sampled_token_ids, strict=True):
            request = self.requests.get(item.request_id)
            if request is None or request.status is not RequestStatus.RUNNING:
                continue
            if item.is_new:
                request.prefill_end = request.num_tokens
            if item.num_computed_tokens < request.prefill_end:
                # NOTE: by position, not size: a budget of one token leaves one-token prompt
                # chunks that look like decode steps, and a decode step is never a chunk.
                request.prefill_chunks.append(
                    (output.scheduled_time, item.num_computed_tokens, item.num_new_tokens)
                )
            num_computed = item.num_new_tokens
            accepted: Sequence[int] = ()
            if item.draft_token_ids:
                accepted = accepted_drafts.get(item.request_id, ())
                if len(accepted) > len(item.draft_token_ids):
                    raise ValueError(
                        f"{item.request_id!r}: {len(accepted)} drafts accepted of "
                        f"{len(item.draft_token_ids)} verified"
                    )
                num_computed -= len(item.draft_token_ids) - len(accepted)  # the rejected
            request.num_computed_tokens += num_computed
            if item.samples_token:
                if token_id is None:
                    raise ValueError(f"no token sampled for {item.request_id!r}")
                for new_token_id in (*accepted, token_id):
                    request.append_output_token(new_token_id, now)
                    if on_token is not None and on_token(request):
                        break
                # NOTE: a stop part-way through the accepted drafts drops the tokens after it
                request.num_computed_tokens = min(request.num_computed_tokens, request.num_tokens)
                updated.append(request)
            # NOTE: after the tokens are appended: accepted drafts are computed tokens that
            # join all_token_ids only now, and the hash of a full block needs its ids
            self.kv_cache.cache_computed_blocks(request)
        return updated

    def finish_requests(self, request_ids: Sequence[str], status: RequestStatus) -> None:
        """Finish or abort requests (running or waiting) and free their blocks at once."""
        if not status.is_finished:
            raise ValueError(f"{status} is not a finished status")
        now = self.clock()
        finished_running: set[Request] = set()
        for request_id in request_ids:
            request = self.requests.pop(request_id, None)
            if request is None:
                continue
            was_running = request.status is RequestStatus.RUNNING
            if was_running:
                finished_running.add(request)
            else:
                self.waiting.remove(request)
            if self.lora_slots is not None:
                self.lora_slots.finished(request.lora_request, was_running)
            self.kv_cache.free(request)
            request.status = status
            request.finished_time = now
            self._finished_ids.append(request_id)
        if finished_running:
            # NOTE: by identity, not ``is_finished`` (two property calls per request)
            self.running = [r for r in self.running if r not in finished_running]

    def stats(self) -> SchedulerStats:
        prefix = self.kv_cache.prefix_cache_stats
        return SchedulerStats(
            num_running=len(self.running),
            num_waiting=len(self.waiting),
            kv_cache_usage=self.kv_cache.usage,
            num_preemptions_total=self.num_preemptions_total,
            prefix_cache_queries_tokens=prefix.num_queries_tokens,
            prefix_cache_hits_tokens=prefix.num_hits_tokens,
        )

    # -- internals -------------------------------------------------------------------------

    def _admit(
        self,
        limits: SchedulerLimits,
        budget: int,
        scheduled: dict[str, ScheduledRequest],
        now: float,
    ) -> int:
        slots = self.lora_slots
        passed_over: list[Request] = []  # NOTE: their adapter cannot join; they keep their place
        while self.waiting and budget > 0 and len(self.running) < limits.max_num_seqs:
            request = self.waiting.peek()
            if slots is not None and not slots.can_run(request.lora_request):
                passed_over.append(self.waiting.pop())
                continue
            hit_blocks, num_hit_tokens = self.kv_cache.get_computed_blocks(request)
            num_new = request.num_tokens - num_hit_tokens
            if num_new > budget:
                if not limits.enable_chunked_prefill:
                    break
                num_new = budget
            if self.kv_cache.allocate_slots(request, num_new, hit_blocks, num_hit_tokens) is None:
                break
            self.waiting.pop()
            self.kv_cache.record_prefix_query(request, num_hit_tokens)
            request.num_computed_tokens = num_hit_tokens
            if request.num_cached_tokens < 0:
                request.num_cached_tokens = num_hit_tokens
            if request.first_scheduled_time is None:
                request.first_scheduled_time = now
            request.status = RequestStatus.RUNNING
            self.running.append(request)
            if slots is not None:
                slots.started(request.lora_request)
            scheduled[request.request_id] = self._scheduled(request, num_new, None, True)
            budget -= num_new
        for request in reversed(passed_over):
            self.waiting.prepend(request)
        return budget

    def _allocate_or_preempt(self, request: Request, num_new: int, now: float) -> _Allocation:
        """Blocks for ``num_new`` more tokens of ``request``, preempting until they fit."""
        victims: list[Request] = []
        while True:
            new_blocks = self.kv_cache.allocate_slots(request, num_new)
            if new_blocks is not None:
                return _Allocation(new_blocks, victims)
            victim = self._pick_victim()
            self._preempt(victim, now)
            victims.append(victim)
            if victim is request:
                return _Allocation(None, victims)

    def _pick_victim(self) -> Request:
        if self.policy is SchedulingPolicy.PRIORITY:
            # Lowest priority means the largest value; among equals, the latest arrival.
            return max(self.running, key=lambda r: (r.priority, r.arrival_time))
        return self.running[-1]

    def _preempt(self, victim: Request, now: float) -> None:
        if self.running and self.running[-1] is victim:
            self.running.pop()
        else:
            self.running.remove(victim)
        self.kv_cache.free(victim)
        victim.status = RequestStatus.PREEMPTED
        victim.num_computed_tokens = 0
        victim.spec_token_ids = []  # NOTE: proposed again once it samples after resuming
        victim.num_preemptions += 1
        victim.preempted_times.append(now)
        self.num_preemptions_total += 1
        self.waiting.prepend(victim)
        if self.lora_slots is not None:
            self.lora_slots.preempted(victim.lora_request)

    @staticmethod
    def _unschedule(victim: Request, scheduled: dict[str, ScheduledRequest]) -> int:
        """Take a preempted request out of this step; the tokens it no longer uses."""
        item = scheduled.pop(victim.request_id, None)
        return 0 if item is None else item.num_new_tokens

    @staticmethod
    def _drafts_that_fit(
        request: Request, num_new: int, budget: int, limits: SchedulerLimits
    ) -> tuple[int, ...]:
        """The request's drafts this step has room for: none unless it decodes (its one
        known token is all it computes); no more than the budget after that token, nor past
        ``max_model_len`` (the token sampled after the last draft must fit too)."""
        if not request.spec_token_ids or num_new != 1 or request.num_tokens_to_compute != 1:
            return ()
        room = min(budget - num_new, limits.max_model_len - request.num_tokens - 1)
        return tuple(request.spec_token_ids[: max(room, 0)])

    def _scheduled(
        self,
        request: Request,
        num_new: int,
        new_blocks: list[KVBlock] | None,
        is_new: bool,
        drafts: tuple[int, ...] = (),
    ) -> ScheduledRequest:
        start = request.num_computed_tokens
        if is_new:
            block_ids = tuple(self.kv_cache.get_block_ids(request.request_id))
        else:
            block_ids = tuple(b.block_id for b in new_blocks or ())
        return ScheduledRequest(
            request_id=request.request_id,
            token_ids=(*request.all_token_ids[start : start + num_new], *drafts),
            num_computed_tokens=start,
            is_new=is_new,
            block_ids=block_ids,
            samples_token=start + num_new == request.num_tokens,
            sampling_params=request.sampling_params,
            lora_request=request.lora_request,
            draft_token_ids=drafts,
        )
