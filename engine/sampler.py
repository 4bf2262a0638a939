"""Token sampling: greedy, temperature, min-p, top-k, top-p, with per-request seeds.

Per step, in vLLM's order: raw logprobs (for rows that ask), logits processors
(``engine/logits_processors.py``), greedy argmax; then, for random rows, temperature,
min-p, top-k and top-p, softmax, and one draw per row. A random row that verifies a draft
token (speculative decoding, ``engine/spec_decode/verify.py``) keeps the draft with its
probability and otherwise draws from the distribution without it: the token is distributed
exactly as an ordinary draw, and equals the draft exactly when the draft is accepted.

NOTE: everything runs in float32 (bf16/fp16 logits are upcast first), and every step
that could leave a row with no probability mass keeps the row's most likely token
instead: the top token always survives min-p, top-k and top-p, NaN logits count as
-inf (a row of only -inf is uniform), overflow clamps to the largest float, and a row
that processing turned all -inf falls back to its unprocessed logits. So
``torch.multinomial`` never sees NaN, inf or an all-zero row, whatever the parameters
(``top_p=5e-324`` is the top token, greedy).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from engine.logits_processors import TokenHistory, apply_logits_processors
from engine.outputs import Logprob, TokenLogprobs
from engine.sampling_params import GREEDY_TEMPERATURE_EPSILON, SamplingParams

_FLOAT32_MAX = torch.finfo(torch.float32).max
_NEG_INF = float("-inf")


@dataclass(frozen=True)
class SamplingRow:
    """One row of logits to sample from: the request's parameters, its own generator (set
    for a seeded request), its token history (for penalties and min_tokens) and, when the
    caller keeps them across steps, its distinct prompt token ids (CPU, long; for
    repetition_penalty, else taken from the history each step), and the draft token this
    row verifies, if any."""

    params: SamplingParams
    generator: torch.Generator | None = None
    history: TokenHistory | None = None
    prompt_token_ids: torch.Tensor | None = None
    draft_token_id: int | None = None


@dataclass(frozen=True)
class SamplerOutput:
    token_ids: list[int]
    # per row: None unless the row's request asked for logprobs
    logprobs: list[TokenLogprobs | None]


def sample(
    logits: torch.Tensor, rows: Sequence[SamplingRow], default_generator: torch.Generator
) -> SamplerOutput:
    """One token id per row of ``logits`` ([num_rows, vocab], any float dtype).

    A row with a seeded request draws from that request's own generator, so its tokens
    do not depend on what else shares the batch. Other random rows share
    ``default_generator`` (seeded from the engine's ``seed``).
    """
    params = [row.params for row in rows]
    raw = _finite_or_neg_inf(logits.float())
    dead = raw.amax(dim=-1) == _NEG_INF
    if bool(dead.any()):  # no model does this, but a row of -inf must not stop the engine
        raw[dead] = 0.0
    logprob_rows = [i for i, p in enumerate(params) if p.logprobs is not None]
    raw_logprobs = (
        torch.log_softmax(raw.index_select(0, _index(logprob_rows, raw.device)), dim=-1)
        if logprob_rows
        else None
    )
    processed = raw
    if any(_needs_processing(p) for p in params):
        processed = _finite_or_neg_inf(
            apply_logits_processors(
                raw.clone(),
                params,
                [row.history for row in rows],
                [row.prompt_token_ids for row in rows],
            )
        )
        # NOTE: a row that processing emptied (every token suppressed) samples from its
        # raw logits rather than from nothing.
        emptied = processed.amax(dim=-1) == _NEG_INF
        if bool(emptied.any()):
            processed[emptied] = raw[emptied]
    result = processed.argmax(dim=-1)
    random_rows = [i for i, p in enumerate(params) if not p.is_greedy]
    if random_rows:
        probs = probabilities(
            processed.index_select(0, _index(random_rows, raw.device)),
            [params[i] for i in random_rows],
        )
        for j, i in enumerate(random_rows):
            generator = rows[i].generator or default_generator
            draft = rows[i].draft_token_id
            if draft is None:
                result[i] = torch.multinomial(probs[j], 1, generator=generator)[0]
            else:
                result[i] = _verify_draft(probs[j], draft, generator)
    token_ids = result.tolist()
    logprobs: list[TokenLogprobs | None] = [None] * len(rows)
    if raw_logprobs is not None:
        for j, lp in enumerate(_token_logprobs(raw_logprobs, logprob_rows, token_ids, params)):
            logprobs[logprob_rows[j]] = lp
    return SamplerOutput(token_ids, logprobs)


def _verify_draft(probs: torch.Tensor, draft: int, generator: torch.Generator) -> int:
    """The draft with its probability, else a draw from ``probs`` without it (rejection
    sampling against a draft that proposes one token with certainty, as vLLM's rejection
    sampler treats an n-gram draft)."""
    uniform = torch.rand(1, generator=generator, device=probs.device)
    if bool(uniform < probs[draft]):
        return draft
    residual = probs.clone()
    residual[draft] = 0.0
    if not bool(residual.sum() > 0):  # NOTE: float32 left the draft all the mass
        return draft
    return int(torch.multinomial(residual, 1, generator=generator)[0])


def probabilities(logits: torch.Tensor, params: Sequence[SamplingParams]) -> torch.Tensor:
    """The distribution each random row draws from ([rows, vocab], float32, rows sum to 1).

    ``logits`` are float32 with no NaN and at least one value above -inf per row (what
    ``sample`` passes). Temperature is clamped to [1e-5, float32 max]; the most likely
    token survives every filter.
    """
    temps = torch.tensor(
        [min(max(p.temperature, GREEDY_TEMPERATURE_EPSILON), _FLOAT32_MAX) for p in params],
        dtype=torch.float32,
        device=logits.device,
    )
    # NOTE: shifted so each row's top logit is 0 before dividing: a tiny temperature then
    # cannot overflow the top token to -inf or +inf (softmax is shift-invariant).
    shifted = logits - logits.amax(dim=-1, keepdim=True)
    scaled = _finite_or_neg_inf(shifted / temps.unsqueeze(1))
    min_p_rows = [j for j, p in enumerate(params) if p.min_p > 0.0]
    if min_p_rows:
        index = _index(min_p_rows, logits.device)
        min_ps = torch.tensor([params[j].min_p for j in min_p_rows], device=logits.device)
        scaled[index] = _apply_min_p(scaled.index_select(0, index), min_ps)
    filter_rows = [j for j, p in enumerate(params) if p.top_k > 0 or p.top_p < 1.0]
    if filter_rows:
        index = _index(filter_rows, logits.device)
        top_ks = torch.tensor([max(params[j].top_k, 0) for j in filter_rows], device=index.device)
        # NOTE: float32 rounds a top_p of 1e-300 to 0; harmless, as the top token is kept
        top_ps = torch.tensor([params[j].top_p for j in filter_rows], device=index.device)
        scaled[index] = _apply_top_k_top_p(scaled.index_select(0, index), top_ks, top_ps)
    return scaled.softmax(dim=-1)


def _apply_min_p(logits: torch.Tensor, min_ps: torch.Tensor) -> torch.Tensor:
    """vLLM's min-p: drop tokens whose probability is below ``min_p`` × the top one's."""
    probs = logits.softmax(dim=-1)
    threshold = probs.amax(dim=-1, keepdim=True) * min_ps.unsqueeze(1)
    # NOTE: the top token has probs == max >= threshold, so it is never dropped
    return logits.masked_fill(probs < threshold, _NEG_INF)


def _apply_top_k_top_p(
    logits: torch.Tensor, top_ks: torch.Tensor, top_ps: torch.Tensor
) -> torch.Tensor:
    """Mask logits outside each row's top-k and nucleus (top-p). Rows are independent.

    The nucleus is the smallest prefix (most likely first) whose mass reaches ``top_p``:
    a token is dropped when the mass strictly before it already does. Rank 0 is always
    kept, so no ``top_p`` > 0 (nor rounding in the cumulative sum) can empty a row.
    """
    sorted_logits, sorted_idx = logits.sort(dim=-1, descending=True)
    vocab = logits.shape[-1]
    ranks = torch.arange(vocab, device=logits.device).expand_as(sorted_logits)
    top_ks = top_ks.clamp(max=vocab)
    k = torch.where(top_ks > 0, top_ks, torch.full_like(top_ks, vocab)).unsqueeze(1)
    sorted_logits = sorted_logits.masked_fill(ranks >= k, _NEG_INF)
    probs = sorted_logits.softmax(dim=-1)
    mass_before = probs.cumsum(dim=-1) - probs
    drop = (mass_before >= top_ps.unsqueeze(1)) & (top_ps < 1.0).unsqueeze(1)
    drop[:, 0] = False
    sorted_logits = sorted_logits.masked_fill(drop, _NEG_INF)
    return torch.full_like(logits, _NEG_INF).scatter(-1, sorted_idx, sorted_logits)


def _token_logprobs(
    logprobs: torch.Tensor,
    rows: Sequence[int],
    token_ids: Sequence[int],
    params: Sequence[SamplingParams],
) -> list[TokenLogprobs]:
    """Each row's sampled-token logprob, rank and top-N, from one batched topk."""
    logprobs = logprobs.nan_to_num(nan=_NEG_INF)  # a row of raw logits that was all -inf
    sampled = torch.tensor([token_ids[i] for i in rows], device=logprobs.device).unsqueeze(1)
    sampled_logprobs = logprobs.gather(1, sampled)
    ranks = (logprobs >= sampled_logprobs).sum(dim=-1)
    num_top = max(params[i].logprobs or 0 for i in rows)
    top_values, top_ids = logprobs.topk(min(num_top, logprobs.shape[-1]), dim=-1)
    # NOTE: each tensor leaves the device once; reading them per element would cost a
    # device sync per row on a GPU.
    top_values, top_ids = top_values.tolist(), top_ids.tolist()
    sampled_values, rank_values = sampled_logprobs.squeeze(1).tolist(), ranks.tolist()
    result = []
    for j, i in enumerate(rows):
        n = params[i].logprobs or 0
        top = tuple(Logprob(t, v) for t, v in zip(top_ids[j][:n], top_values[j][:n], strict=True))
        result.append(TokenLogprobs(token_ids[i], sampled_values[j], rank_values[j], top))
    return result


def _needs_processing(p: SamplingParams) -> bool:
    return bool(p.logit_bias) or p.min_tokens > 0 or p.has_penalties


def _finite_or_neg_inf(logits: torch.Tensor) -> torch.Tensor:
    """NaN as -inf, +inf as the largest float32 (so a row's softmax stays defined)."""
    return logits.nan_to_num(nan=_NEG_INF, posinf=_FLOAT32_MAX, neginf=_NEG_INF)


def _index(rows: Sequence[int], device: torch.device) -> torch.Tensor:
    return torch.tensor(rows, dtype=torch.long, device=device)
