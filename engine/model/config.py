"""The shape of a Llama-architecture decoder, validated once at the edge.

``ModelConfig`` is what the model, the KV cache allocator and capacity planning read.
``from_hf_config`` accepts the ``config.json`` a transformers ``LlamaConfig`` writes,
in both the transformers 4 layout (``rope_theta`` and ``rope_scaling`` at top level) and
the transformers 5 layout (both nested in ``rope_parameters``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

# RoPE variants whose inverse frequencies we compute exactly as transformers does.
# "default" has no scaling; the others rescale the frequencies (see rope.py).
SUPPORTED_ROPE_TYPES = ("default", "linear", "llama3")


class ModelConfigError(ValueError):
    """A model configuration value is missing, invalid or unsupported."""


@dataclass(frozen=True)
class RopeScaling:
    """RoPE frequency scaling. ``rope_type`` is ``"linear"`` or ``"llama3"``.

    ``low_freq_factor``, ``high_freq_factor`` and ``original_max_position_embeddings``
    are used by ``"llama3"`` only (Llama 3.1/3.2 checkpoints).
    """

    rope_type: str
    factor: float
    low_freq_factor: float = 1.0
    high_freq_factor: float = 4.0
    original_max_position_embeddings: int = 8192

    def __post_init__(self) -> None:
        if self.rope_type not in ("linear", "llama3"):
            raise ModelConfigError(
                f"rope scaling type {self.rope_type!r} is not supported; "
                f"supported: {', '.join(SUPPORTED_ROPE_TYPES)}"
            )
        if not self.factor > 0:
            raise ModelConfigError(f"rope scaling factor must be > 0, got {self.factor}")
        if self.rope_type == "llama3" and not self.high_freq_factor > self.low_freq_factor:
            raise ModelConfigError(
                "llama3 rope scaling needs high_freq_factor > low_freq_factor, got "
                f"{self.high_freq_factor} and {self.low_freq_factor}"
            )


@dataclass(frozen=True)
class ModelConfig:
    """Architecture of a Llama-style decoder. Sizes are element counts, not bytes."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int
    tie_word_embeddings: bool
    bos_token_id: int | None
    eos_token_ids: tuple[int, ...]
    # NOTE: not in the original field list: real Llama 3.x checkpoints need it.
    rope_scaling: RopeScaling | None = None

    def __post_init__(self) -> None:
        for name in (
            "vocab_size",
            "hidden_size",
            "intermediate_size",
            "num_hidden_layers",
            "num_attention_heads",
            "num_key_value_heads",
            "head_dim",
            "max_position_embeddings",
        ):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ModelConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.num_attention_heads % self.num_key_value_heads != 0:
            raise ModelConfigError(
                f"num_attention_heads ({self.num_attention_heads}) must be a multiple of "
                f"num_key_value_heads ({self.num_key_value_heads}) for grouped-query attention"
            )
        if self.head_dim % 2 != 0:
            raise ModelConfigError(f"head_dim must be even for RoPE, got {self.head_dim}")
        if not (math.isfinite(self.rms_norm_eps) and self.rms_norm_eps > 0):
            raise ModelConfigError(f"rms_norm_eps must be > 0, got {self.rms_norm_eps}")
        if not (math.isfinite(self.rope_theta) and self.rope_theta > 0):
            raise ModelConfigError(f"rope_theta must be > 0, got {self.rope_theta}")
        if not isinstance(self.eos_token_ids, tuple):
            raise ModelConfigError(
                f"eos_token_ids must be a tuple of ints, got {self.eos_token_ids!r}"
            )
        special_ids = ((self.bos_token_id,) if self.bos_token_id is not None else ()) + (
            self.eos_token_ids
        )
        for token_id in special_ids:
            if not isinstance(token_id, int) or not 0 <= token_id < self.vocab_size:
                raise ModelConfigError(
                    f"special token id {token_id!r} is outside the vocabulary "
                    f"[0, {self.vocab_size})"
                )

    @property
    def num_queries_per_kv(self) -> int:
        """Query heads that share one KV head (1 = multi-head, >1 = grouped-query)."""
        return self.num_attention_heads // self.num_key_value_heads

    def kv_bytes_per_token(self, dtype_bytes: int) -> int:
        """Bytes of K and V one token occupies across all layers at ``dtype_bytes`` each."""
        return 2 * self.num_hidden_layers * self.num_key_value_heads * self.head_dim * dtype_bytes

    def num_parameters(self) -> int:
        """Parameter count (embeddings counted once when tied)."""
        attention = (
            self.hidden_size
            * self.head_dim
            * (2 * self.num_attention_heads + 2 * self.num_key_value_heads)
        )
        mlp = 3 * self.hidden_size * self.intermediate_size
        per_layer = attention + mlp + 2 * self.hidden_size
        embeddings = self.vocab_size * self.hidden_size
        lm_head = 0 if self.tie_word_embeddings else embeddings
        return embeddings + lm_head + self.num_hidden_layers * per_layer + self.hidden_size

    @classmethod
    def from_hf_config(cls, hf_config: dict[str, Any]) -> ModelConfig:
        """Build from a Hugging Face Llama ``config.json`` dict.

        Raises ``ModelConfigError`` for non-Llama architectures, features this decoder
        does not implement (biases, activations other than SiLU, partial rotary, RoPE
        types other than default/linear/llama3) and missing required sizes.
        """
        model_type = hf_config.get("model_type")
        architectures = hf_config.get("architectures") or []
        if model_type != "llama" or (architectures and "LlamaForCausalLM" not in architectures):
            raise ModelConfigError(
                f"model_type {model_type!r} (architectures {architectures}) is not a Llama "
                "architecture; only model_type 'llama' / LlamaForCausalLM is supported"
            )
        if hf_config.get("hidden_act", "silu") != "silu":
            raise ModelConfigError(
                f"hidden_act {hf_config['hidden_act']!r} is not supported; only 'silu'"
            )
        for bias_key in ("attention_bias", "mlp_bias"):
            if hf_config.get(bias_key):
                raise ModelConfigError(f"{bias_key}=true is not supported (no bias terms)")
        missing = [
            key
            for key in (
                "vocab_size",
                "hidden_size",
                "intermediate_size",
                "num_hidden_layers",
                "num_attention_heads",
            )
            if hf_config.get(key) is None
        ]
        if missing:
            raise ModelConfigError(f"config is missing required keys: {', '.join(missing)}")

        num_attention_heads = hf_config["num_attention_heads"]
        rope_theta, rope_scaling = _parse_rope(hf_config)
        return cls(
            vocab_size=hf_config["vocab_size"],
            hidden_size=hf_config["hidden_size"],
            intermediate_size=hf_config["intermediate_size"],
            num_hidden_layers=hf_config["num_hidden_layers"],
            num_attention_heads=num_attention_heads,
            num_key_value_heads=hf_config.get("num_key_value_heads") or num_attention_heads,
            head_dim=hf_config.get("head_dim") or hf_config["hidden_size"] // num_attention_heads,
            rms_norm_eps=float(hf_config.get("rms_norm_eps", 1e-6)),
            rope_theta=rope_theta,
            max_position_embeddings=hf_config.get("max_position_embeddings", 2048),
            tie_word_embeddings=bool(hf_config.get("tie_word_embeddings", False)),
            bos_token_id=hf_config.get("bos_token_id"),
            eos_token_ids=token_ids_tuple(hf_config.get("eos_token_id")),
            rope_scaling=rope_scaling,
        )


