"""The n-gram (prompt-lookup) proposer: drafts are the tokens that followed an earlier match.

vLLM's rule (``vllm/v1/spec_decode/ngram_proposer.py``): find the longest n-gram, ``n`` in
``[prompt_lookup_min, prompt_lookup_max]``, that ends the sequence (prompt and output) and
occurred earlier in it; of its occurrences take the earliest; propose the up to ``k`` tokens
that followed it (fewer when the sequence ends first).

NOTE: vLLM runs a KMP over the reversed sequence in numba; here each candidate length is one
``bytes.find`` over the ids packed as 32-bit integers (C speed, no new dependency). A match at
an offset that is not a multiple of 4 spans two ids and is skipped.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence

_ITEM = array("i").itemsize


def propose_ngram(token_ids: Sequence[int], min_n: int, max_n: int, k: int) -> list[int]:
    """Up to ``k`` draft token ids for the sequence ``token_ids`` (empty: no match, or k < 1)."""
    total = len(token_ids)
    if k < 1 or total < min_n + 1:
        return []
    packed = array("i", token_ids).tobytes()
    # NOTE: an occurrence must be followed by at least one token, so it lies in all but the
    # last id; the suffix itself (which ends the sequence) is never a match.
    haystack = memoryview(packed)[: (total - 1) * _ITEM].tobytes()
    for n in range(min(max_n, total - 1), min_n - 1, -1):
        start = _earliest(haystack, packed[(total - n) * _ITEM :])
        if start is not None:
            first = start + n
            return list(token_ids[first : first + k])
    return []


def _earliest(haystack: bytes, needle: bytes) -> int | None:
    """The first id index where ``needle`` (whole ids) occurs in ``haystack``, or None."""
    offset = haystack.find(needle)
    while offset >= 0:
        if offset % _ITEM == 0:
            return offset // _ITEM
        offset = haystack.find(needle, offset + 1)
    return None
