"""The only engine module that touches devices: inputs from a SchedulerOutput, forward, sample.

It keeps each request's block table and sampling generator between steps; the
scheduler sends only the blocks added in a step (or the whole table for a new or
resumed request), so building a step's inputs is O(tokens scheduled + blocks read).
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
from engine.scheduler import SchedulerOutput


@dataclass(frozen=True)
class StepTiming:
    """Wall-clock seconds of one step's phases (the forward includes the device sync)."""

    prepare_seconds: float
    forward_seconds: float
    sample_seconds: float


@dataclass(frozen=True)
class RunnerOutput:
    """The sampled token per scheduled request (None: mid-prefill), and the logprobs of
    those whose requests asked for them, by request id."""

    sampled_token_ids: list[int | None]
    logprobs: dict[str, TokenLogprobs] = field(default_factory=dict)


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
        self, output: SchedulerOutput, histories: Mapping[str, TokenHistory] | None = None
    ) -> RunnerOutput:
        """Run one step. ``histories`` gives each request's tokens so far (for penalties
        and min_tokens); without it those parameters see an empty history."""
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
                logit_rows.append(len(input_ids) - 1)
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
        sampled: list[int | None] = [None] * len(output.scheduled)
        logprobs: dict[str, TokenLogprobs] = {}
        if logit_rows:
            rows = torch.tensor(logit_rows, dtype=torch.long, device=device)
            logits = self.model.compute_logits(hidden.index_select(0, rows))
            if logits.is_cuda:
                torch.cuda.synchronize()
            forwarded = time.perf_counter()
            sampling_items = [i for i in output.scheduled if i.samples_token]
            histories = histories or {}
            sampling_rows = []
            for i in sampling_items:
                history = histories.get(i.request_id)
                sampling_rows.append(
                    SamplingRow(
                        i.sampling_params,
                        self._generators.get(i.request_id),
                        history,
                        self._kept_prompt_token_ids(i.request_id, i.sampling_params, history),
                    )
                )
            result = sample(logits, sampling_rows, self._default_generator)
            it = iter(result.token_ids)
            sampled = [next(it) if i.samples_token else None for i in output.scheduled]
            logprobs = {
                i.request_id: lp
                for i, lp in zip(sampling_items, result.logprobs, strict=True)
                if lp is not None
            }
        else:
            if hidden.is_cuda:
                torch.cuda.synchronize()
            forwarded = time.perf_counter()
        self.last_timing = StepTiming(
            prepared - started, forwarded - prepared, time.perf_counter() - forwarded
        )
        return RunnerOutput(sampled, logprobs)
