from __future__ import annotations

import dataclasses

import pytest
import torch

from engine.model import (
    AttentionMetadata,
    allocate_kv_caches,
    build_preset_model,
    get_preset,
    kv_bytes_per_block,
    num_blocks_for_memory,
)

TINY = get_preset("tiny").config


def test_allocates_zeroed_per_layer_pairs():
    caches = allocate_kv_caches(
        TINY, num_blocks=5, block_size=16, device="cpu", dtype=torch.float32
    )
    assert len(caches) == TINY.num_hidden_layers
    for key_cache, value_cache in caches:
        assert key_cache.shape == (5, 16, TINY.num_key_value_heads, TINY.head_dim)
        assert value_cache.shape == key_cache.shape
        assert key_cache.data_ptr() != value_cache.data_ptr()
        assert not key_cache.any() and not value_cache.any()


def test_blocks_for_memory_rounds_down_to_whole_blocks():
    block_bytes = kv_bytes_per_block(TINY, block_size=16, dtype=torch.float16)
    assert block_bytes == 16 * TINY.kv_bytes_per_token(2)
    assert num_blocks_for_memory(TINY, 10 * block_bytes + block_bytes - 1, 16, torch.float16) == 10
    assert num_blocks_for_memory(TINY, block_bytes - 1, 16, torch.float16) == 0
    # float32 halves the blocks that fit.
    assert num_blocks_for_memory(TINY, 10 * block_bytes, 16, torch.float32) == 5
    with pytest.raises(ValueError, match="kv_cache_memory_bytes must be >= 0"):
        num_blocks_for_memory(TINY, -1, 16, torch.float16)
    with pytest.raises(ValueError, match="num_blocks and block_size must be >= 1"):
        allocate_kv_caches(TINY, 0, 16, "cpu", torch.float32)


def _metadata(**changes) -> AttentionMetadata:
    valid = AttentionMetadata(
        slot_mapping=torch.tensor([16, 17, 5]),
        query_lens=(2, 1),
        context_lens=(2, 6),
        block_tables=torch.tensor([[1], [0]]),
        block_size=16,
    )
    return dataclasses.replace(valid, **changes)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"query_lens": (2, 2)}, "query_lens sum to 4"),
        ({"slot_mapping": torch.tensor([16, 17])}, "slot_mapping has 2 entries"),
        ({"context_lens": (1, 6)}, "query_len <= context_len"),
        ({"context_lens": (2,)}, "disagrees on the number of requests"),
        ({"context_lens": (2, 17)}, "exceeds the block table capacity"),
    ],
)
def test_forward_rejects_inconsistent_metadata(changes, message):
    model, config, _ = build_preset_model("tiny", torch.device("cpu"), torch.float32)
    caches = allocate_kv_caches(config, 2, 16, "cpu", torch.float32)
    with pytest.raises(ValueError, match=message), torch.inference_mode():
        model(torch.tensor([1, 2, 3]), torch.tensor([0, 1, 5]), caches, _metadata(**changes))
