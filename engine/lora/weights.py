"""An adapter's weights on the model's device, packed for the bundled Llama's fused
projections; read from a PEFT directory or drawn from a seed.

PEFT stores per module ``lora_A`` [rank, in] and ``lora_B`` [out, rank] under keys like
``base_model.model.model.layers.3.self_attn.q_proj.lora_A.weight``. The delta a module adds
is ``x @ A^T @ B^T * scaling``. Here the modules of one fused projection (q, k, v of
``qkv_proj``) are packed into one pair per layer: their A's stacked ([sum of ranks, in]) and
their B's, scaled, placed block-diagonally at their columns ([fused out, sum of ranks]), so
a fused projection's delta is two matmuls whatever the adapter targets in it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from engine.errors import ConfigError
from engine.lora.shapes import (
    ADAPTER_WEIGHTS,
    FUSED_GROUPS,
    MODULE_PARENT,
    AdapterShape,
    adapter_shape,
    projection_shapes,
)
from engine.lora.source import LoRASource, PeftDirectory
from engine.model.config import ModelConfig

#: PEFT's saved key of one LoRA matrix (the adapter name is stripped when PEFT saves).
PEFT_KEY = re.compile(
    r"base_model\.model\.model\.layers\.(\d+)\.(self_attn|mlp)\.(\w+)\.lora_(A|B)\.weight"
)
#: Random adapters' entries are N(0, std): large enough that a rank-8 delta changes what the
#: tiny preset generates (its weights are N(0, 0.02)), small enough to stay a perturbation.
RANDOM_STD = 0.05
_MAX_NAMES = 6

ModulePair = tuple[torch.Tensor, torch.Tensor]  # (A [rank, in], B [out, rank])


@dataclass(frozen=True)
class PackedDelta:
    """One fused projection's delta in one layer: ``(x @ a.T) @ b.T`` (scaling in ``b``)."""

    a: torch.Tensor  # [sum of ranks, in]
    b: torch.Tensor  # [fused out, sum of ranks]


@dataclass(frozen=True)
class LoRAWeights:
    """A loaded adapter: its shape and, per layer, the packed delta of each fused projection
    it adapts (a projection it does not adapt is absent)."""

    shape: AdapterShape
    layers: tuple[dict[str, PackedDelta], ...]

    @property
    def num_bytes(self) -> int:
        return sum(
            d.a.numel() * d.a.element_size() + d.b.numel() * d.b.element_size()
            for layer in self.layers
            for d in layer.values()
        )


def load_lora_weights(
    source: LoRASource,
    config: ModelConfig,
    max_lora_rank: int,
    device: torch.device,
    dtype: torch.dtype,
) -> LoRAWeights:
    """The adapter of ``source`` for a model of ``config``; ``ConfigError`` naming the file,
    the tensor and what is wrong (rank, targets, shapes, missing or unexpected tensors)."""
    shape = adapter_shape(source, max_lora_rank)
    if isinstance(source, PeftDirectory):
        modules = _read_peft_tensors(Path(source.path).expanduser(), shape, config)
    else:
        modules = _random_modules(shape, config, source.seed)
    return _pack(shape, modules, config, device, dtype)


def _random_modules(
    shape: AdapterShape, config: ModelConfig, seed: int
) -> list[dict[str, ModulePair]]:
    generator = torch.Generator(device="cpu").manual_seed(seed)
    shapes = projection_shapes(config)
    layers = []
    for _ in range(config.num_hidden_layers):
        layer = {}
        for module in shape.target_modules:
            fan_in, fan_out = shapes[module]
            a = torch.empty(shape.rank, fan_in).normal_(0.0, RANDOM_STD, generator=generator)
            b = torch.empty(fan_out, shape.rank).normal_(0.0, RANDOM_STD, generator=generator)
            layer[module] = (a, b)
        layers.append(layer)
    return layers


