"""Greedy generation through every engine path equals transformers' greedy ``generate``.

One engine run exercises batching, paging, chunked prefill, prefix caching and forced
preemption (a KV pool too small for the batch); each path is checked to have happened.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from engine.llm import LLM
from engine.sampling_params import SamplingParams
from tests.engine.model.checkpoint import hf_llama_config, random_hf_llama, save_hf_checkpoint

NUM_NEW_TOKENS = 24


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    hf_model = random_hf_llama(hf_llama_config(), seed=1234)
    directory = save_hf_checkpoint(hf_model, tmp_path_factory.mktemp("ckpt"))
    return hf_model, directory


def _hf_greedy(hf_model, prompt_ids: list[int]) -> list[int]:
    # NOTE: generate() falls back to the model's EOS when the config leaves it unset, and
    # min_new_tokens would change the logits; a stop criterion on length alone matches
    # our ignore_eos (EOS may be generated, generation just does not stop there).
    hf_model.generation_config.eos_token_id = None
    config = transformers.GenerationConfig(
        max_new_tokens=NUM_NEW_TOKENS, do_sample=False, pad_token_id=0
    )
    with torch.no_grad():
        out = hf_model.generate(torch.tensor([prompt_ids]), generation_config=config)
    generated = out[0, len(prompt_ids) :].tolist()
    assert len(generated) == NUM_NEW_TOKENS
    return generated


def test_greedy_outputs_equal_transformers_through_every_engine_path(checkpoint):
    hf_model, directory = checkpoint
    shared = list(range(40, 40 + 37))  # shared system prompt: two full blocks of 16, and more
    prompts = [
        [256, *shared, 1, 2, 3],
        [256, *shared, 9, 8, 7, 6, 5],
        [256, *range(100, 190)],  # longer than the token budget: chunked
        [256, 65, 66],
        [256, *shared, 11],
        [256, *range(200, 230)],
    ]
    llm = LLM(
        str(directory),
        block_size=16,
        num_gpu_blocks=16,  # 256 token slots for six requests of up to ~115 tokens
        max_model_len=160,
        max_num_seqs=6,
        max_num_batched_tokens=48,
    )
    params = SamplingParams(max_tokens=NUM_NEW_TOKENS, temperature=0.0, ignore_eos=True)
    outputs = llm.generate(prompts, params)
    stats = llm.engine.stats()
    assert stats.num_preemptions_total > 0, "the small pool should have forced preemption"
    assert stats.prefix_cache_hits_tokens > 0, "the shared prefix should have hit the cache"
    assert any(o.num_preemptions for o in outputs)
    for prompt, output in zip(prompts, outputs, strict=True):
        assert list(output.token_ids) == _hf_greedy(hf_model, prompt), prompt[:5]


def test_greedy_parity_without_caching_or_chunking(checkpoint):
    hf_model, directory = checkpoint
    prompts = [[256, *range(30, 30 + n)] for n in (5, 17, 33)]
    llm = LLM(
        str(directory),
        block_size=8,
        num_gpu_blocks=64,
        max_model_len=128,
        max_num_seqs=3,
        max_num_batched_tokens=128,
        enable_prefix_caching=False,
        enable_chunked_prefill=False,
    )
    outputs = llm.generate(
        prompts, SamplingParams(max_tokens=NUM_NEW_TOKENS, temperature=0.0, ignore_eos=True)
    )
    for prompt, output in zip(prompts, outputs, strict=True):
        assert list(output.token_ids) == _hf_greedy(hf_model, prompt)
