"""Speculative decoding in the torch engine (tiny preset): exact verification, rejection
sampling's distribution, preemption with drafts, and vLLM's metrics."""

from __future__ import annotations

import torch
from prometheus_client.parser import text_string_to_metric_families

from engine import metric_names as mn
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.metrics import EngineMetrics
from engine.sampler import SamplingRow, sample
from engine.sampling_params import SamplingParams
from tests.engine.conftest import run_to_completion

SPEC = '{"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_min": 1, "prompt_lookup_max": 3}'
REPETITIVE = ["abcabcabcabcabcabcabc", "the cat sat on the mat; the cat sat on the", "xyzxyzxyz"]
RANDOM = ["q8#Lm!vR2", "Hello"]


def _engine(spec: str | None, **knobs) -> LLMEngine:
    knobs = {"max_model_len": 128, "num_gpu_blocks": 64, **knobs}
    return LLMEngine(EngineConfig(model="tiny", speculative_config=spec, **knobs))


def _run(engine: LLMEngine, prompts, params) -> tuple[dict, list]:
    ids = [engine.add_request(p, sp) for p, sp in zip(prompts, params, strict=True)]
    stats, outputs = [], {}
    for _ in range(1000):
        if not engine.has_unfinished_requests():
            break
        for out in engine.step():
            outputs.setdefault(out.request_id, []).append(out)
        if engine.last_step.spec_decoding is not None:
            stats.append(engine.last_step.spec_decoding)
    result = {}
    for i in ids:
        outs = outputs[i]
        result[i] = (
            [t for o in outs for t in o.new_token_ids],
            "".join(o.new_text for o in outs),
            outs[-1].finish_reason,
            [(lp.token_id, round(lp.logprob, 4)) for o in outs for lp in o.new_logprobs],
        )
    return result, stats


def test_greedy_outputs_are_identical_with_and_without_speculation():
    prompts = REPETITIVE + RANDOM
    params = [
        SamplingParams(max_tokens=32, temperature=0.0),
        SamplingParams(
            max_tokens=32, temperature=0.0, repetition_penalty=1.3, presence_penalty=0.4
        ),
        SamplingParams(max_tokens=32, temperature=0.0, stop=("zx",), logprobs=2),
        SamplingParams(max_tokens=32, temperature=0.0, min_tokens=20, frequency_penalty=-0.5),
        SamplingParams(max_tokens=7, temperature=0.0),
    ]
    plain, none = _run(_engine(None), prompts, params)
    speculated, stats = _run(_engine(SPEC), prompts, params)
    assert none == [] and list(plain.values()) == list(speculated.values())
    assert sum(s.num_accepted_tokens for s in stats) > 20  # drafts were used, and kept
    assert sum(s.num_draft_tokens - s.num_accepted_tokens for s in stats) > 0  # and rejected
    assert all(
        list(s.num_accepted_tokens_per_pos) == sorted(s.num_accepted_tokens_per_pos, reverse=True)
        for s in stats
    )


def test_speculation_under_kv_pressure_preempts_and_still_matches():
    prompts = REPETITIVE + RANDOM
    params = [SamplingParams(max_tokens=40, temperature=0.0, ignore_eos=True)] * len(prompts)
    knobs = {"num_gpu_blocks": 12, "block_size": 8, "max_model_len": 96}
    plain, _ = _run(_engine(None, **knobs), prompts, params)
    engine = _engine(SPEC, **knobs)
    speculated, stats = _run(engine, prompts, params)
    assert list(plain.values()) == list(speculated.values())
    assert engine.stats().num_preemptions_total > 0
    assert sum(s.num_accepted_tokens for s in stats) > 0
    assert engine.scheduler.kv_cache.num_free_blocks == 12


