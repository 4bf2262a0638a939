"""The pool of physical KV blocks: ref counts, an O(1) LRU free list, and the prefix-hash index.

Pure Python, no torch. Modelled on vLLM v1's ``BlockPool``: a freed block keeps its
hash (and stays findable by prefix lookups) until it is handed out again, and free
blocks are reused least-recently-freed first.
"""

from __future__ import annotations

from collections.abc import Iterable


class KVBlock:
    __slots__ = ("block_hash", "block_id", "next_free", "prev_free", "ref_cnt")

    def __init__(self, block_id: int) -> None:
        self.block_id = block_id
        self.ref_cnt = 0
        self.block_hash: bytes | None = None
        self.prev_free: KVBlock | None = None
        self.next_free: KVBlock | None = None

    def __repr__(self) -> str:
        return (
            f"KVBlock(id={self.block_id}, ref={self.ref_cnt}, cached={self.block_hash is not None})"
        )


class FreeBlockQueue:
    """Doubly linked list of free blocks in eviction order (head is evicted first).

    NOTE: removal from the middle is O(1) — a prefix hit on a free cached block takes
    it off the list without a scan (nano-vllm's ``deque.remove`` is O(n) here).
    """

    def __init__(self, blocks: Iterable[KVBlock]) -> None:
        self._head = KVBlock(-1)
        self._tail = KVBlock(-1)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self.num_free_blocks = 0
        for block in blocks:
            self.append(block)

    def __len__(self) -> int:
        return self.num_free_blocks

    def popleft(self) -> KVBlock:
        block = self._head.next_free
        if block is self._tail or block is None:
            raise IndexError("no free KV blocks")
        self.remove(block)
        return block

    def popleft_many(self, num_blocks: int) -> list[KVBlock]:
        """The first ``num_blocks`` blocks, taken off in one walk (as many ``popleft``)."""
        if num_blocks > self.num_free_blocks:
            raise IndexError(f"asked for {num_blocks} free KV blocks, {self.num_free_blocks} free")
        blocks = []
        block = self._head.next_free
        for _ in range(num_blocks):
            assert block is not None
            blocks.append(block)
            following = block.next_free
            block.prev_free = block.next_free = None
            block = following
        assert block is not None  # the tail sentinel at worst
        self._head.next_free = block
        block.prev_free = self._head
        self.num_free_blocks -= num_blocks
        return blocks

    def remove(self, block: KVBlock) -> None:
        prev, nxt = block.prev_free, block.next_free
        if prev is None or nxt is None:
            raise ValueError(f"{block!r} is not on the free list")
        prev.next_free = nxt
        nxt.prev_free = prev
        block.prev_free = block.next_free = None
        self.num_free_blocks -= 1

    def append(self, block: KVBlock) -> None:
        last = self._tail.prev_free
        assert last is not None
        last.next_free = block
        block.prev_free = last
        block.next_free = self._tail
        self._tail.prev_free = block
        self.num_free_blocks += 1

    def extend(self, blocks: list[KVBlock]) -> None:
        """``append`` each block in order, linked in one walk."""
        if not blocks:
            return
        tail = self._tail
        last = tail.prev_free
        assert last is not None
        for block in blocks:
            last.next_free = block
            block.prev_free = last
            last = block
        last.next_free = tail
        tail.prev_free = last
        self.num_free_blocks += len(blocks)

    def block_ids(self) -> list[int]:
        """Free block ids head to tail (for tests and debugging; O(n))."""
        ids, block = [], self._head.next_free
        while block is not None and block is not self._tail:
            ids.append(block.block_id)
            block = block.next_free
        return ids


