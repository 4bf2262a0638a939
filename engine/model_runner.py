"""The only engine module that touches devices: inputs from a SchedulerOutput, forward, sample.

It keeps each request's block table and sampling generator between steps; the
scheduler sends only the blocks added in a step (or the whole table for a new or
resumed request), so building a step's inputs is O(tokens scheduled + blocks read).

A request verifying drafts (speculative decoding) is sampled at each of its draft positions
and after them (``engine/spec_decode/verify.py``); a structured request's logits are masked
by its grammar's bitmask first (``engine/structured/apply.py``), other rows untouched.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch

from engine.logits_processors import TokenHistory
from engine.lora.batch import LoRABatch
from engine.lora.manager import LoRAManager
from engine.lora.weights import LoRAWeights
from engine.model.attention_metadata import AttentionMetadata
from engine.model.kv_cache_tensors import allocate_kv_caches
from engine.model.llama import LlamaForCausalLM
from engine.outputs import TokenLogprobs
from engine.sampler import SamplingRow, sample
from engine.sampling_params import SamplingParams
from engine.scheduler import ScheduledRequest, SchedulerOutput
from engine.spec_decode.verify import DraftHistory, verdict
from engine.structured.apply import apply_grammar_bitmask
from engine.structured.manager import GrammarBitmask


@dataclass(frozen=True)
class StepTiming:
    """Wall-clock seconds of one step's phases (the forward includes the device sync)."""

    prepare_seconds: float
    forward_seconds: float
    sample_seconds: float


@dataclass(frozen=True)
class RunnerOutput:
    """The sampled token per scheduled request (None: mid-prefill); the drafts each request
    that verified drafts accepted (they come before its sampled token), and the logprobs of
    the requests that asked for them (one per new token, accepted drafts first), by id."""

    sampled_token_ids: list[int | None]
    logprobs: dict[str, tuple[TokenLogprobs, ...]] = field(default_factory=dict)
    accepted_draft_token_ids: dict[str, tuple[int, ...]] = field(default_factory=dict)


