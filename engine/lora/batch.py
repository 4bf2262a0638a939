"""``LoRABatch``: which tokens of a step's flat batch run with which adapter, and the delta
each adapter adds to the projections it adapts.

Built once per step by the model runner; the decoder layers call ``add_delta`` after each
fused projection. A batch mixes adapters and the base model freely: a token of the base
model gets no delta, a token of an adapter gets that adapter's
``x @ A^T @ B^T * scaling`` on the columns it targets. Per adapter and projection that is
two matmuls over its tokens only (gathered with ``index_select``, scattered back with
``index_add_``; no gather when one adapter has every token of the step).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.lora.weights import LoRAWeights


@dataclass(frozen=True)
class _Segment:
    weights: LoRAWeights
    rows: torch.Tensor | None  # token rows of this adapter; None: every row


class LoRABatch:
    def __init__(self, segments: Sequence[_Segment]) -> None:
        self._segments = tuple(segments)

    @classmethod
    def build(
        cls,
        adapters: Sequence[LoRAWeights | None],
        num_tokens: Sequence[int],
        device: torch.device,
    ) -> LoRABatch | None:
        """The batch of a step whose requests (in order) run with ``adapters`` (None: the
        base model) and compute ``num_tokens`` tokens each; None when no request has one."""
        rows: dict[int, tuple[LoRAWeights, list[int]]] = {}
        start = 0
        for weights, count in zip(adapters, num_tokens, strict=True):
            if weights is not None:
                rows.setdefault(id(weights), (weights, []))[1].extend(range(start, start + count))
            start += count
        if not rows:
            return None
        segments = []
        for weights, token_rows in rows.values():
            index = None
            if len(token_rows) != start:
                index = torch.tensor(token_rows, dtype=torch.long, device=device)
            segments.append(_Segment(weights, index))
        return cls(segments)

    def add_delta(
        self, layer: int, projection: str, hidden: torch.Tensor, out: torch.Tensor
    ) -> torch.Tensor:
        """``out`` (the projection of ``hidden``, [T, fused out]) with every adapter's delta
        added on its tokens' rows; in place where the rows are a subset."""
        for segment in self._segments:
            delta = segment.weights.layers[layer].get(projection)
            if delta is None:
                continue
            if segment.rows is None:
                out = out + (hidden @ delta.a.T) @ delta.b.T
            else:
                x = hidden.index_select(0, segment.rows)
                out.index_add_(0, segment.rows, (x @ delta.a.T) @ delta.b.T)
        return out
