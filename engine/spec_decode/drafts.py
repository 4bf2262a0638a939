"""Who proposes drafts: the ``DraftProposer`` protocol, and the torch engine's n-gram one.

The engine asks after every step, for each request that got tokens and goes on, for up to
``num_drafts_allowed`` tokens. The simulator proposes the tokens it is going to sample
(``engine/sim/features.py``) and prices their acceptance instead.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from engine.request import Request
from engine.spec_decode.config import SpeculativeConfig
from engine.spec_decode.ngram import propose_ngram


class DraftProposer(Protocol):
    def propose(self, request: Request, max_drafts: int) -> list[int]:
        """Up to ``max_drafts`` (>= 1) tokens to verify after the request's tokens so far."""
        ...


def num_drafts_allowed(request: Request, num_speculative_tokens: int, max_model_len: int) -> int:
    """How many drafts the request can use next step: the configured k, less what would run
    past ``max_tokens`` or ``max_model_len`` (one token is always sampled after the drafts).

    NOTE: vLLM drafts up to k and drops what a stop cuts off; bounding by the length left
    here spares verifying tokens that could never be kept."""
    left = min(
        request.sampling_params.max_tokens - request.num_output_tokens,
        max_model_len - request.num_tokens,
    )
    return max(0, min(num_speculative_tokens, left - 1))


def propose_drafts(
    drafter: DraftProposer,
    requests: Sequence[Request],
    num_speculative_tokens: int,
    max_model_len: int,
    skip: Callable[[str], bool] = lambda request_id: False,
) -> None:
    """Set the next step's drafts (``spec_token_ids``) of each of ``requests`` that goes on:
    none where ``skip(request_id)`` or no room is left."""
    for request in requests:
        if request.is_finished:
            continue
        allowed = num_drafts_allowed(request, num_speculative_tokens, max_model_len)
        if allowed < 1 or skip(request.request_id):
            request.spec_token_ids = []
            continue
        request.spec_token_ids = drafter.propose(request, allowed)


class NgramProposer:
    """Prompt lookup over the request's prompt and output (``engine.spec_decode.ngram``)."""

    def __init__(self, config: SpeculativeConfig) -> None:
        self.config = config

    def propose(self, request: Request, max_drafts: int) -> list[int]:
        config = self.config
        return propose_ngram(
            request.all_token_ids, config.prompt_lookup_min, config.prompt_lookup_max, max_drafts
        )
