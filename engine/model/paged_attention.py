"""Attention over a paged KV cache: write the new K/V, then read each context by block table.

A forward pass mixes decodes (one new token) and prefill chunks (any number of new
tokens, possibly after a cached prefix). ``AttentionPlan`` turns the
``AttentionMetadata`` into index tensors and masks once per forward; every layer then
reuses them. Decodes run as one padded gather plus one ``scaled_dot_product_attention``
call; each prefill chunk runs as its own call, so a long chunk never pads the decodes.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from engine.model.attention_metadata import AttentionMetadata

# Per layer: (key_cache, value_cache), each [num_blocks, block_size, num_kv_heads, head_dim].
KVCache = tuple[torch.Tensor, torch.Tensor]


@dataclass(frozen=True)
class PrefillChunk:
    """One request's prefill chunk: flat tokens [token_start, token_start + num_query_tokens)."""

    token_start: int
    num_query_tokens: int
    context_len: int
    # [ceil(context_len / block_size)] physical blocks holding the context.
    block_ids: torch.Tensor
    # [num_query_tokens, context_len] bool, True = may attend. None when the chunk has no
    # earlier context, so plain causal attention over the new tokens is exact.
    attend_mask: torch.Tensor | None


@dataclass(frozen=True)
class DecodeGroup:
    """Decode requests of similar context length, attended to in one call."""

    # [n] positions of these decode tokens in the flat batch; None = all tokens, in order.
    token_indices: torch.Tensor | None
    # [n * num_blocks] physical blocks, row-major by request.
    block_ids: torch.Tensor
    num_blocks: int
    # [n, 1, 1, num_blocks * block_size] bool, True = key within context.
    key_mask: torch.Tensor


