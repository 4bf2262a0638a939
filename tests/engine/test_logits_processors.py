"""Penalties, logit_bias, min_tokens and logprobs against plain-Python references."""

from __future__ import annotations

import math

import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.logits_processors import apply_logits_processors
from engine.sampler import SamplingRow, sample
from engine.sampling_params import SamplingParams
from tests.engine.test_sampler import EOS, GENERATOR, History

VOCAB = 12


def reference_processed(logits: list[float], p: SamplingParams, h: History) -> list[float]:
    """vLLM's order, one token at a time: min_tokens, logit_bias, repetition, frequency and
    presence penalties."""
    out = list(logits)
    if len(h.output_token_ids) < p.min_tokens:
        stops = set(p.stop_token_ids) | (set() if p.ignore_eos else set(h.eos_token_ids))
        for t in stops:
            if 0 <= t < len(out):
                out[t] = -math.inf
    for t, bias in p.logit_bias:
        out[t] += bias
    seen = set(h.prompt_token_ids) | set(h.output_token_ids)
    for t in range(len(out)):
        if t in seen:
            rp = p.repetition_penalty
            out[t] = out[t] / rp if out[t] > 0 else out[t] * rp
        count = h.output_token_ids.count(t)
        out[t] -= p.frequency_penalty * count + p.presence_penalty * (count > 0)
    return out


@st.composite
def processor_cases(draw):
    logits = draw(st.lists(st.floats(-8, 8, width=32), min_size=VOCAB, max_size=VOCAB))
    tokens = st.integers(0, VOCAB - 1)
    params = SamplingParams(
        max_tokens=20,
        presence_penalty=draw(st.floats(-2, 2)),
        frequency_penalty=draw(st.floats(-2, 2)),
        repetition_penalty=draw(st.sampled_from([1.0, 0.5, 1.3, 2.0])),
        logit_bias=draw(st.dictionaries(tokens, st.floats(-100, 100))),
        min_tokens=draw(st.integers(0, 8)),
        stop_token_ids=tuple(draw(st.lists(st.integers(-2, VOCAB + 2), max_size=3))),
        ignore_eos=draw(st.booleans()),
    )
    history = History(draw(st.lists(tokens, max_size=8)), draw(st.lists(tokens, max_size=8)))
    return logits, params, history


@settings(max_examples=200, deadline=None)
@given(st.lists(processor_cases(), min_size=1, max_size=3))
def test_processors_match_the_reference_row_by_row(cases):
    logits = torch.tensor([c[0] for c in cases], dtype=torch.float32)
    got = apply_logits_processors(logits, [c[1] for c in cases], [c[2] for c in cases])
    for row, (raw, params, history) in enumerate(cases):
        expected = reference_processed(raw, params, history)
        np.testing.assert_allclose(got[row].numpy(), expected, rtol=1e-5, atol=1e-4)


@settings(max_examples=50, deadline=None)
@given(st.lists(processor_cases(), min_size=1, max_size=3), st.data())
def test_prompt_ids_kept_by_the_caller_give_the_same_logits(cases, data):
    # what the model runner passes: each row's distinct prompt ids, kept as a tensor
    logits = torch.tensor([c[0] for c in cases], dtype=torch.float32)
    params, histories = [c[1] for c in cases], [c[2] for c in cases]
    kept = [
        data.draw(st.sampled_from([None, torch.tensor(sorted(h.distinct_prompt_token_ids()))]))
        for h in histories
    ]
    expected = apply_logits_processors(logits.clone(), params, histories)
    got = apply_logits_processors(logits.clone(), params, histories, kept)
    assert torch.equal(got, expected)


def test_a_row_without_processors_is_untouched_beside_one_with_them():
    logits = torch.tensor([[1.0, -2.0, 3.0], [1.0, -2.0, 3.0]])
    params = [SamplingParams(repetition_penalty=2.0), SamplingParams()]
    out = apply_logits_processors(logits.clone(), params, [History([0, 1]), History([0, 1])])
    assert out[0].tolist() == [0.5, -4.0, 3.0] and out[1].tolist() == [1.0, -2.0, 3.0]


def test_min_tokens_suppresses_eos_and_stop_ids_until_reached_then_not():
    logits = torch.tensor([[5.0, 1.0, 4.0, 0.0]])  # greedy would pick EOS (0), then 2
    params = SamplingParams(temperature=0, min_tokens=2, stop_token_ids=(2,))
    before = History(output_token_ids=[3])
    reached = History(output_token_ids=[3, 3])
    assert sample(logits, [SamplingRow(params, None, before)], GENERATOR).token_ids == [1]
    assert sample(logits, [SamplingRow(params, None, reached)], GENERATOR).token_ids == [EOS]


def test_greedy_sees_logit_bias_and_penalties():
    logits = torch.tensor([[5.0, 1.0, 4.0]])
    history = History(output_token_ids=[0])
    for params, expected in [
        (SamplingParams(temperature=0, logit_bias={1: 10}), 1),
        (SamplingParams(temperature=0, presence_penalty=1.5), 2),
        (SamplingParams(temperature=0, repetition_penalty=1.3), 2),
        (SamplingParams(temperature=0, frequency_penalty=-2), 0),
    ]:
        row = SamplingRow(params, None, history)
        assert sample(logits, [row], GENERATOR).token_ids == [expected], params


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.floats(-10, 10, width=32), min_size=2, max_size=VOCAB),
    st.integers(0, 20),
    st.sampled_from([0.0, 0.8, 2.0]),
    st.dictionaries(st.integers(0, 1), st.floats(-100, 100)),
)
def test_logprobs_are_the_raw_distributions(logits, num_top, temperature, bias):
    params = SamplingParams(
        temperature=temperature, logprobs=num_top, logit_bias=bias, repetition_penalty=1.5
    )
    gen = torch.Generator().manual_seed(3)
    row = SamplingRow(params, gen, History([0, 1], [1]))
    out = sample(torch.tensor([logits]), [row], GENERATOR)
    (lp,) = out.logprobs
    # reference: log-softmax of the unprocessed logits, in float64
    x = np.array(logits, dtype=np.float64)
    ref = x - x.max() - np.log(np.exp(x - x.max()).sum())
    token = out.token_ids[0]
    assert lp.token_id == token
    assert math.isclose(lp.logprob, ref[token], rel_tol=1e-5, abs_tol=1e-5)
    # rank: 1 + the tokens more likely; a tie counts as ahead (vLLM's rule)
    assert (ref > ref[token] + 1e-6).sum() + 1 <= lp.rank <= (ref >= ref[token] - 1e-6).sum()
    assert len(lp.top) == min(num_top, len(logits))
    assert [t.logprob for t in lp.top] == sorted((t.logprob for t in lp.top), reverse=True)
    for t in lp.top:
        assert math.isclose(t.logprob, ref[t.token_id], rel_tol=1e-5, abs_tol=1e-5)
    if lp.top:
        assert math.isclose(lp.top[0].logprob, ref.max(), rel_tol=1e-5, abs_tol=1e-5)


def test_rows_without_logprobs_get_none_beside_rows_with_them():
    logits = torch.tensor([[0.0, 1.0], [1.0, 0.0]])
    rows = [SamplingRow(SamplingParams(temperature=0, logprobs=0)), SamplingRow(SamplingParams())]
    out = sample(logits, rows, GENERATOR)
    assert out.logprobs[1] is None
    assert out.logprobs[0].token_id == 1 and out.logprobs[0].rank == 1 and out.logprobs[0].top == ()
    assert math.isclose(out.logprobs[0].logprob, -math.log1p(math.exp(-1)), rel_tol=1e-6)
