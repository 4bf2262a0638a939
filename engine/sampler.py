"""Token sampling: greedy, temperature, top-k, top-p, with per-request seeds."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from engine.sampling_params import SamplingParams


def _apply_top_k_top_p(logits: torch.Tensor, top_ks: torch.Tensor, top_ps: torch.Tensor):
    """Mask logits outside each row's top-k and nucleus (top-p). Rows are independent."""
    sorted_logits, sorted_idx = logits.sort(dim=-1, descending=True)
    vocab = logits.shape[-1]
    ranks = torch.arange(vocab, device=logits.device).expand_as(sorted_logits)
    top_ks = top_ks.clamp(max=vocab)
    k = torch.where(top_ks > 0, top_ks, torch.full_like(top_ks, vocab)).unsqueeze(1)
    sorted_logits = sorted_logits.masked_fill(ranks >= k, float("-inf"))
    probs = sorted_logits.softmax(dim=-1)
    # keep the smallest prefix whose mass reaches top_p (always at least one token)
    mass_before = probs.cumsum(dim=-1) - probs
    sorted_logits = sorted_logits.masked_fill(mass_before >= top_ps.unsqueeze(1), float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, sorted_idx, sorted_logits)


def sample(
    logits: torch.Tensor,
    params: Sequence[SamplingParams],
    generators: Sequence[torch.Generator | None],
    default_generator: torch.Generator,
) -> list[int]:
    """One token id per row of ``logits`` ([num_rows, vocab], float32).

    A row with a seeded request draws from that request's own generator, so its tokens
    do not depend on what else shares the batch. Other random rows share
    ``default_generator`` (seeded from the engine's ``seed``).
    """
    result = logits.argmax(dim=-1)
    random_rows = [i for i, p in enumerate(params) if not p.is_greedy]
    if random_rows:
        rows = torch.tensor(random_rows, device=logits.device)
        sub = logits.index_select(0, rows)
        temps = torch.tensor([params[i].temperature for i in random_rows], device=logits.device)
        sub = sub / temps.unsqueeze(1)
        needs_filter = any(params[i].top_k > 0 or params[i].top_p < 1.0 for i in random_rows)
        if needs_filter:
            top_ks = torch.tensor([max(params[i].top_k, 0) for i in random_rows], device=sub.device)
            top_ps = torch.tensor([params[i].top_p for i in random_rows], device=sub.device)
            sub = _apply_top_k_top_p(sub, top_ks, top_ps)
        probs = sub.softmax(dim=-1)
        for j, i in enumerate(random_rows):
            generator = generators[i] or default_generator
            result[i] = torch.multinomial(probs[j], 1, generator=generator)[0]
    return result.tolist()