class BlockPool:
    def __init__(self, num_blocks: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"num_blocks={num_blocks}: a KV pool needs at least one block")
        self.num_blocks = num_blocks
        self.blocks = [KVBlock(i) for i in range(num_blocks)]
        self.free_queue = FreeBlockQueue(self.blocks)
        self.cached_blocks: dict[bytes, KVBlock] = {}
        # Blocks withheld from requests, as if another process had taken the memory.
        self.reserved_blocks: list[KVBlock] = []
        self.num_reserved_target = 0

    @property
    def num_free_blocks(self) -> int:
        return len(self.free_queue)

    @property
    def num_usable_blocks(self) -> int:
        return self.num_blocks - self.num_reserved_target

    @property
    def usage(self) -> float:
        """Fraction of usable blocks held by requests (0–1); free cached blocks count as free."""
        usable = self.num_blocks - len(self.reserved_blocks)
        return 1.0 - self.num_free_blocks / usable if usable else 1.0

    def set_num_reserved(self, num_blocks: int) -> None:
        """Withhold ``num_blocks`` blocks from requests (0 releases them all).

        Free blocks are taken at once; the rest are taken as requests release theirs,
        so no running request loses KV it holds.
        """
        if not 0 <= num_blocks < self.num_blocks:
            raise ValueError(f"cannot reserve {num_blocks} of {self.num_blocks} blocks")
        self.num_reserved_target = num_blocks
        while len(self.reserved_blocks) > num_blocks:
            block = self.reserved_blocks.pop()
            self.free_queue.append(block)
        while len(self.reserved_blocks) < num_blocks and self.num_free_blocks:
            self._reserve(self.free_queue.popleft())

    def _reserve(self, block: KVBlock) -> None:
        self._evict(block)
        self.reserved_blocks.append(block)

    def get_cached_block(self, block_hash: bytes) -> KVBlock | None:
        return self.cached_blocks.get(block_hash)

    def get_new_blocks(self, num_blocks: int) -> list[KVBlock]:
        if num_blocks > self.num_free_blocks:
            raise ValueError(f"asked for {num_blocks} blocks, {self.num_free_blocks} are free")
        blocks = self.free_queue.popleft_many(num_blocks)
        cached = self.cached_blocks
        for block in blocks:
            block_hash = block.block_hash
            if block_hash is not None:  # NOTE: ``_evict`` inline (a block a token at worst)
                if cached.get(block_hash) is block:
                    del cached[block_hash]
                block.block_hash = None
            block.ref_cnt = 1
        return blocks

    def touch(self, blocks: Iterable[KVBlock]) -> None:
        """Take a reference on blocks found by a prefix hit (a free one leaves the free list)."""
        for block in blocks:
            if block.ref_cnt == 0:
                self.free_queue.remove(block)
            block.ref_cnt += 1

    def cache_block(self, block: KVBlock, block_hash: bytes) -> None:
        """Register a full, computed block under its prefix hash.

        If another block already holds the same hash (two requests computed the same
        prefix at once), the first stays indexed and this one simply is not cached.
        """
        if block.block_hash is not None:
            return
        if block_hash in self.cached_blocks:
            return
        block.block_hash = block_hash
        self.cached_blocks[block_hash] = block

    def cache_blocks(self, blocks: Iterable[KVBlock], block_hashes: Iterable[bytes]) -> None:
        """``cache_block`` for each pair, in order, in one loop."""
        cached = self.cached_blocks
        for block, block_hash in zip(blocks, block_hashes, strict=True):
            if block.block_hash is None and block_hash not in cached:
                block.block_hash = block_hash
                cached[block_hash] = block

    def free_blocks(self, ordered_blocks: Iterable[KVBlock]) -> None:
        """Drop one reference each; blocks reaching zero join the free list's tail in order."""
        if len(self.reserved_blocks) >= self.num_reserved_target:
            # NOTE: nothing below reserves a block, so none will be: the blocks reaching
            # zero join the tail in one ``extend`` (the same order as one ``append`` each)
            released = []
            for block in ordered_blocks:
                if block.ref_cnt <= 0:
                    self.free_queue.extend(released)
                    raise ValueError(f"{block!r} freed more often than it was taken")
                block.ref_cnt -= 1
                if not block.ref_cnt:
                    released.append(block)
            self.free_queue.extend(released)
            return
        for block in ordered_blocks:
            if block.ref_cnt <= 0:
                raise ValueError(f"{block!r} freed more often than it was taken")
            block.ref_cnt -= 1
            if block.ref_cnt == 0:
                if len(self.reserved_blocks) < self.num_reserved_target:
                    self._reserve(block)
                else:
                    self.free_queue.append(block)

    def reset_prefix_cache(self) -> int:
        """Forget every cached hash (used when prefix caching is switched off). Returns how many."""
        forgotten = len(self.cached_blocks)
        for block in self.cached_blocks.values():
            block.block_hash = None
        self.cached_blocks.clear()
        return forgotten

    def _evict(self, block: KVBlock) -> None:
        if block.block_hash is not None:
            if self.cached_blocks.get(block.block_hash) is block:
                del self.cached_blocks[block.block_hash]
            block.block_hash = None
