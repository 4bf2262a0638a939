"""What changes the logits before sampling: min_tokens, logit_bias and the penalties.

In vLLM's order (its v1 sampler): min_tokens (EOS and stop token ids to -inf until the
request has that many output tokens), then ``logit_bias``, then the repetition,
frequency and presence penalties. Greedy requests see these too, as in vLLM; temperature,
min-p, top-k and top-p come after (``engine/sampler.py``).

NOTE: each processor touches only the rows that ask for it and, in those rows, only the
token ids the request has seen (its output token counts are kept incrementally on the
request), so a step costs O(batch + tokens penalised), not O(batch × vocabulary), and a
batch that asks for none of this pays one Python loop over its rows. A row's seen ids go
to torch as whole collections (one tensor each), never one Python call per token, and
the model runner keeps each prompt's ids as a tensor, so a long prompt is not converted
again every step.
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
    prompt_token_ids: Sequence[torch.Tensor | None] | None = None,
) -> torch.Tensor:
    """``logits`` ([rows, vocab], float32) with each row's processors applied, in place.

    A row without a history (a caller that keeps none) gets ``logit_bias`` only.
    ``prompt_token_ids`` are rows' distinct prompt ids (CPU, long) that a caller keeps
    across steps; a row without them has its history's converted each step.
    """
    vocab = logits.shape[-1]
    suppress = _Scatter()
    bias = _Scatter()
    repetition = _RowTokens()
    penalty = _RowTokens()
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
            kept = prompt_token_ids[row] if prompt_token_ids is not None else None
            prompt_ids = list(history.distinct_prompt_token_ids()) if kept is None else kept
            # NOTE: prompt and output ids may overlap; _repetition_index drops the repeats
            repetition.add(row, prompt_ids, p.repetition_penalty)
            repetition.add(row, list(history.output_token_counts), p.repetition_penalty)
        if p.presence_penalty or p.frequency_penalty:
            counts = history.output_token_counts
            # NOTE: in float64, as Python would compute it; float32 when applied
            values = torch.tensor(list(counts.values()), dtype=torch.float64)
            penalty.add(row, list(counts), p.frequency_penalty * values + p.presence_penalty)
    if suppress:
        logits[suppress.index(logits.device)] = float("-inf")
    if bias:
        index = bias.index(logits.device)
        logits[index] += bias.values(logits.device)
    if repetition:
        index, factor = _repetition_index(repetition, vocab, logits.device)
        seen = logits[index]
        # NOTE: clamped into float32's normal range so 1e-300 or 1e300 cannot make 0 × inf
        factor = factor.clamp(_FLOAT32_TINY, _FLOAT32_MAX)
        # HF/vLLM semantics: a positive logit is divided by the penalty, others multiplied
        logits[index] = torch.where(seen > 0, seen / factor, seen * factor)
    if penalty:
        rows, token_ids, values = penalty.tensors(logits.device)
        logits[rows, token_ids] -= values
    return logits


def _repetition_index(
    repetition: _RowTokens, vocab: int, device: torch.device
) -> tuple[tuple[torch.Tensor, torch.Tensor], torch.Tensor]:
    """Each (row, token id) once, in the vocabulary, with its row's penalty."""
    rows, token_ids, factors = repetition.tensors(device)
    in_vocab = (token_ids >= 0) & (token_ids < vocab)
    rows, token_ids, factors = rows[in_vocab], token_ids[in_vocab], factors[in_vocab]
    # NOTE: one penalty per row, so a (row, token) key keeps its factor through unique
    keys, inverse = torch.unique(rows * vocab + token_ids, return_inverse=True)
    unique_factors = torch.empty(len(keys), dtype=factors.dtype, device=device)
    unique_factors[inverse] = factors
    return (keys // vocab, keys % vocab), unique_factors


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


class _RowTokens:
    """Per row, a collection of token ids with one value each (or one value for all),
    gathered as tensors and applied in one indexing op."""

    def __init__(self) -> None:
        self._rows: list[torch.Tensor] = []
        self._token_ids: list[torch.Tensor] = []
        self._values: list[torch.Tensor] = []

    def add(
        self, row: int, token_ids: list[int] | torch.Tensor, values: float | torch.Tensor
    ) -> None:
        ids = torch.as_tensor(token_ids, dtype=torch.long)
        self._token_ids.append(ids)
        self._rows.append(torch.full_like(ids, row))
        if not isinstance(values, torch.Tensor):
            values = torch.full(ids.shape, values, dtype=torch.float64)
        self._values.append(values)

    def __bool__(self) -> bool:
        return bool(self._rows)

    def tensors(self, device: torch.device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return (
            torch.cat(self._rows).to(device),
            torch.cat(self._token_ids).to(device),
            # NOTE: float64 → float32 only here, as torch.tensor would: 1e300 becomes inf
            torch.cat(self._values).to(device, torch.float32),
        )
