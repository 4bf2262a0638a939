"""Verifying drafts: what the target model's rows see, and how many drafts it accepted.

A request with ``k`` drafts is computed at ``k + 1`` positions in one forward pass: its last
token and its drafts. Row ``j`` (0-based) gives the next token after the sequence extended by
the first ``j`` drafts, so its logits processors (penalties, ``min_tokens``) must see those
drafts as output tokens: ``DraftHistory`` is the request's history so extended.

Each row ``j < k`` is then sampled against draft ``j`` (``engine.sampler``): greedy rows take
their argmax; random rows accept the draft with the target probability of the draft token and
otherwise draw from the target distribution without it (vLLM's rejection sampler for a draft
with no distribution of its own, such as an n-gram's), so every kept token is distributed
exactly as without speculation. The drafts accepted are the leading ones each row agreed
with; the first row that disagreed (or, if all agreed, the last row: the bonus token) gives
the one token sampled after them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from typing import NamedTuple

from engine.logits_processors import TokenHistory


class DraftHistory:
    """``base`` with ``drafts`` appended to its output (a ``TokenHistory``): what a
    verification row's logits processors read. O(distinct output ids) to make."""

    def __init__(self, base: TokenHistory, drafts: Sequence[int]) -> None:
        self._base = base
        counts: Counter[int] = Counter(base.output_token_counts)
        counts.update(drafts)
        self._counts = counts
        self._num_output_tokens = base.num_output_tokens + len(drafts)

    @property
    def eos_token_ids(self) -> Collection[int]:
        return self._base.eos_token_ids

    @property
    def output_token_counts(self) -> Mapping[int, int]:
        return self._counts

    @property
    def num_output_tokens(self) -> int:
        return self._num_output_tokens

    def distinct_prompt_token_ids(self) -> Collection[int]:
        return self._base.distinct_prompt_token_ids()


class Verdict(NamedTuple):
    """The drafts the target accepted, and the token it sampled after them."""

    accepted_token_ids: tuple[int, ...]
    token_id: int


def verdict(draft_token_ids: Sequence[int], row_token_ids: Sequence[int]) -> Verdict:
    """From one request's drafts and the token each of its ``len(drafts) + 1`` rows chose."""
    if len(row_token_ids) != len(draft_token_ids) + 1:
        raise ValueError(
            f"{len(row_token_ids)} rows for {len(draft_token_ids)} drafts: need one more row"
        )
    accepted = 0
    for draft, chosen in zip(draft_token_ids, row_token_ids, strict=False):
        if draft != chosen:
            break
        accepted += 1
    return Verdict(tuple(draft_token_ids[:accepted]), row_token_ids[accepted])
