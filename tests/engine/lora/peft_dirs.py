"""Writing PEFT LoRA adapter directories for the tests: ``adapter_config.json`` and
``adapter_model.safetensors`` with PEFT's saved key names, for the tiny preset's shapes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file

from engine.lora.shapes import MODULE_PARENT, projection_shapes
from engine.model.presets import get_preset

TINY = get_preset("tiny").config


def peft_key(layer: int, module: str, which: str) -> str:
    parent = MODULE_PARENT[module]
    return f"base_model.model.model.layers.{layer}.{parent}.{module}.lora_{which}.weight"


def lora_tensors(
    rank: int, targets: tuple[str, ...], seed: int = 0, zero_b: bool = False, std: float = 0.05
) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    shapes = projection_shapes(TINY)
    tensors = {}
    for layer in range(TINY.num_hidden_layers):
        for module in targets:
            fan_in, fan_out = shapes[module]
            a = torch.empty(rank, fan_in).normal_(0, std, generator=generator)
            b = torch.empty(fan_out, rank).normal_(0, std, generator=generator)
            tensors[peft_key(layer, module, "A")] = a
            tensors[peft_key(layer, module, "B")] = torch.zeros_like(b) if zero_b else b
    return tensors


def write_peft_dir(
    directory: Path,
    *,
    rank: int = 8,
    targets: tuple[str, ...] = ("q_proj", "v_proj"),
    seed: int = 0,
    zero_b: bool = False,
    config: dict[str, Any] | None = None,
    tensors: dict[str, torch.Tensor] | None = None,
) -> Path:
    """A PEFT adapter directory for the tiny preset (``config`` overrides JSON fields)."""
    directory.mkdir(parents=True, exist_ok=True)
    adapter_config = {
        "peft_type": "LORA",
        "r": rank,
        "lora_alpha": 2 * rank,
        "target_modules": list(targets),
        "bias": "none",
        "base_model_name_or_path": "tiny",
        **(config or {}),
    }
    (directory / "adapter_config.json").write_text(json.dumps(adapter_config))
    if tensors is None:
        tensors = lora_tensors(rank, targets, seed, zero_b)
    save_file(
        {k: v.contiguous() for k, v in tensors.items()}, directory / "adapter_model.safetensors"
    )
    return directory
