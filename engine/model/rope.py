"""Rotary position embeddings, in Hugging Face's ``rotate_half`` convention.

HF Llama checkpoints store q/k projection rows so that the two rotated halves of a head
are its first and second half (not interleaved pairs); using the same convention here
lets their weights load unchanged. Frequencies and cos/sin are computed in float32, as
transformers does, and only then cast to the activation dtype.
"""

from __future__ import annotations

import math

import torch

from engine.model.config import ModelConfig, RopeScaling


def rope_inverse_frequencies(config: ModelConfig) -> torch.Tensor:
    """[head_dim // 2] float32 inverse frequencies (radians per position), on CPU."""
    # NOTE: explicit device so this stays real when the model is built under a meta
    # device context (see build_model); int64 arange then float matches transformers.
    exponents = torch.arange(0, config.head_dim, 2, dtype=torch.int64, device="cpu").float()
    inv_freq = 1.0 / (config.rope_theta ** (exponents / config.head_dim))
    if config.rope_scaling is not None:
        inv_freq = _scale(inv_freq, config.rope_scaling)
    return inv_freq


def _scale(inv_freq: torch.Tensor, scaling: RopeScaling) -> torch.Tensor:
    if scaling.rope_type == "linear":
        return inv_freq / scaling.factor
    # llama3: long wavelengths are slowed by `factor`, short ones kept, and the band in
    # between interpolated smoothly (transformers' _compute_llama3_parameters).
    old_context_len = scaling.original_max_position_embeddings
    low_freq_wavelen = old_context_len / scaling.low_freq_factor
    high_freq_wavelen = old_context_len / scaling.high_freq_factor
    wavelen = 2 * math.pi / inv_freq
    scaled = torch.where(wavelen > low_freq_wavelen, inv_freq / scaling.factor, inv_freq)
    smooth = (old_context_len / wavelen - scaling.low_freq_factor) / (
        scaling.high_freq_factor - scaling.low_freq_factor
    )
    smoothed = (1 - smooth) * scaled / scaling.factor + smooth * scaled
    is_medium = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
    return torch.where(is_medium, smoothed, scaled)


class RotaryEmbedding:
    """Computes cos/sin for a batch of positions once per forward, shared by all layers.

    Not an ``nn.Module`` on purpose: the inverse frequencies must stay float32 even when
    the model is cast to bf16/fp16, and ``Module.to(dtype)`` would cast a buffer.
    """

    def __init__(self, config: ModelConfig) -> None:
        self._inv_freq_cpu = rope_inverse_frequencies(config)
        self._inv_freq_by_device: dict[torch.device, torch.Tensor] = {}

    def cos_sin(
        self, positions: torch.Tensor, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """positions [T] int -> (cos, signed_sin), each [T, 1, head_dim] in ``dtype``.

        ``signed_sin`` is sin with its first half negated, which folds rotate_half's
        negation into the table (see ``apply_rotary``).
        """
        inv_freq = self._inv_freq_by_device.get(positions.device)
        if inv_freq is None:
            inv_freq = self._inv_freq_cpu.to(positions.device)
            self._inv_freq_by_device[positions.device] = inv_freq
        angles = positions.float()[:, None] * inv_freq[None, :]
        cos, sin = angles.cos(), angles.sin()
        cos = torch.cat((cos, cos), dim=-1)[:, None, :]
        signed_sin = torch.cat((-sin, sin), dim=-1)[:, None, :]
        return cos.to(dtype), signed_sin.to(dtype)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotate x [T, num_heads, head_dim] by the tables [T, 1, head_dim] of ``cos_sin``.

    Equals HF's ``x * cos + rotate_half(x) * sin``: rolling by half a head swaps the
    halves, and signed_sin supplies rotate_half's minus sign (exactly: negation is exact).
    """
    return x * cos + torch.roll(x, shifts=x.shape[-1] // 2, dims=-1) * signed_sin
