"""What changes the logits before sampling: min_tokens, logit_bias and the penalties.

In vLLM's order (its v1 sampler): min_tokens (EOS and stop token ids to -inf until the
request has that many output tokens), then ``logit_bias``, then the repetition,
frequency and presence penalties. Greedy requests see these too, as in vLLM; temperature,
min-p, top-k and top-p come after (``engine/sampler.py``).

NOTE: each processor touches only the rows that ask for it and, in those rows, only the
token ids the request has seen (its output token counts are kept incrementally on the
request), so a step costs O(batch + tokens penalised), not O(batch × vocabulary), and a
batch that asks for none of this pays one Python loop over its rows.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Protocol

import torch

from engine.sampling_params import SamplingParams

_FLOAT32_TINY = torch.finfo(torch.float32).tiny
_FLOAT32_MAX = torch.finfo(torch.float32).max


class TokenHistory(Protocol):
    """What a processor reads of a request (``engine.request.Request`` is one)."""

    @property
    def eos_token_ids(self) -> Collection[int]: ...

    @property
    def output_token_counts(self) -> Mapping[int, int]: ...

    @property
    def num_output_tokens(self) -> int: ...

    def distinct_prompt_token_ids(self) -> Collection[int]: ...


def apply_logits_processors(
    logits: torch.Tensor,
    params: Sequence[SamplingParams],
    histories: Sequence[TokenHistory | None],
) -> torch.Tensor:
    """``logits`` ([rows, vocab], float32) with each row's processors applied, in place.

    A row without a history (a caller that keeps none) gets ``logit_bias`` only.
    """
    vocab = logits.shape[-1]
    suppress = _Scatter()
    bias = _Scatter()
    repetition = _Scatter()
    penalty = _Scatter()
    for row, (p, history) in enumerate(zip(params, histories, strict=True)):
        if p.logit_bias:
            for token_id, value in p.logit_bias:
                if token_id < vocab:  # NOTE: the engine rejects others; a direct caller may not
                    bias.add(row, token_id, value)
        if history is None:
            continue
        if p.min_tokens and history.num_output_tokens < p.min_tokens:
            stop_ids = set(p.stop_token_ids)
            if not p.ignore_eos:
                stop_ids.update(history.eos_token_ids)
            for token_id in stop_ids:
                if 0 <= token_id < vocab:
                    suppress.add(row, token_id, 0.0)
        if p.repetition_penalty != 1.0:
            seen = set(history.distinct_prompt_token_ids())
            seen.update(history.output_token_counts)
            for token_id in seen:
                if 0 <= token_id < vocab:
                    repetition.add(row, token_id, p.repetition_penalty)
        if p.presence_penalty or p.frequency_penalty:
            for token_id, count in history.output_token_counts.items():
                penalty.add(row, token_id, p.frequency_penalty * count + p.presence_penalty)
    if suppress:
        logits[suppress.index(logits.device)] = float("-inf")
    if bias:
        index = bias.index(logits.device)
        logits[index] += bias.values(logits.device)
    if repetition:
        index = repetition.index(logits.device)
        seen = logits[index]
        # NOTE: clamped into float32's normal range so 1e-300 or 1e300 cannot make 0 × inf
        factor = repetition.values(logits.device).clamp(_FLOAT32_TINY, _FLOAT32_MAX)
        # HF/vLLM semantics: a positive logit is divided by the penalty, others multiplied
        logits[index] = torch.where(seen > 0, seen / factor, seen * factor)
    if penalty:
        index = penalty.index(logits.device)
        logits[index] -= penalty.values(logits.device)
    return logits


class _Scatter:
    """(row, token id, value) triples, gathered in Python and applied in one indexing op."""

    def __init__(self) -> None:
        self.rows: list[int] = []
        self.token_ids: list[int] = []
        self._values: list[float] = []

    def add(self, row: int, token_id: int, value: float) -> None:
        self.rows.append(row)
        self.token_ids.append(token_id)
        self._values.append(value)

    def __bool__(self) -> bool:
        return bool(self.rows)

    def index(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        return (
            torch.tensor(self.rows, dtype=torch.long, device=device),
            torch.tensor(self.token_ids, dtype=torch.long, device=device),
        )

    def values(self, device: torch.device) -> torch.Tensor:
        return torch.tensor(self._values, dtype=torch.float32, device=device)
