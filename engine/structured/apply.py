"""Masking the logits of structured rows with their grammars' bitmask (xgrammar's kernels).

On the CPU xgrammar's C++ kernel; on CUDA its Triton kernel when Triton is installed (it comes
with CUDA builds of torch), else its plain torch one. Only the rows of structured requests
are touched (``indices``); a mixed batch's other rows keep their logits.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping

import torch

from engine.structured.manager import GrammarBitmask


def _backend(device: torch.device) -> str:
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda" and importlib.util.find_spec("triton") is not None:
        return "triton"
    return "torch_native"


def apply_grammar_bitmask(
    logits: torch.Tensor, grammar_bitmask: GrammarBitmask, first_rows: Mapping[str, int]
) -> None:
    """Set to -inf, in place, the logits a structured request's grammar forbids next.
    ``first_rows`` maps request ids to their row of ``logits`` ([rows, vocab]); a structured
    request verifies no drafts, so it has that one row."""
    import xgrammar

    pairs = [
        (first_rows[r], row) for row, r in enumerate(grammar_bitmask.request_ids) if r in first_rows
    ]
    if not pairs:
        return
    words = grammar_bitmask.bitmask.shape[-1]
    # NOTE: xgrammar reads row i of the bitmask for row i of the logits; a full-width mask
    # (all ones) under the rows it does not index keeps the shapes aligned
    aligned = torch.full((logits.shape[0], words), -1, dtype=torch.int32)
    indices = [logit_row for logit_row, _ in pairs]
    aligned[indices] = grammar_bitmask.bitmask[[row for _, row in pairs]]
    xgrammar.apply_token_bitmask_inplace(
        logits,
        aligned.to(logits.device),
        vocab_size=min(logits.shape[-1], words * 32),
        indices=indices,
        backend=_backend(logits.device),
    )
