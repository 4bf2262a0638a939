"""What speculation did in one step, in vLLM's terms (``vllm/v1/spec_decode/metrics.py``).

A *draft* is one request's proposed tokens verified in a step; its accepted tokens are the
leading drafts the target model agreed with (the bonus token sampled after them is not
counted). Per position ``i`` (0-based), ``num_accepted_tokens_per_pos[i]`` counts the drafts
whose token ``i`` was accepted, so it never grows along the positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


class _Verified(Protocol):
    """What a step's stats read of a scheduled request (``ScheduledRequest`` is one)."""

    @property
    def request_id(self) -> str: ...

    @property
    def draft_token_ids(self) -> tuple[int, ...]: ...


@dataclass(frozen=True)
class SpecDecodingStats:
    num_drafts: int
    num_draft_tokens: int
    num_accepted_tokens: int
    num_accepted_tokens_per_pos: tuple[int, ...]

    @classmethod
    def of(cls, num_spec_tokens: int, drafts: Iterable[tuple[int, int]]) -> SpecDecodingStats:
        """From ``(num_draft_tokens, num_accepted_tokens)`` per verified draft."""
        per_pos = [0] * num_spec_tokens
        num_drafts = num_draft_tokens = num_accepted = 0
        for num_draft, accepted in drafts:
            if not 0 <= accepted <= num_draft <= num_spec_tokens:
                raise ValueError(
                    f"{accepted} accepted of {num_draft} draft tokens: must be within "
                    f"0 <= accepted <= drafted <= num_speculative_tokens={num_spec_tokens}"
                )
            num_drafts += 1
            num_draft_tokens += num_draft
            num_accepted += accepted
            for position in range(accepted):
                per_pos[position] += 1
        return cls(num_drafts, num_draft_tokens, num_accepted, tuple(per_pos))

    @classmethod
    def of_step(
        cls,
        num_spec_tokens: int,
        scheduled: Sequence[_Verified],
        accepted: Mapping[str, Sequence[int]],
    ) -> SpecDecodingStats:
        """A step's stats from its scheduled requests and the drafts each one accepted."""
        return cls.of(
            num_spec_tokens,
            (
                (len(item.draft_token_ids), len(accepted.get(item.request_id, ())))
                for item in scheduled
                if item.draft_token_ids
            ),
        )

    @property
    def acceptance_rate(self) -> float:
        """Accepted over drafted tokens (0 when nothing was drafted)."""
        return self.num_accepted_tokens / self.num_draft_tokens if self.num_draft_tokens else 0.0
