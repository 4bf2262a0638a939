"""int8 weight-only quantization (``int8_per_channel_weight_only``) of the bundled Llama.

Each decoder projection's weight W [out, in] is stored as int8 ``q`` with one scale per
output channel, ``s = max|W[row]| / 127``, ``q = round(W / s)`` (symmetric, so no zero
point); the forward computes ``(x @ q^T) * s`` in the activations' dtype, which is
``x @ (q * s)^T`` exactly, with the int8 weight converted inside the matmul's input and
never kept in the model's dtype. The embeddings and the LM head stay in the model's dtype,
as vLLM leaves them.

NOTE: ``torch._weight_int8pack_mm`` (the int8 weight-only kernel torch ships) exists on
this CPU build but was measured slower than converting and multiplying, for every batch
but a single row: torch 2.13 CPU, one thread, [m x 256] @ [256 x 768]: fp32 0.019 ms, this
0.039 ms, the pack kernel 0.131 ms at m=1 and 1.50 ms at m=8 (it grows linearly with m);
[16 x 4096] @ [4096 x 4096]: fp32 9.2 ms, this 40 ms, the pack kernel 320 ms. Serving
batches many rows a step, so the forward converts and multiplies.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.llama import Linear, LlamaForCausalLM

INT8_MAX = 127


class Int8Linear(nn.Module):
    """A bias-free linear layer over an int8 weight and per-output-channel scales."""

    def __init__(self, weight: torch.Tensor, scales: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("weight_int8", weight)
        self.register_buffer("scales", scales)

    @classmethod
    @torch.no_grad()
    def quantize(cls, weight: torch.Tensor) -> Int8Linear:
        """The int8 form of ``weight`` [out, in]; scales in ``weight``'s dtype."""
        absmax = weight.float().abs().amax(dim=1)
        scales = torch.where(absmax > 0, absmax / INT8_MAX, torch.ones_like(absmax))
        quantized = (weight.float() / scales[:, None]).round().clamp(-INT8_MAX, INT8_MAX)
        return cls(quantized.to(torch.int8), scales.to(weight.dtype))

    def dequantized(self) -> torch.Tensor:
        """The weight the int8 form stands for, in the scales' dtype (for checks)."""
        return self.weight_int8.to(self.scales.dtype) * self.scales[:, None]

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.weight_int8.to(hidden.dtype)) * self.scales


#: The fused projections of a decoder layer that are quantized (attribute paths).
QUANTIZED_PROJECTIONS = (
    ("self_attn", "qkv_proj"),
    ("self_attn", "o_proj"),
    ("mlp", "gate_up_proj"),
    ("mlp", "down_proj"),
)


@torch.no_grad()
def quantize_int8_weight_only(model: LlamaForCausalLM) -> LlamaForCausalLM:
    """Replace every decoder projection of ``model`` by its ``Int8Linear`` form, in place
    (the float weights are freed); returns ``model``."""
    for layer in model.model.layers:
        for parent_name, name in QUANTIZED_PROJECTIONS:
            parent = getattr(layer, parent_name)
            linear = getattr(parent, name)
            if isinstance(linear, Linear):
                setattr(parent, name, Int8Linear.quantize(linear.weight.data))
    return model