def test_rejection_sampling_keeps_the_target_distribution():
    probs = torch.tensor([0.05, 0.5, 0.2, 0.15, 0.1])
    logits = probs.log().expand(6000, -1).contiguous()
    generator = torch.Generator().manual_seed(0)
    params = SamplingParams(temperature=1.0)
    rows = [SamplingRow(params, generator, draft_token_id=2)] * logits.shape[0]
    tokens = torch.tensor(sample(logits, rows, generator).token_ids)
    freq = torch.bincount(tokens, minlength=5).float() / len(tokens)
    assert (freq - probs).abs().sum() / 2 < 0.03  # total variation
    # greedy rows judge by argmax, whatever the draft
    greedy = [SamplingRow(SamplingParams(temperature=0.0), draft_token_id=2)] * 3
    assert sample(logits[:3], greedy, generator).token_ids == [1, 1, 1]


def test_sampled_requests_speculate_and_finish():
    params = [SamplingParams(max_tokens=24, temperature=0.8, seed=s) for s in range(3)]
    engine = _engine(SPEC)
    result, stats = _run(engine, REPETITIVE, params)
    assert all(
        len(tokens) <= 24 and reason in ("stop", "length")
        for tokens, _, reason, _ in result.values()
    )
    assert sum(s.num_drafts for s in stats) > 0
    again, _ = _run(_engine(SPEC), REPETITIVE, params)  # seeded: the same run, the same text
    assert list(again.values()) == list(result.values())


def test_vllm_spec_decode_counters_follow_the_steps():
    engine = _engine(SPEC)
    metrics = EngineMetrics("tiny", engine.knobs(), num_speculative_tokens=4)
    engine.add_request(REPETITIVE[0], SamplingParams(max_tokens=24, temperature=0.0))
    drafts = accepted = 0
    while engine.has_unfinished_requests():
        outputs = engine.step()
        metrics.on_step(engine, outputs, {})
        drafts += engine.last_step.spec_decoding.num_draft_tokens
        accepted += engine.last_step.spec_decoding.num_accepted_tokens
    body, _ = metrics.render(None)
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    value = {
        s.name: s.value for f in families.values() for s in f.samples if "position" not in s.labels
    }
    assert value[mn.SPEC_DECODE_NUM_DRAFT_TOKENS.name + "_total"] == drafts > 0
    assert value[mn.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name + "_total"] == accepted > 0
    per_pos = {
        s.labels["position"]: s.value
        for s in families[mn.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.name].samples
        if s.name.endswith("_total")
    }
    assert sorted(per_pos) == ["0", "1", "2", "3"] and sum(per_pos.values()) == accepted
    assert set(families[mn.SPEC_DECODE_NUM_DRAFTS.name].samples[0].labels) == {
        "model_name",
        "engine",
    }


def test_an_engine_that_does_not_speculate_exports_no_spec_families():
    engine = _engine(None)
    metrics = EngineMetrics("tiny", engine.knobs())
    engine.add_request("abc", SamplingParams(max_tokens=2))
    run_to_completion(engine)
    body, _ = metrics.render(None)
    assert b"spec_decode" not in body


def test_speculation_under_lora_adapters_keeps_each_adapters_greedy_output():
    """Drafts verified under adapters (and the base) in one batch: the verifying forward
    applies each request's adapter to its draft positions too, so greedy outputs are those
    of the same engine without speculation."""
    from engine.lora.source import parse_lora_source

    def run(spec: str | None) -> list:
        engine = _engine(spec, enable_lora=True, max_loras=2)
        a = engine.add_lora("a", parse_lora_source("random:rank=8,seed=1"))
        b = engine.add_lora("b", parse_lora_source("random:rank=16,seed=2"))
        greedy = SamplingParams(max_tokens=24, temperature=0.0)
        ids = [
            engine.add_request(prompt, greedy, lora_request=lora)
            for prompt, lora in zip(REPETITIVE, (a, b, None), strict=True)
        ]
        outputs: dict[str, list[int]] = {}
        drafted = 0
        for _ in range(1000):
            if not engine.has_unfinished_requests():
                break
            for out in engine.step():
                outputs.setdefault(out.request_id, []).extend(out.new_token_ids)
            if engine.last_step.spec_decoding is not None:
                drafted += engine.last_step.spec_decoding.num_accepted_tokens
        return [outputs[i] for i in ids], drafted

    plain, _ = run(None)
    speculated, accepted = run(SPEC)
    assert speculated == plain and accepted > 0
