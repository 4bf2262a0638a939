from __future__ import annotations

import pytest
import torch

from engine.model import PRESETS, ModelLoadError, build_model, build_preset_model, get_preset
from engine.model.presets import init_random_weights
from tests.engine.model.paged_batch import PagedBatchDriver

CPU = torch.device("cpu")


def _weights(model) -> dict[str, torch.Tensor]:
    return {name: parameter.clone() for name, parameter in model.named_parameters()}


def test_same_preset_gives_identical_weights_and_another_seed_does_not():
    first, _, _ = build_preset_model("tiny", CPU, torch.float32)
    second, _, _ = build_preset_model("tiny", CPU, torch.float32)
    first_weights, second_weights = _weights(first), _weights(second)
    assert first_weights.keys() == second_weights.keys()
    assert all(torch.equal(first_weights[n], second_weights[n]) for n in first_weights)
    init_random_weights(second, seed=1)
    embeddings = "model.embed_tokens.weight"
    assert not torch.equal(first_weights[embeddings], second.model.embed_tokens.weight)
    assert torch.equal(first.model.norm.weight, torch.ones_like(first.model.norm.weight))


def test_tiny_fits_cpu_tests():
    config = get_preset("tiny").config
    assert config.vocab_size == 258
    assert config.num_key_value_heads < config.num_attention_heads
    assert config.max_position_embeddings >= 2048
    assert config.num_parameters() < 5_000_000


@pytest.mark.parametrize(
    ("name", "low", "high"),
    [("tiny", 2e6, 5e6), ("small", 80e6, 130e6), ("llama-1b", 0.9e9, 1.3e9)],
)
def test_preset_sizes(name, low, high):
    config = get_preset(name).config
    # Built on the meta device: the shapes without the memory.
    model = build_model(config, torch.device("meta"), torch.float32)
    num_parameters = sum(parameter.numel() for parameter in model.parameters())
    assert num_parameters == config.num_parameters()
    assert low <= num_parameters <= high


def test_unknown_preset_lists_the_available_ones():
    with pytest.raises(ModelLoadError, match="unknown model preset 'huge'; available presets: "):
        get_preset("huge")
    assert set(PRESETS) >= {"tiny", "small", "llama-1b"}


def _greedy(model, prompt: list[int], num_tokens: int) -> list[int]:
    driver = PagedBatchDriver(model, num_blocks=32, block_size=16)
    (logits,) = driver.step([("a", prompt)])
    generated = []
    for _ in range(num_tokens):
        assert torch.isfinite(logits).all()
        generated.append(int(logits[-1].argmax()))
        (logits,) = driver.step([("a", generated[-1:])])
    return generated


def test_tiny_generates_deterministically_and_half_precision_stays_close():
    model, _, tokenizer = build_preset_model("tiny", CPU, torch.float32)
    prompt = tokenizer.encode("The quick brown fox")
    tokens = _greedy(model, prompt, num_tokens=12)
    rebuilt, _, _ = build_preset_model("tiny", CPU, torch.float32)
    assert _greedy(rebuilt, prompt, num_tokens=12) == tokens
    # bf16 exercises the half-precision norm path and a bf16 KV cache.
    bf16_model, _, _ = build_preset_model("tiny", CPU, torch.bfloat16)
    (fp32_logits,) = PagedBatchDriver(model, 8, 16).step([("a", prompt)])
    (bf16_logits,) = PagedBatchDriver(bf16_model, 8, 16).step([("a", prompt)])
    assert bf16_logits.dtype == torch.float32  # compute_logits always returns float32
    torch.testing.assert_close(bf16_logits, fp32_logits, atol=5e-2, rtol=0)
