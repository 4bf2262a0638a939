from __future__ import annotations

import pytest

from engine.block_pool import BlockPool, FreeBlockQueue, KVBlock
from engine.kv_cache import KVCacheManager, hash_block_tokens
from tests.engine.sim import make_request


def test_free_queue_is_o1_doubly_linked_lru():
    blocks = [KVBlock(i) for i in range(5)]
    q = FreeBlockQueue(blocks)
    assert q.block_ids() == [0, 1, 2, 3, 4]
    q.remove(blocks[2])
    assert q.popleft() is blocks[0]
    q.append(blocks[0])
    assert q.block_ids() == [1, 3, 4, 0]
    assert len(q) == 4
    with pytest.raises(ValueError, match="not on the free list"):
        q.remove(blocks[2])


def test_pool_refuses_double_free_and_overallocation():
    pool = BlockPool(2)
    (b,) = pool.get_new_blocks(1)
    pool.free_blocks([b])
    with pytest.raises(ValueError, match="freed more often"):
        pool.free_blocks([b])
    with pytest.raises(ValueError, match="asked for 3 blocks"):
        pool.get_new_blocks(3)


def _admit_and_compute(kv: KVCacheManager, request) -> int:
    hits, num_hit = kv.get_computed_blocks(request)
    assert kv.allocate_slots(request, request.num_tokens - num_hit, hits, num_hit) is not None
    kv.record_prefix_query(request, num_hit)
    request.num_computed_tokens = request.num_tokens
    kv.cache_computed_blocks(request)
    return num_hit


def test_second_request_with_shared_prefix_computes_only_the_tail():
    kv = KVCacheManager(num_blocks=32, block_size=4, enable_caching=True)
    shared = list(range(10, 22))  # three full blocks
    first = make_request([*shared, 1, 2])
    second = make_request([*shared, 7, 8, 9])
    assert _admit_and_compute(kv, first) == 0
    assert _admit_and_compute(kv, second) == 12
    # shared physical blocks for the prefix, private ones for the tail
    assert kv.get_block_ids(first.request_id)[:3] == kv.get_block_ids(second.request_id)[:3]
    assert kv.prefix_cache_stats.num_hits_tokens == 12
    assert kv.prefix_cache_stats.num_queries_tokens == 14 + 15


def test_last_prompt_token_is_always_computed():
    kv = KVCacheManager(num_blocks=32, block_size=4, enable_caching=True)
    prompt = list(range(8))  # exactly two blocks
    _admit_and_compute(kv, make_request(prompt))
    again = make_request(prompt)
    _, num_hit = kv.get_computed_blocks(again)
    assert num_hit == 4  # not 8: the last token must produce logits


def test_cache_salt_isolates_tenants():
    kv = KVCacheManager(num_blocks=32, block_size=4, enable_caching=True)
    prompt = list(range(20))
    _admit_and_compute(kv, make_request(prompt, salt="tenant-a"))
    assert kv.get_computed_blocks(make_request(prompt, salt="tenant-b"))[1] == 0
    assert kv.get_computed_blocks(make_request(prompt, salt="tenant-a"))[1] == 16


def test_freed_blocks_keep_their_hash_and_eviction_is_lru():
    kv = KVCacheManager(num_blocks=4, block_size=4, enable_caching=True)
    a, b = make_request([1] * 5), make_request([2] * 5)
    _admit_and_compute(kv, a)  # 2 blocks, the first full and cached
    _admit_and_compute(kv, b)
    kv.free(a)
    kv.free(b)
    assert kv.num_free_blocks == 4
    # still findable after free
    assert kv.get_computed_blocks(make_request([1] * 5))[1] == 4
    assert kv.get_computed_blocks(make_request([2] * 5))[1] == 4
    # one new block evicts the least recently freed: a's tail block (no hash) first,
    # then a's cached block; b's prefix survives
    c = make_request([3] * 8)
    assert kv.allocate_slots(c, 8) is not None
    assert kv.get_computed_blocks(make_request([1] * 5))[1] == 0
    assert kv.get_computed_blocks(make_request([2] * 5))[1] == 4


def test_switching_caching_off_forgets_hashes():
    kv = KVCacheManager(num_blocks=8, block_size=4, enable_caching=True)
    _admit_and_compute(kv, make_request(list(range(9))))
    kv.set_caching(False)
    kv.set_caching(True)
    assert kv.get_computed_blocks(make_request(list(range(9))))[1] == 0


def test_hash_chain_depends_on_parent_tokens_and_salt():
    h = hash_block_tokens(None, [1, 2, 3])
    assert h != hash_block_tokens(None, [1, 2, 4])
    assert h != hash_block_tokens(hash_block_tokens(None, [0]), [1, 2, 3])
    assert h != hash_block_tokens(None, [1, 2, 3], "salt")
