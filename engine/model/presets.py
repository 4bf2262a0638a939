"""Built-in model shapes with seeded random weights and the byte-level tokenizer.

Presets need no download and no checkpoint: the same name and seed give bit-identical
weights on every machine (drawn on the CPU in float32 from a seeded generator, then
cast and copied to the target device). Their output is meaningless text, but every
engine mechanism (batching, paging, prefix caching, preemption) runs at a real cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from engine.model.config import ModelConfig
from engine.model.errors import ModelLoadError
from engine.model.llama import LlamaForCausalLM, build_model
from engine.model.tokenizer import ByteTokenizer

INIT_STD = 0.02


@dataclass(frozen=True)
class Preset:
    name: str
    description: str
    config: ModelConfig
    seed: int = 0


def _byte_level_config(**shape: int | float | bool) -> ModelConfig:
    tokenizer = ByteTokenizer()
    return ModelConfig(
        vocab_size=tokenizer.vocab_size,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_ids=tokenizer.eos_token_ids,
        rms_norm_eps=1e-5,
        **shape,
    )


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="tiny",
            description="~3M params; CPU tests and demos",
            config=_byte_level_config(
                hidden_size=256,
                intermediate_size=768,
                num_hidden_layers=4,
                num_attention_heads=8,
                num_key_value_heads=2,
                head_dim=32,
                rope_theta=10000.0,
                max_position_embeddings=4096,
                tie_word_embeddings=False,
            ),
        ),
        Preset(
            name="small",
            description="~100M params; a GPU (or a patient CPU)",
            config=_byte_level_config(
                hidden_size=768,
                intermediate_size=3072,
                num_hidden_layers=12,
                num_attention_heads=12,
                num_key_value_heads=4,
                head_dim=64,
                rope_theta=10000.0,
                max_position_embeddings=8192,
                tie_word_embeddings=False,
            ),
        ),
        Preset(
            name="llama-1b",
            description="Llama 3.2 1B shape (~1B params, byte vocabulary); GPUs",
            config=_byte_level_config(
                hidden_size=2048,
                intermediate_size=8192,
                num_hidden_layers=16,
                num_attention_heads=32,
                num_key_value_heads=8,
                head_dim=64,
                rope_theta=500000.0,
                max_position_embeddings=8192,
                tie_word_embeddings=True,
            ),
        ),
    )
}


def get_preset(name: str) -> Preset:
    """The preset called ``name``; ``ModelLoadError`` listing the choices otherwise."""
    preset = PRESETS.get(name)
    if preset is None:
        raise ModelLoadError(
            f"unknown model preset {name!r}; available presets: {', '.join(PRESETS)} "
            "(or pass a local Hugging Face checkpoint directory)"
        )
    return preset


def build_preset_model(
    name: str, device: torch.device, dtype: torch.dtype
) -> tuple[LlamaForCausalLM, ModelConfig, ByteTokenizer]:
    """(model, config, tokenizer) for a preset, with its seeded random weights."""
    preset = get_preset(name)
    model = build_model(preset.config, device, dtype)
    init_random_weights(model, seed=preset.seed)
    return model, preset.config, ByteTokenizer()


@torch.no_grad()
def init_random_weights(model: LlamaForCausalLM, seed: int, std: float = INIT_STD) -> None:
    """Norm gains = 1; every other weight ~ N(0, std), drawn in parameter order."""
    generator = torch.Generator(device="cpu").manual_seed(seed)
    for name, parameter in model.named_parameters():
        if name.endswith("norm.weight"):
            parameter.fill_(1.0)
            continue
        values = torch.empty(parameter.shape, dtype=torch.float32)
        values.normal_(mean=0.0, std=std, generator=generator)
        parameter.copy_(values)