class ModelRunner:
    def __init__(
        self,
        model: LlamaForCausalLM,
        num_blocks: int,
        block_size: int,
        seed: int = 0,
        lora: LoRAManager[LoRAWeights] | None = None,
    ) -> None:
        self.model = model
        # the loaded adapters (the engine loads a step's adapters before ``execute``)
        self.lora = lora
        param = next(model.parameters())
        self.device, self.dtype = param.device, param.dtype
        self.block_size = block_size
        self.kv_caches = allocate_kv_caches(
            model.config, num_blocks, block_size, self.device, self.dtype
        )
        self._block_tables: dict[str, list[int]] = {}
        self._generators: dict[str, torch.Generator | None] = {}
        # NOTE: a prompt does not change, so its distinct ids (for repetition_penalty) are
        # made a tensor once per request, not once per step
        self._prompt_token_ids: dict[str, torch.Tensor] = {}
        self._default_generator = torch.Generator(device=self.device).manual_seed(seed)
        self.last_timing = StepTiming(0.0, 0.0, 0.0)

    def _forget(self, output: SchedulerOutput) -> None:
        for request_id in output.finished_request_ids:
            self._block_tables.pop(request_id, None)
            self._generators.pop(request_id, None)
            self._prompt_token_ids.pop(request_id, None)
        for request_id in output.preempted_request_ids:
            # the block table is rebuilt on resumption; the generator is kept so a seeded
            # request draws the same tokens whether or not it was preempted
            self._block_tables.pop(request_id, None)

    def _kept_prompt_token_ids(
        self, request_id: str, params: SamplingParams, history: TokenHistory | None
    ) -> torch.Tensor | None:
        if history is None or params.repetition_penalty == 1.0:
            return None
        ids = self._prompt_token_ids.get(request_id)
        if ids is None:
            ids = torch.tensor(list(history.distinct_prompt_token_ids()), dtype=torch.long)
            self._prompt_token_ids[request_id] = ids
        return ids

    def _lora_batch(self, output: SchedulerOutput) -> LoRABatch | None:
        manager = self.lora
        assert manager is not None
        adapters = [
            None if i.lora_request is None else manager.get(i.lora_request.lora_int_id)
            for i in output.scheduled
        ]
        return LoRABatch.build(adapters, [i.num_new_tokens for i in output.scheduled], self.device)

    @torch.inference_mode()
    def execute(
        self,
        output: SchedulerOutput,
        histories: Mapping[str, TokenHistory] | None = None,
        grammar_bitmask: GrammarBitmask | None = None,
    ) -> RunnerOutput:
        """Run one step. ``histories`` gives each request's tokens so far (for penalties
        and min_tokens); without it those parameters see an empty history.
        ``grammar_bitmask`` holds the allowed next tokens of the structured requests."""
        started = time.perf_counter()
        self._forget(output)
        if output.is_empty:
            return RunnerOutput([])
        bs = self.block_size
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        tables: list[list[int]] = []
        logit_rows: list[int] = []
        for item in output.scheduled:
            if item.is_new:
                table = self._block_tables[item.request_id] = list(item.block_ids)
                params = item.sampling_params
                if item.request_id not in self._generators:
                    self._generators[item.request_id] = (
                        torch.Generator(device=self.device).manual_seed(params.seed)
                        if params.seed is not None
                        else None
                    )
            else:
                table = self._block_tables[item.request_id]
                table.extend(item.block_ids)
            start = item.num_computed_tokens
            end = start + item.num_new_tokens
            input_ids.extend(item.token_ids)
            positions.extend(range(start, end))
            slots.extend(table[p // bs] * bs + p % bs for p in range(start, end))
            tables.append(table)
            if item.samples_token:
                # NOTE: one row per draft position plus the one after the last draft
                logit_rows.extend(
                    range(len(input_ids) - 1 - len(item.draft_token_ids), len(input_ids))
                )
        width = max(len(t) for t in tables)
        device = self.device
        metadata = AttentionMetadata(
            slot_mapping=torch.tensor(slots, dtype=torch.long, device=device),
            query_lens=tuple(item.num_new_tokens for item in output.scheduled),
            context_lens=tuple(i.num_computed_tokens + i.num_new_tokens for i in output.scheduled),
            block_tables=torch.tensor(
                [t + [0] * (width - len(t)) for t in tables], dtype=torch.long, device=device
            ),
            block_size=bs,
        )
        ids = torch.tensor(input_ids, dtype=torch.long, device=device)
        pos = torch.tensor(positions, dtype=torch.long, device=device)
        lora_batch = self._lora_batch(output) if self.lora is not None else None
        prepared = time.perf_counter()

        hidden = self.model(ids, pos, self.kv_caches, metadata, lora_batch)
        result = RunnerOutput([None] * len(output.scheduled))
        if logit_rows:
            rows = torch.tensor(logit_rows, dtype=torch.long, device=device)
            logits = self.model.compute_logits(hidden.index_select(0, rows))
            if logits.is_cuda:
                torch.cuda.synchronize()
            forwarded = time.perf_counter()
            result = self._sample(output, logits, histories or {}, grammar_bitmask)
        else:
            if hidden.is_cuda:
                torch.cuda.synchronize()
            forwarded = time.perf_counter()
        self.last_timing = StepTiming(
            prepared - started, forwarded - prepared, time.perf_counter() - forwarded
        )
        return result

    def _sample(
        self,
        output: SchedulerOutput,
        logits: torch.Tensor,
        histories: Mapping[str, TokenHistory],
        grammar_bitmask: GrammarBitmask | None,
    ) -> RunnerOutput:
        """Sample every logits row (one per sampling request, more for one with drafts) and
        judge the drafts; ``logits`` rows are in the scheduled order."""
        sampling_items = [i for i in output.scheduled if i.samples_token]
        sampling_rows: list[SamplingRow] = []
        first_rows: dict[str, int] = {}
        for item in sampling_items:
            first_rows[item.request_id] = len(sampling_rows)
            sampling_rows.extend(self._rows_of(item, histories.get(item.request_id)))
        if grammar_bitmask is not None:
            apply_grammar_bitmask(logits, grammar_bitmask, first_rows)
        sampled = sample(logits, sampling_rows, self._default_generator)
        tokens: dict[str, int] = {}
        accepted: dict[str, tuple[int, ...]] = {}
        logprobs: dict[str, tuple[TokenLogprobs, ...]] = {}
        for item in sampling_items:
            first = first_rows[item.request_id]
            end = first + len(item.draft_token_ids) + 1
            judged = verdict(item.draft_token_ids, sampled.token_ids[first:end])
            tokens[item.request_id] = judged.token_id
            if item.draft_token_ids:
                accepted[item.request_id] = judged.accepted_token_ids
            kept = sampled.logprobs[first : first + len(judged.accepted_token_ids) + 1]
            if kept and kept[0] is not None:
                logprobs[item.request_id] = tuple(lp for lp in kept if lp is not None)
        return RunnerOutput(
            [tokens.get(i.request_id) if i.samples_token else None for i in output.scheduled],
            logprobs,
            accepted,
        )

    def _rows_of(self, item: ScheduledRequest, history: TokenHistory | None) -> list[SamplingRow]:
        """The sampling rows of one request: one, or with drafts one per draft position (each
        seeing the drafts before it as output) plus one after the last."""
        params, rid = item.sampling_params, item.request_id
        generator = self._generators.get(rid)
        prompt_ids = self._kept_prompt_token_ids(rid, params, history)
        drafts = item.draft_token_ids
        rows = []
        for j in range(len(drafts) + 1):
            seen = history
            if j and history is not None and (params.has_penalties or params.min_tokens):
                seen = DraftHistory(history, drafts[:j])
            draft = drafts[j] if j < len(drafts) else None
            rows.append(SamplingRow(params, generator, seen, prompt_ids, draft))
        return rows
