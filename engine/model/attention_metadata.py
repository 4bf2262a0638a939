"""What one forward pass needs to read and write the paged KV cache.

The model runner builds this from a ``SchedulerOutput``; the model only reads it.
Tokens of all scheduled requests are laid out back to back in one flat batch
(request 0's new tokens, then request 1's, ...). Each request contributes
``query_lens[i]`` new tokens (a prefill chunk, or 1 for a decode) and, after this
step, has ``context_lens[i]`` tokens in the cache (cached + previously computed + new).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class AttentionMetadata:
    # [num_tokens] flat cache slot (block_id * block_size + offset) where each new
    # token's K and V are written.
    slot_mapping: torch.Tensor
    # [num_seqs] new tokens per request in this step, in batch order (python ints).
    query_lens: tuple[int, ...]
    # [num_seqs] tokens in the cache for each request once this step's are written.
    context_lens: tuple[int, ...]
    # [num_seqs, max_blocks_per_seq] physical block ids, padded with 0 past the end.
    block_tables: torch.Tensor
    block_size: int

    @property
    def num_seqs(self) -> int:
        return len(self.query_lens)