def _read_peft_tensors(
    directory: Path, shape: AdapterShape, config: ModelConfig
) -> list[dict[str, ModulePair]]:
    path = directory / ADAPTER_WEIGHTS
    if not path.is_file():
        raise ConfigError(
            f"{path} not found: a PEFT adapter directory needs its weights as safetensors "
            "(adapter_model.bin is not read: it can run code)"
        )
    expected = projection_shapes(config)
    found: dict[tuple[int, str], dict[str, torch.Tensor]] = {}
    unexpected: list[str] = []
    try:
        with safe_open(str(path), framework="pt", device="cpu") as tensors:
            for key in tensors.keys():  # noqa: SIM118 (safe_open is not a dict)
                match = PEFT_KEY.fullmatch(key)
                if match is None:
                    unexpected.append(key)
                    continue
                layer, parent, module, which = int(match[1]), match[2], match[3], match[4]
                if (
                    module not in shape.target_modules
                    or MODULE_PARENT.get(module) != parent
                    or layer >= config.num_hidden_layers
                ):
                    unexpected.append(key)
                    continue
                tensor = tensors.get_tensor(key).float()
                fan_in, fan_out = expected[module]
                want = (shape.rank, fan_in) if which == "A" else (fan_out, shape.rank)
                if tuple(tensor.shape) != want:
                    raise ConfigError(
                        f"{path}: {key} has shape {tuple(tensor.shape)}, expected {want} "
                        f"(rank {shape.rank} from adapter_config.json on this model); the "
                        "adapter was trained for another model or its config is wrong"
                    )
                if not torch.isfinite(tensor).all():
                    raise ConfigError(f"{path}: {key} holds NaN or infinite values")
                found.setdefault((layer, module), {})[which] = tensor
    except (OSError, SafetensorError) as error:
        raise ConfigError(f"{path} could not be read: {error}") from None
    if unexpected:
        raise ConfigError(
            f"{path} has tensors this engine cannot apply: {_names(unexpected)}; only LoRA "
            f"A/B matrices of {', '.join(shape.target_modules)} (adapter_config.json's "
            f"target_modules) in layers 0-{config.num_hidden_layers - 1} are served"
        )
    half = sorted(f"layer {i} {m}" for (i, m), pair in found.items() if len(pair) != 2)
    if half:
        raise ConfigError(f"{path}: lora_A or lora_B is missing for {_names(half)}")
    if not found:
        raise ConfigError(f"{path} holds no LoRA tensors")
    layers: list[dict[str, ModulePair]] = [{} for _ in range(config.num_hidden_layers)]
    for (layer, module), pair in found.items():
        layers[layer][module] = (pair["A"], pair["B"])
    return layers


def _pack(
    shape: AdapterShape,
    modules: list[dict[str, ModulePair]],
    config: ModelConfig,
    device: torch.device,
    dtype: torch.dtype,
) -> LoRAWeights:
    shapes = projection_shapes(config)
    packed_layers = []
    for layer in modules:
        packed: dict[str, PackedDelta] = {}
        for group, members in FUSED_GROUPS.items():
            present = [m for m in members if m in layer]
            if not present:
                continue
            fan_in = shapes[members[0]][0]
            width = sum(shapes[m][1] for m in members)
            a = torch.cat([layer[m][0] for m in present], dim=0)
            b = torch.zeros(width, a.shape[0])
            column = row = 0
            for m in members:
                out = shapes[m][1]
                if m in layer:
                    b[column : column + out, row : row + shape.rank] = layer[m][1] * shape.scaling
                    row += shape.rank
                column += out
            assert a.shape[1] == fan_in
            packed[group] = PackedDelta(a.to(device, dtype), b.to(device, dtype))
        packed_layers.append(packed)
    return LoRAWeights(shape, tuple(packed_layers))


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES])
    return f"{shown} (and {len(names) - _MAX_NAMES} more)" if len(names) > _MAX_NAMES else shown