@dataclass(frozen=True)
class AttentionPlan:
    """Index tensors and masks for one forward pass, shared by every layer."""

    num_tokens: int
    block_size: int
    # [num_tokens] int64 flat cache slot for each new token's K/V.
    slot_mapping: torch.Tensor
    num_decodes: int
    # Decodes bucketed by context length (power-of-two block counts), so a short
    # context is never padded to the longest one in the batch.
    decode_groups: tuple[DecodeGroup, ...]
    prefill_chunks: tuple[PrefillChunk, ...]

    @classmethod
    def build(cls, metadata: AttentionMetadata, num_tokens: int) -> AttentionPlan:
        """Validate ``metadata`` against a batch of ``num_tokens`` tokens and plan it."""
        _validate(metadata, num_tokens)
        device = metadata.block_tables.device
        block_size = metadata.block_size
        decode_rows: list[int] = []
        decode_token_indices: list[int] = []
        decode_context_lens: list[int] = []
        prefill_chunks: list[PrefillChunk] = []
        token_start = 0
        for row, (query_len, context_len) in enumerate(
            zip(metadata.query_lens, metadata.context_lens, strict=True)
        ):
            # NOTE: a one-token prefill (e.g. the last prompt token after a prefix-cache
            # hit) is exactly a decode: one query at position context_len - 1 seeing all.
            if query_len == 1:
                decode_rows.append(row)
                decode_token_indices.append(token_start)
                decode_context_lens.append(context_len)
            else:
                prefill_chunks.append(
                    _plan_prefill_chunk(metadata, row, token_start, query_len, context_len)
                )
            token_start += query_len

        num_decodes = len(decode_rows)
        buckets: dict[int, list[int]] = {}
        for i, context_len in enumerate(decode_context_lens):
            num_blocks = -(-context_len // block_size)
            buckets.setdefault(1 << (num_blocks - 1).bit_length(), []).append(i)
        groups = []
        for members in buckets.values():
            lens = [decode_context_lens[i] for i in members]
            num_blocks = -(-max(lens) // block_size)
            if len(members) == num_tokens:
                token_indices = None
                tables = metadata.block_tables[:, :num_blocks]
            else:
                token_indices = torch.tensor(
                    [decode_token_indices[i] for i in members], device=device
                )
                rows = torch.tensor([decode_rows[i] for i in members], device=device)
                tables = metadata.block_tables.index_select(0, rows)[:, :num_blocks]
            context_lens = torch.tensor(lens, device=device)
            key_positions = torch.arange(num_blocks * block_size, device=device)
            key_mask = (key_positions[None, :] < context_lens[:, None])[:, None, None, :]
            groups.append(
                DecodeGroup(token_indices, tables.reshape(-1).long(), num_blocks, key_mask)
            )
        return cls(
            num_tokens=num_tokens,
            block_size=block_size,
            slot_mapping=metadata.slot_mapping.long(),
            num_decodes=num_decodes,
            decode_groups=tuple(groups),
            prefill_chunks=tuple(prefill_chunks),
        )


def _plan_prefill_chunk(
    metadata: AttentionMetadata, row: int, token_start: int, query_len: int, context_len: int
) -> PrefillChunk:
    device = metadata.block_tables.device
    num_blocks = -(-context_len // metadata.block_size)
    attend_mask = None
    if context_len > query_len:
        # Query r sits at position (context_len - query_len + r) and sees keys at <= it.
        query_positions = torch.arange(context_len - query_len, context_len, device=device)
        key_positions = torch.arange(context_len, device=device)
        attend_mask = key_positions[None, :] <= query_positions[:, None]
    return PrefillChunk(
        token_start=token_start,
        num_query_tokens=query_len,
        context_len=context_len,
        block_ids=metadata.block_tables[row, :num_blocks].long(),
        attend_mask=attend_mask,
    )


def _validate(metadata: AttentionMetadata, num_tokens: int) -> None:
    num_seqs = metadata.num_seqs
    if len(metadata.context_lens) != num_seqs or metadata.block_tables.shape[0] != num_seqs:
        raise ValueError(
            f"attention metadata disagrees on the number of requests: {num_seqs} query_lens, "
            f"{len(metadata.context_lens)} context_lens, {metadata.block_tables.shape[0]} "
            "block table rows"
        )
    if sum(metadata.query_lens) != num_tokens or metadata.slot_mapping.numel() != num_tokens:
        raise ValueError(
            f"batch has {num_tokens} tokens but query_lens sum to {sum(metadata.query_lens)} "
            f"and slot_mapping has {metadata.slot_mapping.numel()} entries"
        )
    for query_len, context_len in zip(metadata.query_lens, metadata.context_lens, strict=True):
        if not 1 <= query_len <= context_len:
            raise ValueError(
                f"need 1 <= query_len <= context_len, got query_len={query_len}, "
                f"context_len={context_len}"
            )
    capacity_tokens = metadata.block_tables.shape[1] * metadata.block_size
    if num_seqs and max(metadata.context_lens) > capacity_tokens:
        raise ValueError(
            f"context_len {max(metadata.context_lens)} exceeds the block table capacity "
            f"({metadata.block_tables.shape[1]} blocks x {metadata.block_size} tokens)"
        )


def write_kv(
    key: torch.Tensor, value: torch.Tensor, kv_cache: KVCache, plan: AttentionPlan
) -> None:
    """Store key/value [T, num_kv_heads, head_dim] at the plan's slots (in place)."""
    key_cache, value_cache = kv_cache
    num_kv_heads, head_dim = key_cache.shape[2], key_cache.shape[3]
    key_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, plan.slot_mapping, key)
    value_cache.view(-1, num_kv_heads, head_dim).index_copy_(0, plan.slot_mapping, value)


def paged_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    kv_cache: KVCache,
    plan: AttentionPlan,
    scale: float,
) -> torch.Tensor:
    """Causal attention of every new token over its request's whole context.

    query [T, num_heads, head_dim]; key/value [T, num_kv_heads, head_dim] (RoPE applied).
    Returns [T, num_heads * head_dim]. Writes the new K/V into ``kv_cache`` first, so a
    token's own key and those of earlier tokens in the same chunk are read back from it.
    """
    write_kv(key, value, kv_cache, plan)
    num_heads, head_dim = query.shape[1], query.shape[2]
    groups = plan.decode_groups
    if len(groups) == 1 and groups[0].token_indices is None:
        return _decode_attention(query, kv_cache, groups[0], plan.block_size, scale)
    output = query.new_empty(plan.num_tokens, num_heads * head_dim)
    for group in groups:
        decode_query = query.index_select(0, group.token_indices)
        decode_output = _decode_attention(decode_query, kv_cache, group, plan.block_size, scale)
        output.index_copy_(0, group.token_indices, decode_output)
    for chunk in plan.prefill_chunks:
        end = chunk.token_start + chunk.num_query_tokens
        output[chunk.token_start : end] = _prefill_attention(
            query[chunk.token_start : end],
            key[chunk.token_start : end],
            value[chunk.token_start : end],
            kv_cache,
            chunk,
            scale,
        )
    return output


def _gather_blocks(cache: torch.Tensor, block_ids: torch.Tensor) -> torch.Tensor:
    """cache [num_blocks, ...] -> [len(block_ids), block elements], in block_ids order."""
    return cache.view(cache.shape[0], -1).index_select(0, block_ids)


def _decode_attention(
    query: torch.Tensor, kv_cache: KVCache, group: DecodeGroup, block_size: int, scale: float
) -> torch.Tensor:
    key_cache, value_cache = kv_cache
    num_decodes, num_heads, head_dim = query.shape
    num_kv_heads = key_cache.shape[2]
    num_key_slots = group.num_blocks * block_size
    # [B, kv_heads, slots, D]. index_select on a 2-D view (one row per block) is the
    # fastest gather on CPU, several times faster than advanced indexing.
    keys = _gather_blocks(key_cache, group.block_ids)
    keys = keys.view(num_decodes, num_key_slots, num_kv_heads, head_dim).permute(0, 2, 1, 3)
    values = _gather_blocks(value_cache, group.block_ids)
    values = values.view(num_decodes, num_key_slots, num_kv_heads, head_dim).permute(0, 2, 1, 3)
    # NOTE: grouped-query trick: the query heads sharing a KV head become that head's
    # "query positions", so K/V are never repeated. HF orders heads so query head h
    # uses KV head h // num_queries_per_kv, which is exactly this view.
    grouped_query = query.view(num_decodes, num_kv_heads, num_heads // num_kv_heads, head_dim)
    output = F.scaled_dot_product_attention(
        grouped_query, keys, values, attn_mask=group.key_mask, scale=scale
    )
    return output.reshape(num_decodes, num_heads * head_dim)


def _prefill_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    kv_cache: KVCache,
    chunk: PrefillChunk,
    scale: float,
) -> torch.Tensor:
    num_query_tokens, num_heads, head_dim = query.shape
    num_kv_heads = key.shape[1]
    if chunk.attend_mask is not None:
        # Earlier context lives only in the cache (possibly in blocks shared with other
        # requests), so read the whole context, new tokens included, by block table.
        key_cache, value_cache = kv_cache
        key = _gather_blocks(key_cache, chunk.block_ids).view(-1, num_kv_heads, head_dim)
        value = _gather_blocks(value_cache, chunk.block_ids).view(-1, num_kv_heads, head_dim)
        key, value = key[: chunk.context_len], value[: chunk.context_len]
    group_size = num_heads // num_kv_heads
    # [1, heads, len, D]; repeat K/V per query head (portable across SDPA backends).
    keys = key.transpose(0, 1).repeat_interleave(group_size, dim=0)[None]
    values = value.transpose(0, 1).repeat_interleave(group_size, dim=0)[None]
    output = F.scaled_dot_product_attention(
        query.transpose(0, 1)[None],
        keys,
        values,
        attn_mask=chunk.attend_mask,
        is_causal=chunk.attend_mask is None,
        scale=scale,
    )
    return output[0].transpose(0, 1).reshape(num_query_tokens, num_heads * head_dim)
