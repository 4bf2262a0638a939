"""The sampling parameters through a real engine step (tiny preset): extremes never stop
the engine, logprobs and penalties reach the outputs, token counts stay exact."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.errors import RequestError
from engine.llm import LLM
from engine.llm_engine import LLMEngine
from engine.model.tokenizer import ByteTokenizer
from engine.sampling_params import SamplingParams
from tests.engine.conftest import run_to_completion

EOS = ByteTokenizer.EOS_TOKEN_ID
VOCAB = ByteTokenizer.NUM_BYTES + 2


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    return LLMEngine(EngineConfig(model="tiny", max_model_len=128, num_gpu_blocks=64))


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"temperature": math.inf}, "temperature=inf: must be finite"),
        ({"min_p": 1.5}, "min_p=1.5"),
        ({"min_p": math.nan}, "min_p=nan"),
        ({"presence_penalty": 2.5}, "presence_penalty=2.5: must be in"),
        ({"frequency_penalty": -2.01}, "frequency_penalty=-2.01"),
        ({"repetition_penalty": 0.0}, "repetition_penalty=0.0"),
        ({"repetition_penalty": math.inf}, "repetition_penalty=inf"),
        ({"min_tokens": 20, "max_tokens": 10}, r"min_tokens=20: .*max_tokens=10"),
        ({"min_tokens": True}, "min_tokens=True"),
        ({"logprobs": 21}, "logprobs=21"),
        ({"logprobs": -1}, "logprobs=-1"),
        ({"logit_bias": {-1: 1.0}}, "logit_bias=-1"),
        ({"logit_bias": {5: 100.5}}, "bias of token 5 must be in"),
        ({"logit_bias": {5: math.nan}}, "bias of token 5"),
        ({"logit_bias": {5: "1"}}, "bias of token 5"),
    ],
)
def test_bad_new_sampling_params_name_the_field(kwargs, match):
    with pytest.raises(RequestError, match=match):
        SamplingParams(**kwargs)


def test_logit_bias_outside_the_vocabulary_is_refused_naming_the_id(engine):
    with pytest.raises(RequestError, match=rf"logit_bias={VOCAB}: token id {VOCAB} is outside"):
        engine.add_request("hi", SamplingParams(logit_bias={VOCAB: 1.0}))
    assert not engine.has_unfinished_requests()


EXTREMES = st.builds(
    SamplingParams,
    max_tokens=st.just(3),
    temperature=st.sampled_from([0.0, 5e-324, 1e-5, 1.0, 1e300]),
    top_p=st.sampled_from([5e-324, 1e-300, 0.5, 1.0]),
    top_k=st.sampled_from([-1, 0, 1, 2**31 - 1]),
    min_p=st.sampled_from([0.0, 1e-300, 1.0]),
    presence_penalty=st.sampled_from([-2.0, 0.0, 2.0]),
    frequency_penalty=st.sampled_from([-2.0, 0.0, 2.0]),
    repetition_penalty=st.sampled_from([5e-324, 1.0, 1e300]),
    logit_bias=st.dictionaries(st.integers(0, VOCAB - 1), st.sampled_from([-100.0, 100.0])),
    min_tokens=st.integers(0, 3),
    logprobs=st.sampled_from([None, 0, 20]),
    seed=st.sampled_from([None, 2**63 - 1]),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(EXTREMES, min_size=1, max_size=3))
def test_extreme_parameters_in_one_batch_never_stop_the_engine(engine, batch):
    ids = [engine.add_request("extreme", params) for params in batch]
    outputs = run_to_completion(engine)
    for request_id, params in zip(ids, batch, strict=True):
        last = outputs[request_id][-1]
        assert last.finished and 1 <= last.num_output_tokens <= 3
        logprobs = [lp for out in outputs[request_id] for lp in out.new_logprobs]
        token_ids = [t for out in outputs[request_id] for t in out.new_token_ids]
        if params.logprobs is None:
            assert logprobs == []
        else:
            assert [lp.token_id for lp in logprobs] == token_ids
            assert all(len(lp.top) == params.logprobs for lp in logprobs)
        if params.min_tokens and last.num_output_tokens < params.min_tokens:
            assert last.finish_reason != "stop"


def test_greedy_logprobs_rank_the_sampled_token_first(engine):
    rid = engine.add_request("hello", SamplingParams(max_tokens=5, temperature=0, logprobs=3))
    outputs = run_to_completion(engine)[rid]
    for out in outputs:
        (lp,) = out.new_logprobs
        assert lp.token_id == out.new_token_ids[0] and lp.rank == 1
        assert lp.top[0].token_id == lp.token_id and lp.top[0].logprob == lp.logprob
        assert lp.logprob <= 0


def test_output_token_counts_stay_exact_through_preemption():
    # a pool too small for both requests' outputs: one is preempted and recomputed
    engine = LLMEngine(EngineConfig(model="tiny", max_model_len=64, num_gpu_blocks=5))
    params = SamplingParams(max_tokens=40, ignore_eos=True, frequency_penalty=1.0, seed=1)
    for i in range(2):
        engine.add_request(f"preempt me {i}", params)
    seen = {}
    for _ in range(500):
        if not engine.has_unfinished_requests():
            break
        engine.step()
        for request in engine.scheduler.requests.values():
            assert request.output_token_counts == Counter(request.output_token_ids)
            seen[request.request_id] = request
    assert sum(r.num_preemptions for r in seen.values()) >= 1


def test_llm_generate_returns_one_logprob_entry_per_token():
    llm = LLM("tiny", max_model_len=64, num_gpu_blocks=16)
    (with_lp, without) = llm.generate(
        ["a", "b"],
        [
            SamplingParams(max_tokens=4, logprobs=2, seed=5, ignore_eos=True),
            SamplingParams(max_tokens=4, ignore_eos=True),
        ],
    )
    assert [lp.token_id for lp in with_lp.logprobs] == list(with_lp.token_ids)
    assert all(len(lp.top) == 2 for lp in with_lp.logprobs) and without.logprobs == ()