def token_ids_tuple(value: int | list[int] | None) -> tuple[int, ...]:
    """Normalise an HF ``eos_token_id`` (int, list of ints or null) to a tuple."""
    if value is None:
        return ()
    if isinstance(value, int):
        return (value,)
    return tuple(value)


def _parse_rope(hf_config: dict[str, Any]) -> tuple[float, RopeScaling | None]:
    # transformers 5 nests theta and scaling in rope_parameters; 4.x keeps rope_theta at
    # top level and the scaling dict (keyed "type" or "rope_type") in rope_scaling.
    params = dict(hf_config.get("rope_parameters") or hf_config.get("rope_scaling") or {})
    rope_theta = float(params.get("rope_theta", hf_config.get("rope_theta", 10000.0)))
    rope_type = params.get("rope_type", params.get("type", "default"))
    partial = params.get("partial_rotary_factor", hf_config.get("partial_rotary_factor", 1.0))
    if partial != 1.0:
        raise ModelConfigError(f"partial_rotary_factor {partial} is not supported; only 1.0")
    if rope_type == "default":
        return rope_theta, None
    if rope_type not in SUPPORTED_ROPE_TYPES:
        raise ModelConfigError(
            f"rope scaling type {rope_type!r} is not supported; supported: "
            f"{', '.join(SUPPORTED_ROPE_TYPES)}. Use a checkpoint without it, or convert it."
        )
    if "factor" not in params:
        raise ModelConfigError(f"rope scaling type {rope_type!r} needs a 'factor'")
    scaling = RopeScaling(rope_type=rope_type, factor=float(params["factor"]))
    if rope_type == "llama3":
        scaling = RopeScaling(
            rope_type="llama3",
            factor=float(params["factor"]),
            low_freq_factor=float(params.get("low_freq_factor", 1.0)),
            high_freq_factor=float(params.get("high_freq_factor", 4.0)),
            original_max_position_embeddings=int(
                params.get(
                    "original_max_position_embeddings",
                    hf_config.get("max_position_embeddings", 8192),
                )
            ),
        )
    return rope_theta, scaling
