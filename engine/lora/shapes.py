"""What an adapter is, without its weights: rank, scaling, targets; read from PEFT's JSON.

No torch. The simulator prices an adapter from this alone, and the torch loader checks the
tensors it reads against it. The bundled Llama fuses q/k/v into ``qkv_proj`` and gate/up
into ``gate_up_proj`` (``engine/model/llama.py``), so each PEFT module maps onto a column
range of one fused projection: ``FUSED_GROUPS``.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.lora.source import (
    TARGET_MODULES,
    LoRANotFoundError,
    LoRASource,
    PeftDirectory,
    RandomAdapter,
)
from engine.model.config import ModelConfig

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
#: Fused projection of the bundled Llama → the PEFT modules it holds, in column order.
FUSED_GROUPS: dict[str, tuple[str, ...]] = {
    "qkv_proj": ("q_proj", "k_proj", "v_proj"),
    "o_proj": ("o_proj",),
    "gate_up_proj": ("gate_proj", "up_proj"),
    "down_proj": ("down_proj",),
}
#: Where each module sits in a decoder layer (PEFT's key path).
MODULE_PARENT: dict[str, str] = {
    **{m: "self_attn" for m in ("q_proj", "k_proj", "v_proj", "o_proj")},
    **{m: "mlp" for m in ("gate_proj", "up_proj", "down_proj")},
}


@dataclass(frozen=True)
class AdapterShape:
    """An adapter's rank, the scaling its delta is multiplied by, and the modules it adapts."""

    rank: int
    scaling: float
    target_modules: tuple[str, ...]


def projection_shapes(config: ModelConfig) -> dict[str, tuple[int, int]]:
    """PEFT module → (in_features, out_features) on a model of ``config``."""
    h, d = config.hidden_size, config.head_dim
    q, kv, i = (
        config.num_attention_heads * d,
        config.num_key_value_heads * d,
        config.intermediate_size,
    )
    return {
        "q_proj": (h, q),
        "k_proj": (h, kv),
        "v_proj": (h, kv),
        "o_proj": (q, h),
        "gate_proj": (h, i),
        "up_proj": (h, i),
        "down_proj": (i, h),
    }


def adapter_shape(source: LoRASource, max_lora_rank: int) -> AdapterShape:
    """The shape of ``source`` (a PEFT directory's ``adapter_config.json`` is read, its
    weights are not); ``ConfigError`` naming the file and the field for what cannot be
    served, a rank above ``max_lora_rank`` included."""
    if isinstance(source, RandomAdapter):
        shape = AdapterShape(source.rank, source.scaling, source.target_modules)
        where = str(source)
    else:
        shape = read_peft_config(source)
        where = str(Path(source.path) / ADAPTER_CONFIG)
    if shape.rank > max_lora_rank:
        raise ConfigError(
            f"{where}: rank {shape.rank} is above max_lora_rank={max_lora_rank}; start the "
            "engine with a larger --max-lora-rank"
        )
    return shape


def read_peft_config(source: PeftDirectory) -> AdapterShape:
    """``adapter_config.json`` of a PEFT LoRA directory, checked for what this engine can
    serve: plain LoRA (no DoRA, no bias, no saved embeddings or head, one rank and alpha
    for every module) on the Llama projections."""
    directory = Path(source.path).expanduser()
    try:
        exists, is_dir = directory.exists(), directory.is_dir()
    except OSError as error:  # a name too long for the file system, a permission
        raise ConfigError(
            f"lora_path={source.path[:200]!r}: cannot be read: {error.strerror}"
        ) from None
    if not exists:
        raise LoRANotFoundError(
            f"lora_path={source.path!r}: no such directory; give a local PEFT adapter "
            f"directory ({ADAPTER_CONFIG} and {ADAPTER_WEIGHTS}) or random:rank=R"
        )
    if not is_dir:
        raise ConfigError(
            f"lora_path={source.path!r}: not a directory; give a local PEFT adapter directory "
            f"({ADAPTER_CONFIG} and {ADAPTER_WEIGHTS}) or random:rank=R"
        )
    path = directory / ADAPTER_CONFIG
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path} not found: a PEFT adapter directory needs it") from None
    except (OSError, ValueError) as error:
        raise ConfigError(f"{path} is not readable JSON: {error}") from None
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: must hold a JSON object")
    peft_type = raw.get("peft_type", "LORA")
    if peft_type != "LORA":
        raise ConfigError(f"{path}: peft_type={peft_type!r}; only LORA adapters are served")
    rank = raw.get("r")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise ConfigError(f"{path}: r={rank!r} must be a positive integer")
    alpha = raw.get("lora_alpha", rank)
    if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not math.isfinite(alpha):
        raise ConfigError(f"{path}: lora_alpha={alpha!r} must be a number")
    for key, unsupported in (("use_dora", True), ("fan_in_fan_out", True)):
        if raw.get(key) is unsupported:
            raise ConfigError(f"{path}: {key}=true is not supported; serve a plain LoRA adapter")
    if raw.get("bias", "none") != "none":
        raise ConfigError(f"{path}: bias={raw.get('bias')!r}; only bias='none' is supported")
    for key in ("modules_to_save", "rank_pattern", "alpha_pattern"):
        if raw.get(key):
            raise ConfigError(
                f"{path}: {key}={raw[key]!r} is not supported (one rank and alpha for the "
                "decoder projections only)"
            )
    scaling = alpha / math.sqrt(rank) if raw.get("use_rslora") else alpha / rank
    return AdapterShape(rank, float(scaling), _targets(raw.get("target_modules"), path))


def _targets(value: Any, path: Path) -> tuple[str, ...]:
    if value == "all-linear":
        return TARGET_MODULES
    names = [value] if isinstance(value, str) else value
    if (
        not isinstance(names, list)
        or not names
        or not all(isinstance(n, str) for n in names)
        or any(n not in TARGET_MODULES for n in names)
    ):
        raise ConfigError(
            f"{path}: target_modules={value!r}; give a list of {', '.join(TARGET_MODULES)} "
            "or 'all-linear' (regular expressions are not supported)"
        )
    return tuple(m for m in TARGET_MODULES if m in names)


def lora_flops_and_bytes(
    config: ModelConfig, shape: AdapterShape, num_tokens: int, dtype_bytes: int
) -> tuple[float, float]:
    """One adapter's extra work in a step of ``num_tokens`` of its tokens: FLOPs of the
    shrink (x @ A^T) and expand (@ B^T) matmuls in every layer, and the bytes of its
    weights read once (the simulator's LoRA cost)."""
    shapes = projection_shapes(config)
    per_token = sum(shapes[m][0] + shapes[m][1] for m in shape.target_modules) * shape.rank
    layers = config.num_hidden_layers
    return 2.0 * per_token * num_tokens * layers, float(per_token * layers * dtype_bytes)
