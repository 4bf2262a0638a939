"""KV cache manager: per-request block tables and prefix caching over full blocks.

Pure Python, no torch. Prefix hashes chain over full blocks only: a block's hash is
SHA-256 of its parent's hash, its token ids and extra keys (the LoRA adapter's id and the
tenant's cache salt, in the first block only; the chain carries them onward). SHA-256 rather than Python's
``hash`` so that a hit implies equal tokens for any practical purpose (vLLM's
``sha256`` prefix-caching option).
"""

from __future__ import annotations

import hashlib
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from engine.block_pool import BlockPool, KVBlock
from engine.request import Request

_NO_PARENT = b"\x00" * 32
_ITEM_BYTES = array("q").itemsize


def hash_block_tokens(
    parent_hash: bytes | None,
    token_ids: Sequence[int],
    extra_key: str | None = None,
    lora_int_id: int | None = None,
) -> bytes:
    return _hash_block_bytes(parent_hash, array("q", token_ids).tobytes(), extra_key, lora_int_id)


def _hash_block_bytes(
    parent_hash: bytes | None,
    token_bytes: bytes,
    extra_key: str | None,
    lora_int_id: int | None = None,
) -> bytes:
    # NOTE: one sha256 over the concatenation (the same digest as one update per part).
    # The parent and the tokens have fixed widths and the adapter id ends at its ';', so the
    # salt (any text a client sends) can never make two different key sets hash alike.
    data = (parent_hash or _NO_PARENT) + token_bytes
    if lora_int_id is not None:
        data += b"\x02lora:%d;" % lora_int_id
    if extra_key is not None:
        data += b"\x01salt:" + extra_key.encode()
    return hashlib.sha256(data).digest()


def update_block_hashes(request: Request, block_size: int) -> list[bytes]:
    """Extend ``request.block_hashes`` to cover every full block of its tokens."""
    hashes = request.block_hashes
    tokens = request.all_token_ids
    first, last = len(hashes), len(tokens) // block_size
    if first >= last:
        return hashes
    # NOTE: the new blocks' ids as bytes in one conversion, then a slice per block: the
    # same bytes hash_block_tokens converts block by block (a prompt has many blocks)
    token_bytes = array("q", tokens[first * block_size : last * block_size]).tobytes()
    width = block_size * _ITEM_BYTES
    parent = hashes[-1] if hashes else _NO_PARENT
    start = 0
    if not hashes:  # NOTE: only the first block carries the salt
        parent = _hash_block_bytes(
            None, token_bytes[:width], request.cache_salt, request.lora_int_id
        )
        hashes.append(parent)
        start = width
    # NOTE: ``_hash_block_bytes`` inline (no salt past the first block): a decode fills a
    # block every block_size tokens and a prompt brings many
    sha256, append = hashlib.sha256, hashes.append
    for offset in range(start, len(token_bytes), width):
        parent = sha256(parent + token_bytes[offset : offset + width]).digest()
        append(parent)
    return hashes


@dataclass(frozen=True)
class PrefixCacheStats:
    """Cumulative prefix-cache lookups, in tokens (vLLM's ``prefix_cache_queries/hits``)."""

    num_queries_tokens: int
    num_hits_tokens: int

    @property
    def hit_rate(self) -> float:
        return self.num_hits_tokens / self.num_queries_tokens if self.num_queries_tokens else 0.0


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


