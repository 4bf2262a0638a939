"""The sampler against plain-numpy references, and over every parameter at its extremes."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.sampler import SamplingRow, probabilities, sample
from engine.sampling_params import SamplingParams

EOS = 0
GENERATOR = torch.Generator().manual_seed(0)


@dataclass
class History:
    prompt_token_ids: list[int] = field(default_factory=list)
    output_token_ids: list[int] = field(default_factory=list)
    eos_token_ids: frozenset[int] = frozenset({EOS})

    @property
    def output_token_counts(self) -> Counter[int]:
        return Counter(self.output_token_ids)

    @property
    def num_output_tokens(self) -> int:
        return len(self.output_token_ids)

    def distinct_prompt_token_ids(self) -> frozenset[int]:
        return frozenset(self.prompt_token_ids)


# -- every parameter at its extremes: valid ids, never an exception ------------------------

EXTREME_LOGITS = st.one_of(
    st.floats(-1e4, 1e4, width=32),
    st.sampled_from([0.0, -math.inf, math.inf, math.nan, 3.4e38, -3.4e38, 65504.0, 1e-45]),
)
DTYPES = st.sampled_from([torch.float32, torch.float16, torch.bfloat16, torch.float64])


@st.composite
def extreme_params(draw, vocab: int) -> SamplingParams:
    max_tokens = draw(st.sampled_from([1, 4, 2**31]))
    bias_ids = st.integers(0, vocab - 1)
    return SamplingParams(
        max_tokens=max_tokens,
        temperature=draw(
            st.sampled_from([0.0, 5e-324, 9.99e-6, 1e-5, 1.00001e-5, 0.5, 1.0, 50.0, 1e300])
        ),
        top_p=draw(st.sampled_from([5e-324, 1e-300, 1e-9, 0.5, 1 - 1e-16, 1.0])),
        top_k=draw(st.sampled_from([-1, 0, 1, 2, vocab, 2**31 - 1])),
        min_p=draw(st.sampled_from([0.0, 5e-324, 1e-9, 0.5, 1.0])),
        presence_penalty=draw(st.sampled_from([-2.0, 0.0, 1e-300, 2.0])),
        frequency_penalty=draw(st.sampled_from([-2.0, 0.0, 2.0])),
        repetition_penalty=draw(st.sampled_from([5e-324, 1e-9, 0.5, 1.0, 2.0, 1e300])),
        logit_bias=draw(st.dictionaries(bias_ids, st.sampled_from([-100.0, 0.0, 100.0]))),
        min_tokens=draw(st.integers(0, min(max_tokens, 8))),
        logprobs=draw(st.sampled_from([None, 0, 1, 5, 20])),
        stop_token_ids=tuple(draw(st.lists(st.integers(-5, vocab + 5), max_size=3))),
        ignore_eos=draw(st.booleans()),
        seed=draw(st.sampled_from([None, 0, -(2**63), 2**63 - 1])),
    )


@st.composite
def extreme_batches(draw):
    vocab = draw(st.integers(1, 24))
    num_rows = draw(st.integers(1, 4))
    values = draw(
        st.lists(
            st.lists(EXTREME_LOGITS, min_size=vocab, max_size=vocab),
            min_size=num_rows,
            max_size=num_rows,
        )
    )
    if draw(st.booleans()):  # -inf everywhere but one token
        keep = draw(st.integers(0, vocab - 1))
        values[0] = [v if i == keep else -math.inf for i, v in enumerate(values[0])]
    logits = torch.tensor(values, dtype=torch.float64).to(draw(DTYPES))
    rows = []
    for _ in range(num_rows):
        params = draw(extreme_params(vocab))
        history = History(
            draw(st.lists(st.integers(0, vocab - 1), max_size=6)),
            draw(st.lists(st.integers(0, vocab - 1), max_size=6)),
        )
        generator = None if params.seed is None else torch.Generator().manual_seed(params.seed)
        rows.append(SamplingRow(params, generator, draw(st.sampled_from([history, None]))))
    return logits, rows


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(extreme_batches())
def test_every_parameter_at_its_extremes_samples_a_valid_token(batch):
    logits, rows = batch
    vocab = logits.shape[-1]
    out = sample(logits, rows, GENERATOR)
    assert len(out.token_ids) == len(rows)
    assert all(isinstance(t, int) and 0 <= t < vocab for t in out.token_ids)
    for row, token_id, lp in zip(rows, out.token_ids, out.logprobs, strict=True):
        if row.params.logprobs is None:
            assert lp is None
            continue
        assert lp.token_id == token_id and 1 <= lp.rank <= vocab
        assert not math.isnan(lp.logprob) and lp.logprob <= 1e-6
        assert len(lp.top) == min(row.params.logprobs, vocab)
        assert all(not math.isnan(t.logprob) and 0 <= t.token_id < vocab for t in lp.top)


@pytest.mark.parametrize("top_p", [5e-324, 1e-300, 1e-45])
def test_a_vanishing_top_p_is_the_top_token(top_p):
    # the reproduction: this raised "probability tensor contains either inf, nan..."
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.9]])
    params = SamplingParams(temperature=1.0, top_p=top_p)
    for seed in range(20):
        gen = torch.Generator().manual_seed(seed)
        assert sample(logits, [SamplingRow(params, gen)], GENERATOR).token_ids == [1]


def test_a_processed_row_with_no_token_left_falls_back_to_its_raw_logits():
    logits = torch.tensor([[-math.inf, 1.0, -math.inf]])  # only EOS-like token 1 is possible
    params = SamplingParams(min_tokens=3, stop_token_ids=(1,), temperature=0)
    assert sample(logits, [SamplingRow(params, None, History())], GENERATOR).token_ids == [1]


# -- the distribution within the kept set -------------------------------------------------


def reference_probabilities(logits: np.ndarray, p: SamplingParams, margin: float):
    """Plain float64: temperature, min-p, top-k, top-p (vLLM's order). Returns the tokens
    that must be kept and those that must be dropped (a token within ``margin`` of a
    threshold may go either way: float32 rounding)."""
    scaled = logits / p.temperature
    must_keep = np.ones(len(scaled), dtype=bool)
    may_keep = np.ones(len(scaled), dtype=bool)

    def softmax(x, mask):
        e = np.where(mask, np.exp(x - x[mask].max()), 0.0)
        return e / e.sum()

    if p.min_p > 0:
        probs = softmax(scaled, may_keep)
        threshold = probs.max() * p.min_p
        must_keep &= probs >= threshold + margin
        may_keep &= probs >= threshold - margin
    if p.top_k > 0:
        order = np.argsort(-scaled, kind="stable")
        in_top_k = np.zeros(len(scaled), dtype=bool)
        in_top_k[order[: p.top_k]] = True
        must_keep &= in_top_k
        may_keep &= in_top_k
    if p.top_p < 1:
        probs = softmax(scaled, may_keep)
        order = np.argsort(-scaled, kind="stable")
        before = np.concatenate([[0.0], np.cumsum(probs[order])[:-1]])
        mass_before = np.empty(len(scaled))
        mass_before[order] = before
        must_keep &= mass_before < p.top_p - margin
        may_keep &= mass_before < p.top_p + margin
    # a token this unlikely underflows to probability 0 in float32 whether kept or not
    must_keep &= softmax(scaled, np.ones(len(scaled), dtype=bool)) > 1e-30
    top = int(np.argmax(scaled))
    must_keep[top] = may_keep[top] = True
    return scaled, must_keep, may_keep


@st.composite
def distinct_logits(draw):
    vocab = draw(st.integers(1, 16))
    ids = draw(st.lists(st.integers(-40, 40), min_size=vocab, max_size=vocab, unique=True))
    return np.array(ids, dtype=np.float64) / 4


@settings(max_examples=200, deadline=None)
@given(
    distinct_logits(),
    st.floats(0.05, 20.0),
    st.floats(1e-6, 1.0),
    st.integers(-1, 20),
    st.one_of(st.just(0.0), st.floats(1e-6, 1.0)),
)
def test_probabilities_are_the_renormalised_softmax_of_the_kept_set(
    logits, temperature, top_p, top_k, min_p
):
    params = SamplingParams(temperature=temperature, top_p=top_p, top_k=top_k, min_p=min_p)
    got = probabilities(torch.tensor(logits[None], dtype=torch.float32), [params])[0].double()
    got = got.numpy()
    assert np.isfinite(got).all() and (got >= 0).all() and abs(got.sum() - 1) < 1e-5
    scaled, must_keep, may_keep = reference_probabilities(logits, params, margin=1e-5)
    kept = got > 0
    assert (kept >= must_keep).all(), "a token the reference keeps was dropped"
    assert (kept <= may_keep).all(), "a token the reference drops was kept"
    expected = np.where(kept, np.exp(scaled - scaled[kept].max()), 0.0)
    np.testing.assert_allclose(got, expected / expected.sum(), atol=1e-5, rtol=1e-4)


def test_draws_follow_the_distribution():
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, -5.0]])
    params = SamplingParams(temperature=0.7, top_p=0.9, seed=1)
    expected = probabilities(logits, [params])[0].numpy()
    gen = torch.Generator().manual_seed(1)
    counts = Counter(
        sample(logits, [SamplingRow(params, gen)], GENERATOR).token_ids[0] for _ in range(4000)
    )
    observed = np.array([counts[i] for i in range(5)]) / 4000
    assert expected[4] == 0 and counts[4] == 0
    np.testing.assert_allclose(observed, expected, atol=0.03)
