"""The offline fast path: decode steps without the per-token work an offline run never reads.

A virtual-clock run (``engine.sim.offline``) spends almost all of its CPU time on the
engine's per-token bookkeeping, not on pricing steps. Most steps near the knee are all
decodes (plus, now and then, a newly admitted prompt), and in such a step every running
request takes exactly one token, so that bookkeeping can be deferred: ``FastPath.step``
takes such a step itself and

- prices it with the runner's own ``SimRunner.spend_totals`` from the batch's sums (the
  decoders' kept as running totals), so the clock moves by exactly the same floats as
  ``SimRunner.spend`` on the whole batch;
- makes the scheduler's and the KV pool's calls only where they change something, in the
  order the engine makes them: a decode's ``allocate_slots`` when it crosses into a new
  block, ``cache_computed_blocks`` when it fills one, ``finish_requests`` when it reaches
  its length; admissions go through the scheduler's own ``_admit`` and the admitted
  prompts through ``update_from_output``, so prefix hits and the pool's LRU order are
  the engine's;
- appends a decoding request's tokens and token times to its ``Request`` lazily, a block
  (or a finish) at a time, and touches a decoder only at such an event
  (``engine.sim.deferred_decodes``); ``materialize`` brings them all up to date.

A step that is anything else — a running request part-way through its prompt, a decode
that does not fit the budget, a block it would need that is not free (a preemption) —
brings every request up to date and is ``LLMEngine.step()`` itself. So is every step of
a request that can stop other than by length (stop strings, stop token ids, EOS): only
``max_tokens`` and ``max_model_len`` end a request here, and both are known in advance.
An engine that speculates (a decode takes several tokens a step) or holds a structured
request (its grammar may end it) takes every step itself.

With ``emit_outputs`` each step also returns the ``RequestOutput`` list the engine's step
would (text included: the tokens go through the request's detokenizer), for observers;
without it no per-token output or text is made, and finished requests are returned.
``tests/engine/simulated/test_fast_path.py`` pins the fast path to the per-step one.

NOTE: this module is the engine's friend: it calls ``Scheduler._admit``, drains
``Scheduler._finished_ids`` and uses ``LLMEngine._detokenizers`` and ``_output``, so that
admission, finishing and outputs are the engine's own code, not copies of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import NamedTuple

from engine.kv_cache import cdiv
from engine.llm_engine import LLMEngine, StepStats
from engine.outputs import RequestOutput
from engine.request import Request, RequestStatus
from engine.sampling_params import SamplingParams
from engine.scheduler import ScheduledRequest, SchedulerOutput
from engine.sim.deferred_decodes import Decoder, DeferredDecodes, by_seq
from engine.sim.runner import FIRST_PRINTABLE, NUM_PRINTABLE, SimRunner, pseudo_random_token
from engine.sim.step_cost import BatchTotals
from engine.stop import check_stop


@dataclass(frozen=True)
class FastStep:
    """One step taken by ``FastPath.step``: whether it was a fast one, and its outputs
    (an engine step's always, a fast step's with ``emit_outputs``) or else, for a fast
    step without outputs, the requests it finished (in the order outputs would give)."""

    is_fast: bool
    finished: tuple[Request, ...]
    outputs: tuple[RequestOutput, ...] = ()


def stops_only_by_length(params: SamplingParams, eos_token_ids: frozenset[int]) -> bool:
    """True when a simulated request can end only at ``max_tokens`` or ``max_model_len``:
    no stop string or stop token id, and no EOS among the ids the simulator draws."""
    if params.stop or params.stop_token_ids or params.logprobs is not None:
        return False
    if params.structured_outputs is not None:
        return False
    printable = range(FIRST_PRINTABLE, FIRST_PRINTABLE + NUM_PRINTABLE)
    return params.ignore_eos or not any(t in printable for t in eos_token_ids)


class _Prefill(NamedTuple):
    """A running request part-way through its prompt: its chunk this step."""

    seq: int
    request: Request
    num_new_tokens: int
    num_new_blocks: int


class FastPath:
    def __init__(self, engine: LLMEngine, emit_outputs: bool = False) -> None:
        if not isinstance(engine.runner, SimRunner):
            raise TypeError("the offline fast path runs a simulated engine only")
        self.engine = engine
        self.runner: SimRunner = engine.runner
        self.emit_outputs = emit_outputs
        self.num_fast_steps = 0
        # NOTE: the running requests, split as ``schedule`` takes them (decodes, then
        # prompts), each in running order; ``seq`` orders them across the two
        self._deferred = DeferredDecodes(engine.scheduler.kv_cache.block_size)
        self._prefilling: list[tuple[int, Request]] = []
        self._next_seq = 0
        # NOTE: while stale (a running request this path does not take: one that may stop
        # early, or a last prompt token, which ``schedule`` takes with the decodes) every
        # step is the engine's; nothing is deferred then.
        self._is_stale = True

    # -- public ----------------------------------------------------------------------------

    def step(self) -> FastStep:
        """One step: a fast one when it qualifies, else ``LLMEngine.step()``."""
        engine = self.engine
        if engine.lora is not None:
            # NOTE: a LoRA engine's steps load adapters and price their matmuls, which only
            # the engine's own step does; every step of it is the engine's
            return self._engine_step()
        if engine.drafter is not None or engine.structured_outputs.num_requests:
            return self._engine_step()  # NOTE: not this path's (see the module docstring)
        if self._is_stale:
            self._adopt_running()
        plan = self._plan()
        if plan is None:
            return self._engine_step()
        return self._fast_step(*plan)

    def invalidate(self) -> None:
        """Bring every request up to date and take the next step from scratch: the caller
        changed what a plan assumed (live knobs, the usable pool, a failed batch)."""
        self._deferred.materialize_all()
        self._deferred.clear()
        self._prefilling = []
        self._is_stale = True

    def materialize(self) -> None:
        """Bring every deferred token and token time onto its ``Request``."""
        self._deferred.materialize_all()

    # -- taking over the running requests --------------------------------------------------

    def _engine_step(self) -> FastStep:
        self.invalidate()
        return FastStep(False, (), tuple(self.engine.step()))

    def _adopt_running(self) -> None:
        """Take over the running requests unless one of them is not this path's."""
        engine, scheduler = self.engine, self.engine.scheduler
        if engine.num_steps_to_fail > 0 or not scheduler.running:
            return
        decoders, prefilling = [], []
        for seq, request in enumerate(scheduler.running):
            if request.num_tokens_to_compute > 1:
                prefilling.append((seq, request))
                continue
            decoder = self._decoder_of(request, seq)
            if decoder is None:
                return
            decoders.append(decoder)
        self._deferred.clear()  # NOTE: nothing is deferred while stale
        for decoder in decoders:
            self._deferred.track(decoder)
        self._prefilling = prefilling
        self._next_seq = len(scheduler.running)
        self._is_stale = False

    def _decoder_of(self, request: Request, seq: int) -> Decoder | None:
        """``request`` as a deferred decoder; None if it is not one (still in its prompt,
        able to stop other than by length, or holding other blocks than its tokens')."""
        engine = self.engine
        kv_cache = engine.scheduler.kv_cache
        left = min(
            request.sampling_params.max_tokens - request.num_output_tokens,
            engine.config.max_model_len - request.num_tokens,
        )
        if (
            request.status is not RequestStatus.RUNNING
            or request.num_tokens_to_compute != 1
            or request.num_computed_tokens < request.prefill_end
            or left < 1
            or not stops_only_by_length(request.sampling_params, request.eos_token_ids)
            or not DeferredDecodes.holds_its_blocks(
                request, kv_cache.num_blocks(request.request_id), kv_cache.block_size
            )
        ):
            return None
        key = self.runner.request_key(request.request_id, request.sampling_params.seed)
        return Decoder(request, key, seq, len(self._deferred.times), left)

    def _plan(self) -> tuple[list[Decoder], list[_Prefill]] | None:
        """The decoders whose next token starts a block and the prompt chunks of this step,
        or None when the step is not a fast one: nothing to decode, decodes over the budget
        or a block that is not free (the engine's step preempts, as the scheduler would)."""
        decoders = self._deferred.decoders
        if self._is_stale or not decoders:
            return None
        scheduler = self.engine.scheduler
        limits, kv_cache = scheduler.limits, scheduler.kv_cache
        budget = limits.max_num_batched_tokens - len(decoders)
        if budget < 0:
            return None
        needing = sorted(self._deferred.needing, key=by_seq)
        num_blocks = len(needing)
        chunks = []
        for seq, request in self._prefilling:
            if budget <= 0:
                break
            num_new = min(request.num_tokens_to_compute, budget)
            if num_new < request.num_tokens_to_compute and not limits.enable_chunked_prefill:
                continue
            required = cdiv(request.num_computed_tokens + num_new, kv_cache.block_size)
            new_blocks = max(0, required - kv_cache.num_blocks(request.request_id))
            chunks.append(_Prefill(seq, request, num_new, new_blocks))
            num_blocks += new_blocks
            budget -= num_new
        if num_blocks > kv_cache.num_free_blocks:
            return None
        return needing, chunks

    # -- the fast step ---------------------------------------------------------------------

    def _fast_step(self, needing: list[Decoder], chunks: list[_Prefill]) -> FastStep:
        started = time.perf_counter()
        engine, scheduler, runner = self.engine, self.engine.scheduler, self.runner
        kv_cache, deferred = scheduler.kv_cache, self._deferred
        decoders = deferred.decoders
        now = scheduler.clock()
        # what ``schedule`` does: decodes, then prompt chunks, each in running order, then
        # admissions; every block was checked free by ``_plan``
        # NOTE: each of ``needing`` holds whole blocks of its computed tokens (its token
        # count need not be on its Request for that)
        if needing:
            kv_cache.allocate_next_blocks([decoder.request for decoder in needing])
        budget = scheduler.limits.max_num_batched_tokens - len(decoders)
        scheduled: dict[str, ScheduledRequest] = {}
        for _, request, num_new, _ in chunks:
            new_blocks = kv_cache.allocate_slots(request, num_new)
            if new_blocks is None:
                raise RuntimeError(f"{request.request_id!r}: no block although free")
            scheduled[request.request_id] = scheduler._scheduled(
                request, num_new, new_blocks, False
            )
            budget -= num_new
        if scheduler.waiting:
            scheduler._admit(scheduler.limits, budget, scheduled, now)
        # NOTE: the ids ``schedule`` would hand the runner, which forgets their keys
        finished_ids, scheduler._finished_ids = scheduler._finished_ids, []
        runner.forget(finished_ids)
        # what the runner does: price the batch, spend its time, sample tokens
        num_decoders, _, attention_positions, num_context_tokens = deferred.totals()
        num_tokens = num_decoders
        sampled: list[int | None] = []
        num_prompt_tokens = 0
        others = [scheduler.requests[i] for i in scheduled] if scheduled else []
        for item, request in zip(scheduled.values(), others, strict=True):
            q = item.num_new_tokens
            end = item.num_computed_tokens + q
            num_tokens += q
            attention_positions += q * end - q * (q - 1) // 2
            num_context_tokens += end
            if item.samples_token:
                key = runner.request_key(item.request_id, item.sampling_params.seed)
                sampled.append(pseudo_random_token(key, end))
            else:
                sampled.append(None)
            is_decode = q == 1 and item.num_computed_tokens >= request.num_prompt_tokens
            num_prompt_tokens += 0 if is_decode else q
        num_items = num_decoders + len(others)
        totals = BatchTotals(num_items, num_tokens, attention_positions, num_context_tokens)
        num_sampled = num_decoders + len(sampled) - sampled.count(None)
        runner.spend_totals(totals, num_sampled, started)
        # what ``update_from_output`` and the stop checks do, in the same order
        stepped = decoders  # NOTE: ``advance`` replaces the list when some finish
        filled, done = deferred.advance(scheduler.clock())
        if filled and kv_cache.enable_caching:
            block_size = kv_cache.block_size
            for decoder in filled:
                # NOTE: its tokens stay deferred; the block's ids come from its draw
                index = (decoder.offset + len(deferred.times)) // block_size - 1
                token_bytes = decoder.block_bytes(index, block_size)
                kv_cache.cache_filled_block(decoder.request, index, token_bytes)
        updated_others: list[Request] = []
        if scheduled:
            output = SchedulerOutput(tuple(scheduled.values()), (), (), now)
            updated_others = scheduler.update_from_output(output, sampled)
        if self.emit_outputs:
            for decoder in stepped:
                deferred.materialize(decoder)
        finishing: dict[RequestStatus, list[str]] = {}
        if done:
            finishing[RequestStatus.FINISHED_LENGTH] = []
            for decoder in done:
                deferred.materialize(decoder)
                finishing[RequestStatus.FINISHED_LENGTH].append(decoder.request.request_id)
        detokenizers = engine._detokenizers
        if self.emit_outputs:
            for decoder in stepped:
                request = decoder.request
                detokenizers[request.request_id].add_token(request.output_token_ids[-1])
        for request in updated_others:
            # NOTE: a prompt's first token is always detokenized (its request may have
            # stop strings), and its stop check is the engine's
            token_id = request.output_token_ids[-1]
            stop_string = detokenizers[request.request_id].add_token(token_id)
            status = check_stop(request, engine.config.max_model_len, stop_string)
            if status is not None:
                finishing.setdefault(status, []).append(request.request_id)
        for status, ids in finishing.items():
            scheduler.finish_requests(ids, status)
        outputs: tuple[RequestOutput, ...] = ()
        finished: tuple[Request, ...] = ()
        if self.emit_outputs:
            updated = [d.request for d in stepped] + updated_others
            outputs = tuple(
                engine._output(r, r.output_token_ids[-1:], r.is_finished) for r in updated
            )
        elif done or updated_others:
            finished = (*(d.request for d in done), *(r for r in updated_others if r.is_finished))
            for request in finished:
                detokenizers.pop(request.request_id, None)
        engine.last_step = StepStats(
            step_index=engine.last_step.step_index + 1,
            num_prompt_tokens=num_prompt_tokens,
            num_generation_tokens=num_decoders + len(updated_others),
            num_requests=num_items,
            step_seconds=time.perf_counter() - started,
            timing=runner.last_timing,
        )
        self.num_fast_steps += 1
        self._keep(others, chunks)
        return FastStep(True, finished, outputs)

    def _keep(self, others: list[Request], chunks: list[_Prefill]) -> None:
        """The running requests of the next step besides the decoders: prompts completed
        this step become decoders, admissions join the end of the running order."""
        if not others:  # NOTE: no chunk and no admission: the prompts left are as they were
            self._deferred.flush_if_long()
            return
        seqs = [chunk.seq for chunk in chunks]
        for _ in range(len(others) - len(chunks)):  # admissions append to ``running``
            seqs.append(self._next_seq)
            self._next_seq += 1
        scheduled_ids = {chunk.request.request_id for chunk in chunks}
        chunked = [e for e in self._prefilling if e[1].request_id not in scheduled_ids]
        for seq, request in zip(seqs, others, strict=True):
            if request.is_finished:
                continue
            if request.num_tokens_to_compute > 1:
                chunked.append((seq, request))
                continue
            decoder = self._decoder_of(request, seq)
            if decoder is None:  # NOTE: ``schedule`` would take it with the decodes
                self.invalidate()
                return
            self._deferred.track(decoder)
        chunked.sort(key=lambda entry: entry[0])
        self._prefilling = chunked
        self._deferred.flush_if_long()
