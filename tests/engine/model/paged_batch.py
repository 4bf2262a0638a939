"""A test-side stand-in for the block manager and runner around ``LlamaForCausalLM``.

It hands out physical blocks from a shuffled pool (so block tables are never
contiguous), lets one request adopt another's full prefix blocks (as the prefix cache
does), and builds ``AttentionMetadata`` for a step of prefill chunks and decodes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

import torch

from engine.model import AttentionMetadata, LlamaForCausalLM, allocate_kv_caches


class PagedBatchDriver:
    def __init__(
        self, model: LlamaForCausalLM, num_blocks: int, block_size: int, seed: int = 0
    ) -> None:
        self.model = model
        self.block_size = block_size
        parameter = next(model.parameters())
        self.device = parameter.device
        self.kv_caches = allocate_kv_caches(
            model.config, num_blocks, block_size, self.device, parameter.dtype
        )
        self.free_block_ids = list(range(num_blocks))
        random.Random(seed).shuffle(self.free_block_ids)
        self.block_tables: dict[str, list[int]] = {}
        self.num_computed_tokens: dict[str, int] = {}

    def share_prefix(self, source: str, target: str, num_blocks: int) -> None:
        """``target`` starts with ``source``'s first ``num_blocks`` (full) blocks."""
        self.block_tables[target] = self.block_tables[source][:num_blocks]
        self.num_computed_tokens[target] = num_blocks * self.block_size

    def step(self, chunks: Sequence[tuple[str, Sequence[int]]]) -> list[torch.Tensor]:
        """One forward over ``(request, new_token_ids)`` chunks -> per request [q, vocab]."""
        input_ids: list[int] = []
        positions: list[int] = []
        slots: list[int] = []
        query_lens: list[int] = []
        context_lens: list[int] = []
        for request, token_ids in chunks:
            table = self.block_tables.setdefault(request, [])
            start = self.num_computed_tokens.get(request, 0)
            context_len = start + len(token_ids)
            while len(table) * self.block_size < context_len:
                table.append(self.free_block_ids.pop())
            for position in range(start, context_len):
                block_id = table[position // self.block_size]
                slots.append(block_id * self.block_size + position % self.block_size)
            input_ids.extend(token_ids)
            positions.extend(range(start, context_len))
            query_lens.append(len(token_ids))
            context_lens.append(context_len)
            self.num_computed_tokens[request] = context_len

        width = max(len(self.block_tables[request]) for request, _ in chunks)
        tables = [self.block_tables[request] for request, _ in chunks]
        metadata = AttentionMetadata(
            slot_mapping=torch.tensor(slots, device=self.device),
            query_lens=tuple(query_lens),
            context_lens=tuple(context_lens),
            block_tables=torch.tensor(
                [table + [0] * (width - len(table)) for table in tables], device=self.device
            ),
            block_size=self.block_size,
        )
        with torch.inference_mode():
            hidden = self.model(
                torch.tensor(input_ids, device=self.device),
                torch.tensor(positions, device=self.device),
                self.kv_caches,
                metadata,
            )
            logits = self.model.compute_logits(hidden)
        return list(logits.split(query_lens))
