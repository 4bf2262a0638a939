"""LLMEngine behaviour on the tiny preset: bad input, stops, seeds, abort, lifecycle."""

from __future__ import annotations

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError, RequestError
from engine.llm import LLM
from engine.llm_engine import LLMEngine
from engine.model.errors import ModelLoadError
from engine.request import RequestStatus
from engine.sampling_params import SamplingParams
from tests.engine.conftest import run_to_completion

GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)


@pytest.fixture(scope="module")
def llm() -> LLM:
    return LLM("tiny", max_model_len=256, num_gpu_blocks=64, max_num_seqs=8)


@pytest.mark.parametrize(
    ("prompt", "params", "match"),
    [
        ("", GREEDY, "prompt is empty"),
        ([], GREEDY, "prompt is empty"),
        ("x" * 300, GREEDY, r"prompt has 301 tokens, more than max_model_len=256"),
        ("x" * 250, GREEDY, r"prompt \(251 tokens\) plus max_tokens \(8\) is 259"),
        ([1, 2, 999], GREEDY, "token id 999 is outside the vocabulary"),
    ],
)
def test_bad_requests_are_refused_and_the_engine_keeps_serving(llm, prompt, params, match):
    engine = llm.engine
    good = engine.add_request("hello", GREEDY)
    with pytest.raises(RequestError, match=match):
        engine.add_request(prompt, params)
    assert list(engine.scheduler.requests) == [good]
    outputs = run_to_completion(engine)
    assert outputs[good][-1].finished and outputs[good][-1].num_output_tokens == 8


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"max_tokens": 0}, "max_tokens=0: must be at least 1"),
        ({"temperature": -1.0}, "temperature=-1.0"),
        ({"top_p": 0.0}, "top_p=0.0"),
        ({"top_k": -5}, "top_k=-5"),
        ({"stop": ("",)}, "stop strings must be non-empty"),
    ],
)
def test_bad_sampling_params_name_the_field(kwargs, match):
    with pytest.raises(RequestError, match=match):
        SamplingParams(**kwargs)


def test_unknown_preset_and_missing_checkpoint_files(tmp_path):
    with pytest.raises(ModelLoadError, match="neither a model preset"):
        LLM("no-such-model")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=str(tmp_path)):
        LLM(str(tmp_path))


def test_max_tokens_and_lifecycle_timestamps(llm):
    (out,) = llm.generate(["time me"], SamplingParams(max_tokens=5, temperature=0, ignore_eos=True))
    assert len(out.token_ids) == 5 and out.finish_reason == "length"
    t = out.timings
    assert t.arrival_time <= t.first_scheduled_time <= t.first_token_time <= t.finished_time
    assert len(t.token_times) == 5 and list(t.token_times) == sorted(t.token_times)
    assert t.token_times[0] == t.first_token_time
    assert len(t.inter_token_seconds) == 4


def test_greedy_is_deterministic_and_batch_independent(llm):
    alone = llm.generate(["same prompt"], GREEDY)[0].token_ids
    batched = llm.generate(["other", "same prompt", "third one here"], GREEDY)[1].token_ids
    assert alone == batched


def test_seeded_sampling_is_reproducible_whatever_shares_the_batch(llm):
    params = SamplingParams(max_tokens=12, temperature=1.0, seed=7, ignore_eos=True)
    a = llm.generate(["sample me"], params)[0].token_ids
    b = llm.generate(["x", "sample me", "y"], [GREEDY, params, GREEDY])[1].token_ids
    c = llm.generate(
        ["sample me"], SamplingParams(max_tokens=12, temperature=1.0, seed=8, ignore_eos=True)
    )
    assert a == b
    assert c[0].token_ids != a


def test_top_k_one_is_greedy(llm):
    greedy = llm.generate(["topk"], GREEDY)[0].token_ids
    topk = llm.generate(["topk"], SamplingParams(max_tokens=8, top_k=1, seed=3, ignore_eos=True))
    assert topk[0].token_ids == greedy


def test_stop_token_ids_end_the_request_and_are_reported(llm):
    full = llm.generate(["stop tokens"], GREEDY)[0].token_ids
    stop_at = full[3]
    first = full.index(stop_at)
    (out,) = llm.generate(
        ["stop tokens"],
        SamplingParams(max_tokens=8, temperature=0, ignore_eos=True, stop_token_ids=(stop_at,)),
    )
    assert out.token_ids == full[: first + 1]
    assert out.finish_reason == "stop"


def test_abort_frees_blocks_at_once(llm):
    engine = llm.engine
    rid = engine.add_request("abort me " * 10, SamplingParams(max_tokens=100, ignore_eos=True))
    engine.step()
    engine.step()
    assert engine.scheduler.kv_cache.num_free_blocks < engine.num_gpu_blocks
    (out,) = engine.abort([rid])
    assert out.finished and out.finish_reason == "abort"
    assert engine.scheduler.kv_cache.num_free_blocks == engine.num_gpu_blocks
    assert not engine.has_unfinished_requests()
    assert engine.abort([rid]) == []  # already gone: nothing to do, no error


def test_preempted_request_keeps_its_greedy_output():
    prompts = [f"request number {i} " * 4 for i in range(6)]
    tight_llm = LLM("tiny", max_model_len=128, num_gpu_blocks=12, max_num_seqs=6)
    params = SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)
    tight = tight_llm.generate(prompts, params)
    roomy = LLM("tiny", max_model_len=128, num_gpu_blocks=64).generate(prompts, params)
    assert tight_llm.engine.stats().num_preemptions_total > 0
    assert [o.token_ids for o in tight] == [o.token_ids for o in roomy]
    preempted = [o for o in tight if o.num_preemptions]
    assert preempted and all(len(o.timings.preempted_times) == o.num_preemptions for o in preempted)


def test_prefix_cache_hit_is_reported_per_request(llm):
    system = "shared system prompt " * 4  # 84 bytes + BOS: five full blocks
    llm.generate([system + "first"], GREEDY)
    (second,) = llm.generate([system + "second"], GREEDY)
    assert second.num_cached_tokens == 80


def test_engine_refuses_max_model_len_beyond_the_model():
    with pytest.raises(ConfigError, match="max_model_len=100000: model 'tiny' supports at most"):
        LLMEngine(EngineConfig(max_model_len=100000, max_num_batched_tokens=100000))


def test_finished_status_reasons():
    assert RequestStatus.FINISHED_STOPPED.finish_reason == "stop"
    assert RequestStatus.RUNNING.finish_reason is None


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"seed": 2**64}, "seed=18446744073709551616"),
        ({"seed": -(2**63) - 1}, "seed=-9223372036854775809"),
        ({"top_k": 2**63}, "top_k=9223372036854775808"),
    ],
)
def test_out_of_range_sampling_values_are_refused_not_crashed_on(kwargs, match):
    with pytest.raises(RequestError, match=match):
        SamplingParams(**kwargs)


def test_extreme_but_valid_sampling_values_do_not_break_a_step(llm):
    outputs = llm.generate(
        ["a", "b", "c"],
        [
            SamplingParams(max_tokens=4, temperature=1e-30, ignore_eos=True),  # greedy
            SamplingParams(max_tokens=4, top_k=2**31 - 1, seed=2**63 - 1, ignore_eos=True),
            SamplingParams(max_tokens=4, temperature=50.0, top_p=1e-9, ignore_eos=True),
        ],
    )
    assert [len(o.token_ids) for o in outputs] == [4, 4, 4]
    assert (
        outputs[0].token_ids
        == llm.generate(["a"], SamplingParams(max_tokens=4, temperature=0, ignore_eos=True))[
            0
        ].token_ids
    )
