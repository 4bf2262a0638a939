from __future__ import annotations

import json

import pytest
import torch
import transformers
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

from engine.model import ModelConfig, ModelConfigError, RopeScaling
from engine.model.rope import rope_inverse_frequencies
from tests.engine.model.checkpoint import hf_llama_config

LLAMA3_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 8192,
}


def _saved_config(tmp_path, **overrides) -> dict:
    """config.json exactly as this transformers version's save_pretrained writes it."""
    hf_llama_config(**overrides).save_pretrained(tmp_path)
    return json.loads((tmp_path / "config.json").read_text())


def test_reads_what_save_pretrained_writes(tmp_path):
    config = ModelConfig.from_hf_config(_saved_config(tmp_path, rope_theta=5000.0))
    assert config == ModelConfig(
        vocab_size=258,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        rms_norm_eps=1e-5,
        rope_theta=5000.0,
        max_position_embeddings=512,
        tie_word_embeddings=False,
        bos_token_id=256,
        eos_token_ids=(257,),
    )


def test_reads_transformers_4_layout_with_llama3_scaling_and_eos_list():
    legacy = {
        "model_type": "llama",
        "vocab_size": 128256,
        "hidden_size": 2048,
        "intermediate_size": 8192,
        "num_hidden_layers": 16,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "rope_theta": 500000.0,
        # 4.x wrote the scaling kind under "type".
        "rope_scaling": {
            "type": "llama3",
            **{key: value for key, value in LLAMA3_ROPE.items() if key != "rope_type"},
        },
        "max_position_embeddings": 131072,
        "tie_word_embeddings": True,
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
    }
    config = ModelConfig.from_hf_config(legacy)
    assert config.head_dim == 64  # derived: hidden_size / num_attention_heads
    assert config.rope_theta == 500000.0
    assert config.rope_scaling == RopeScaling("llama3", 8.0, 1.0, 4.0, 8192)
    assert config.eos_token_ids == (128001, 128008, 128009)
    assert config.num_queries_per_kv == 4


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"model_type": "gpt2"}, "not a Llama architecture"),
        ({"hidden_act": "gelu"}, "hidden_act"),
        ({"attention_bias": True}, "attention_bias"),
        ({"rope_parameters": {"rope_type": "yarn", "factor": 4.0}}, "'yarn' is not supported"),
        ({"rope_parameters": {"rope_type": "dynamic", "factor": 2.0}}, "default, linear, llama3"),
        ({"rope_parameters": {"rope_type": "linear"}}, "needs a 'factor'"),
        ({"num_key_value_heads": 3}, "multiple of num_key_value_heads"),
        ({"hidden_size": None}, "missing required keys: hidden_size"),
        ({"eos_token_id": 999}, "outside the vocabulary"),
        ({"rms_norm_eps": 0.0}, "rms_norm_eps"),
    ],
)
def test_rejects_unsupported_or_invalid(tmp_path, overrides, message):
    hf_config = {**_saved_config(tmp_path), **overrides}
    with pytest.raises(ModelConfigError, match=message):
        ModelConfig.from_hf_config(hf_config)


@pytest.mark.parametrize(
    "rope",
    [
        {"rope_type": "default", "rope_theta": 10000.0},
        {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0},
        {**LLAMA3_ROPE, "rope_theta": 500000.0, "original_max_position_embeddings": 64},
    ],
    ids=["default", "linear", "llama3"],
)
def test_rope_frequencies_equal_transformers(tmp_path, rope):
    hf_config = hf_llama_config(rope_parameters=rope)
    ours = rope_inverse_frequencies(ModelConfig.from_hf_config(hf_config.to_dict()))
    torch.testing.assert_close(ours, LlamaRotaryEmbedding(hf_config).inv_freq, rtol=0, atol=0)


def test_parameter_count_and_kv_bytes_match_the_architecture():
    hf_config = hf_llama_config()
    config = ModelConfig.from_hf_config(hf_config.to_dict())
    hf_model = transformers.LlamaForCausalLM(hf_config)
    assert config.num_parameters() == sum(p.numel() for p in hf_model.parameters())
    # K and V, 2 layers, 2 KV heads of 16 dims, 2 bytes each.
    assert config.kv_bytes_per_token(2) == 2 * 2 * 2 * 16 * 2 == 256


def test_config_is_frozen():
    config = ModelConfig.from_hf_config(hf_llama_config().to_dict())
    with pytest.raises(AttributeError):
        config.hidden_size = 1  # type: ignore[misc]
