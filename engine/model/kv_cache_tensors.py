"""The paged KV cache's device memory: one (K, V) tensor pair per layer.

Block ids and tables are managed elsewhere (``engine/kv_cache.py``, pure Python); this
module only sizes and allocates the tensors they index into.
"""

from __future__ import annotations

import torch

from engine.model.config import ModelConfig
from engine.model.paged_attention import KVCache


def kv_cache_block_shape(model_config: ModelConfig, block_size: int) -> tuple[int, int, int]:
    """Shape of one block in one layer's K (or V): [block_size, num_kv_heads, head_dim]."""
    return (block_size, model_config.num_key_value_heads, model_config.head_dim)


def kv_bytes_per_block(model_config: ModelConfig, block_size: int, dtype: torch.dtype) -> int:
    """Bytes one block occupies across all layers, K and V together."""
    return block_size * model_config.kv_bytes_per_token(dtype.itemsize)


def num_blocks_for_memory(
    model_config: ModelConfig, kv_cache_memory_bytes: int, block_size: int, dtype: torch.dtype
) -> int:
    """Whole blocks that fit in ``kv_cache_memory_bytes`` (rounded down; may be 0)."""
    if kv_cache_memory_bytes < 0:
        raise ValueError(f"kv_cache_memory_bytes must be >= 0, got {kv_cache_memory_bytes}")
    if block_size < 1:
        raise ValueError(f"block_size must be >= 1, got {block_size}")
    return kv_cache_memory_bytes // kv_bytes_per_block(model_config, block_size, dtype)


def allocate_kv_caches(
    model_config: ModelConfig,
    num_blocks: int,
    block_size: int,
    device: torch.device | str,
    dtype: torch.dtype,
) -> list[KVCache]:
    """Per layer (K, V), each [num_blocks, block_size, num_kv_heads, head_dim], zeroed.

    ``dtype`` must equal the model's activation dtype (K/V are copied in unconverted).
    """
    if num_blocks < 1 or block_size < 1:
        raise ValueError(
            f"num_blocks and block_size must be >= 1, got {num_blocks} and {block_size}"
        )
    shape = (num_blocks, *kv_cache_block_shape(model_config, block_size))
    # NOTE: zeros, not empty: decode attention gathers whole blocks and masks the unused
    # slots, and a NaN left in uninitialised memory would survive a zero attention weight.
    return [
        (
            torch.zeros(shape, device=device, dtype=dtype),
            torch.zeros(shape, device=device, dtype=dtype),
        )
        for _ in range(model_config.num_hidden_layers)
    ]
