"""Our paged Llama against transformers' LlamaForCausalLM on the same saved checkpoint.

Every case compares the logits of every new token with transformers' logits for the
whole sequence, so a wrong position, mask, block read or cache write anywhere shows.
"""

from __future__ import annotations

import pytest
import torch
import transformers

from engine.model import LlamaForCausalLM, load_model
from tests.engine.model.checkpoint import hf_llama_config, random_hf_llama, save_hf_checkpoint
from tests.engine.model.paged_batch import PagedBatchDriver

BLOCK_SIZE = 8
NUM_BLOCKS = 64
ATOL = 1e-4
RTOL = 1e-5


def _load_pair(
    tmp_path_factory: pytest.TempPathFactory, name: str, **config_overrides
) -> tuple[transformers.LlamaForCausalLM, LlamaForCausalLM]:
    hf_model = random_hf_llama(hf_llama_config(**config_overrides), seed=0)
    directory = save_hf_checkpoint(hf_model, tmp_path_factory.mktemp(name))
    model, _, _ = load_model(str(directory), device="cpu", dtype="float32")
    return hf_model, model


@pytest.fixture(scope="module")
def models(tmp_path_factory) -> tuple[transformers.LlamaForCausalLM, LlamaForCausalLM]:
    return _load_pair(tmp_path_factory, "llama")


def _token_ids(length: int, seed: int) -> list[int]:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (length,), generator=generator).tolist()


@torch.no_grad()
def _hf_logits(hf_model: transformers.LlamaForCausalLM, token_ids: list[int]) -> torch.Tensor:
    return hf_model(torch.tensor([token_ids])).logits[0].float()


def _assert_matches(ours: torch.Tensor, reference: torch.Tensor) -> None:
    torch.testing.assert_close(ours, reference, atol=ATOL, rtol=RTOL)


def test_whole_prompt_prefill(models):
    hf_model, model = models
    prompt = _token_ids(45, seed=1)
    (logits,) = PagedBatchDriver(model, NUM_BLOCKS, BLOCK_SIZE).step([("a", prompt)])
    _assert_matches(logits, _hf_logits(hf_model, prompt))


def test_prompt_in_chunks_across_forward_calls(models):
    hf_model, model = models
    prompt = _token_ids(45, seed=2)
    driver = PagedBatchDriver(model, NUM_BLOCKS, BLOCK_SIZE, seed=1)
    # Chunks that end mid-block, fill exactly to a boundary, and a lone token.
    logits, start = [], 0
    for chunk_len in (7, 1, 16, 9, 12):
        logits += driver.step([("a", prompt[start : start + chunk_len])])
        start += chunk_len
    _assert_matches(torch.cat(logits), _hf_logits(hf_model, prompt))


def test_batch_mixing_decodes_and_prefill_chunks(models):
    hf_model, model = models
    sequences = {name: _token_ids(48, seed=10 + i) for i, name in enumerate("abcd")}
    reference = {name: _hf_logits(hf_model, ids) for name, ids in sequences.items()}
    driver = PagedBatchDriver(model, NUM_BLOCKS, BLOCK_SIZE, seed=2)

    def check(step: list[tuple[str, int, int]]) -> None:
        chunks = [(name, sequences[name][start:end]) for name, start, end in step]
        for (name, start, end), logits in zip(step, driver.step(chunks), strict=True):
            _assert_matches(logits, reference[name][start:end])

    check([("a", 0, 29), ("b", 0, 10), ("c", 0, 20)])
    # Decodes interleaved with a chunk that has cached context and a fresh prefill.
    check([("a", 29, 30), ("b", 10, 16), ("c", 20, 21), ("d", 0, 11)])
    # Pure decode steps (the all-decode fast path) at four different context lengths.
    positions = {"a": 30, "b": 16, "c": 21, "d": 11}
    for _ in range(6):
        check([(name, position, position + 1) for name, position in positions.items()])
        positions = {name: position + 1 for name, position in positions.items()}
    # A decode-only step where one request is a long prefill chunk again.
    check([("a", 36, 37), ("d", 17, 40), ("b", 22, 23)])


def test_requests_sharing_prefix_blocks(models):
    hf_model, model = models
    shared = _token_ids(32, seed=20)
    first = [*shared, *_token_ids(8, seed=21)]
    second = [*shared, *_token_ids(10, seed=22)]
    third = [*shared[:24], *_token_ids(1, seed=23)]
    driver = PagedBatchDriver(model, NUM_BLOCKS, BLOCK_SIZE, seed=3)

    (logits,) = driver.step([("first", first[:-1])])
    _assert_matches(logits, _hf_logits(hf_model, first)[:-1])
    # The others adopt first's full blocks and compute only their own tails: a chunk,
    # and a single token (which takes the decode path) over the shared blocks.
    driver.share_prefix("first", "second", num_blocks=4)
    driver.share_prefix("first", "third", num_blocks=3)
    second_logits, third_logits = driver.step([("second", second[32:]), ("third", third[24:])])
    _assert_matches(second_logits, _hf_logits(hf_model, second)[32:])
    _assert_matches(third_logits, _hf_logits(hf_model, third)[24:])
    # First's own blocks were not disturbed by the writes of the requests sharing them.
    first_logits, second_logits = driver.step([("first", first[-1:]), ("second", [7])])
    _assert_matches(first_logits, _hf_logits(hf_model, first)[-1:])
    _assert_matches(second_logits, _hf_logits(hf_model, [*second, 7])[-1:])


@pytest.mark.parametrize(
    ("name", "overrides"),
    [
        # head_dim 16 at theta 5e5 gives wavelengths 6.3, 32.5, 168, ... positions: with
        # original length 64 that is one kept, one smoothed and the rest slowed band.
        (
            "tied-llama3-rope",
            {
                "tie_word_embeddings": True,
                "rope_parameters": {
                    "rope_type": "llama3",
                    "rope_theta": 500000.0,
                    "factor": 4.0,
                    "low_freq_factor": 1.0,
                    "high_freq_factor": 4.0,
                    "original_max_position_embeddings": 64,
                },
            },
        ),
        (
            "linear-rope-mha",
            {"num_key_value_heads": 4, "rope_scaling": {"type": "linear", "factor": 2.0}},
        ),
    ],
)
def test_config_variants(tmp_path_factory, name, overrides):
    hf_model, model = _load_pair(tmp_path_factory, name, **overrides)
    prompt = _token_ids(70, seed=30)
    driver = PagedBatchDriver(model, NUM_BLOCKS, BLOCK_SIZE, seed=4)
    logits = driver.step([("a", prompt[:40])]) + driver.step([("a", prompt[40:])])
    _assert_matches(torch.cat(logits), _hf_logits(hf_model, prompt))