class KVCacheManager:
    def __init__(self, num_blocks: int, block_size: int, enable_caching: bool) -> None:
        self.block_size = block_size
        self.enable_caching = enable_caching
        self.pool = BlockPool(num_blocks)
        self._blocks: dict[str, list[KVBlock]] = {}
        self._num_cached_blocks: dict[str, int] = {}
        self._num_queries_tokens = 0
        self._num_hits_tokens = 0

    # -- lookups ---------------------------------------------------------------------------

    @property
    def num_free_blocks(self) -> int:
        return self.pool.num_free_blocks

    @property
    def usage(self) -> float:
        return self.pool.usage

    @property
    def num_usable_blocks(self) -> int:
        """Blocks requests may hold: the pool less those a knob change reserved."""
        return self.pool.num_usable_blocks

    @property
    def prefix_cache_stats(self) -> PrefixCacheStats:
        return PrefixCacheStats(self._num_queries_tokens, self._num_hits_tokens)

    def num_blocks(self, request_id: str) -> int:
        """How many blocks the request holds (0 for none), without listing them."""
        return len(self._blocks.get(request_id, ()))

    def get_block_ids(self, request_id: str) -> list[int]:
        return [b.block_id for b in self._blocks.get(request_id, ())]

    def get_computed_blocks(self, request: Request) -> tuple[list[KVBlock], int]:
        """Longest run of cached full blocks that prefix the request, and its token count.

        The last prompt token is always computed (its logits give the first output
        token), so at most ``num_tokens - 1`` tokens can come from the cache.
        """
        if not self.enable_caching:
            return [], 0
        hashes = update_block_hashes(request, self.block_size)
        max_hit_blocks = (request.num_tokens - 1) // self.block_size
        hits: list[KVBlock] = []
        for block_hash in hashes[:max_hit_blocks]:
            block = self.pool.get_cached_block(block_hash)
            if block is None:
                break
            hits.append(block)
        return hits, len(hits) * self.block_size

    def record_prefix_query(self, request: Request, num_hit_tokens: int) -> None:
        """Count one admission's lookup (called once the admission succeeds)."""
        if self.enable_caching:
            self._num_queries_tokens += request.num_tokens
            self._num_hits_tokens += num_hit_tokens

    # -- allocation ------------------------------------------------------------------------

    def allocate_slots(
        self,
        request: Request,
        num_new_tokens: int,
        new_computed_blocks: Sequence[KVBlock] = (),
        num_new_computed_tokens: int = 0,
    ) -> list[KVBlock] | None:
        """Make room for ``num_new_tokens`` more tokens; None when the pool is too small.

        ``new_computed_blocks`` are prefix hits from ``get_computed_blocks`` that the
        request takes on admission. Returns the newly allocated (not hit) blocks.
        """
        blocks = self._blocks.get(request.request_id, [])
        num_computed = request.num_computed_tokens + num_new_computed_tokens
        num_required = cdiv(num_computed + num_new_tokens, self.block_size)
        num_new_blocks = max(0, num_required - len(blocks) - len(new_computed_blocks))
        # Hit blocks that are free right now leave the free list when taken.
        num_evictable_hits = (
            sum(1 for b in new_computed_blocks if b.ref_cnt == 0) if new_computed_blocks else 0
        )
        if num_new_blocks > self.pool.num_free_blocks - num_evictable_hits:
            return None
        if new_computed_blocks:
            self.pool.touch(new_computed_blocks)
            blocks.extend(new_computed_blocks)
        new_blocks = self.pool.get_new_blocks(num_new_blocks)
        blocks.extend(new_blocks)
        self._blocks[request.request_id] = blocks
        return new_blocks

    def allocate_next_blocks(self, requests: Sequence[Request]) -> None:
        """``allocate_slots(request, 1)`` for each request in order, when each one's blocks
        hold exactly its computed tokens, a whole number of blocks (so its next token
        needs one more), taken off the free list in one walk; raises ``ValueError`` (and
        takes none) when fewer blocks are free. The offline fast path's decodes that
        cross into a block."""
        new_blocks = self.pool.get_new_blocks(len(requests))
        tables = self._blocks
        for request, block in zip(requests, new_blocks, strict=True):
            tables.setdefault(request.request_id, []).append(block)

    def cache_filled_block(self, request: Request, index: int, token_bytes: bytes) -> None:
        """``cache_computed_blocks`` for a request whose computed tokens have just filled
        block ``index`` (those before it indexed), given that block's ids as
        ``array("q", ids).tobytes()``: its ``all_token_ids`` may not hold them yet (the
        offline fast path's deferred decodes). The same hash, index entry and count as
        ``cache_computed_blocks`` would make."""
        if not self.enable_caching:
            return
        request_id, num_cached = request.request_id, self._num_cached_blocks
        if num_cached.get(request_id, 0) != index:
            raise RuntimeError(f"{request_id!r}: block {index} is not its next one to cache")
        hashes = request.block_hashes
        if len(hashes) == index:
            if hashes:  # NOTE: ``_hash_block_bytes`` inline: no salt past the first block
                hashes.append(hashlib.sha256(hashes[-1] + token_bytes).digest())
            else:
                hashes.append(
                    _hash_block_bytes(None, token_bytes, request.cache_salt, request.lora_int_id)
                )
        elif len(hashes) < index:
            raise RuntimeError(f"{request_id!r}: block {index} has no hash before it")
        block, block_hash = self._blocks[request_id][index], hashes[index]
        cached = self.pool.cached_blocks
        if block.block_hash is None and block_hash not in cached:  # ``cache_block`` inline
            block.block_hash = block_hash
            cached[block_hash] = block
        num_cached[request_id] = index + 1

    def free(self, request: Request) -> None:
        """Release a request's blocks; the tail goes first so it is evicted first."""
        blocks = self._blocks.pop(request.request_id, None)
        self._num_cached_blocks.pop(request.request_id, None)
        if blocks:
            self.pool.free_blocks(reversed(blocks))

    def set_num_usable_blocks(self, num_blocks: int) -> None:
        """Reserve all but ``num_blocks`` blocks: free ones now, held ones as they free."""
        self.pool.set_num_reserved(self.pool.num_blocks - num_blocks)

    def set_caching(self, enabled: bool) -> None:
        """Turn prefix caching on or off between steps; off forgets every cached hash."""
        self.enable_caching = enabled
        if not enabled:
            self.pool.reset_prefix_cache()
            self._num_cached_blocks.clear()

    def cache_computed_blocks(self, request: Request) -> None:
        """Index the request's full blocks whose tokens have been computed.

        NOTE: called after a step, not at allocation: a block indexed before its K/V
        exist could be hit by another request if its owner is preempted in the same
        step (vLLM indexes at allocation and relies on in-step ordering instead).
        """
        if not self.enable_caching:
            return
        blocks = self._blocks.get(request.request_id)
        if not blocks:
            return
        num_full = min(request.num_computed_tokens // self.block_size, len(blocks))
        start = self._num_cached_blocks.get(request.request_id, 0)
        if num_full <= start:
            return
        hashes = update_block_hashes(request, self.block_size)
        end = min(num_full, len(hashes))
        self.pool.cache_blocks(blocks[start:end], hashes[start:end])
        self._num_cached_blocks[request.request_id] = end
