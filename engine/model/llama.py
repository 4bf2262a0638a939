"""A Llama-architecture decoder (RMSNorm, RoPE, grouped-query attention, SwiGLU).

Module and parameter names follow transformers' ``LlamaForCausalLM`` except that q/k/v
and gate/up are fused into ``qkv_proj`` and ``gate_up_proj`` (one matmul instead of
three or two: on CPU at small sizes the per-op overhead dominates). ``hf_weights.py``
maps checkpoint tensors onto the fused rows.

The model is stateless between calls: all per-request state lives in the paged KV cache
the caller passes in, described by ``AttentionMetadata``; a step's LoRA adapters come in
the same way, as a ``LoRABatch`` (``engine/lora/batch.py``) whose deltas each fused
projection adds to its output.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.model.attention_metadata import AttentionMetadata
from engine.model.config import ModelConfig
from engine.model.paged_attention import AttentionPlan, KVCache, paged_attention
from engine.model.rope import RotaryEmbedding, apply_rotary

if TYPE_CHECKING:
    from engine.lora.batch import LoRABatch

# NOTE: parameters are created with torch.empty and no init: a preset or checkpoint
# overwrites them anyway, and nn.Linear's kaiming init (or building on the meta device,
# which imports torch's decompositions) costs seconds at model load for nothing.
Factory = dict[str, Any]  # {"device": ..., "dtype": ...} for tensor factories


def _empty_parameter(*shape: int, factory: Factory) -> nn.Parameter:
    return nn.Parameter(torch.empty(*shape, **factory), requires_grad=False)


class Linear(nn.Module):
    """Bias-free linear layer: weight [out_features, in_features], like nn.Linear's."""

    def __init__(self, in_features: int, out_features: int, factory: Factory) -> None:
        super().__init__()
        self.weight = _empty_parameter(out_features, in_features, factory=factory)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return F.linear(hidden, self.weight)


class Embedding(nn.Module):
    def __init__(self, vocab_size: int, hidden_size: int, factory: Factory) -> None:
        super().__init__()
        self.weight = _empty_parameter(vocab_size, hidden_size, factory=factory)

    def forward(self, token_ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(token_ids, self.weight)


class RMSNorm(nn.Module):
    """Root-mean-square norm, computed in float32 like transformers' LlamaRMSNorm."""

    def __init__(self, hidden_size: int, eps: float, factory: Factory) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size, **factory), requires_grad=False)
        self.eps = eps

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        if hidden.dtype == torch.float32:
            # One fused op; same math as the general path when nothing is cast.
            return F.rms_norm(hidden, (hidden.shape[-1],), self.weight, self.eps)
        # Half precision: normalise in float32, round, then scale (transformers' order).
        normed = F.rms_norm(hidden.float(), (hidden.shape[-1],), eps=self.eps)
        return self.weight * normed.to(hidden.dtype)


class LlamaAttention(nn.Module):
    def __init__(self, config: ModelConfig, factory: Factory) -> None:
        super().__init__()
        self.num_heads = config.num_attention_heads
        self.num_kv_heads = config.num_key_value_heads
        self.head_dim = config.head_dim
        self.query_width = self.num_heads * self.head_dim
        self.kv_width = self.num_kv_heads * self.head_dim
        self.scale = self.head_dim**-0.5
        self.qkv_proj = Linear(config.hidden_size, self.query_width + 2 * self.kv_width, factory)
        self.o_proj = Linear(self.query_width, config.hidden_size, factory)

    def forward(
        self,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        signed_sin: torch.Tensor,
        kv_cache: KVCache,
        plan: AttentionPlan,
        lora: LoRABatch | None = None,
        layer: int = 0,
    ) -> torch.Tensor:
        """hidden [T, hidden_size] -> [T, hidden_size]; writes this layer's K/V."""
        num_tokens = hidden.shape[0]
        qkv = self.qkv_proj(hidden)
        if lora is not None:
            qkv = lora.add_delta(layer, "qkv_proj", hidden, qkv)
        # q and k heads are adjacent columns: rotate them in one go, then split.
        query_key = qkv[:, : self.query_width + self.kv_width].view(
            num_tokens, self.num_heads + self.num_kv_heads, self.head_dim
        )
        query, key = apply_rotary(query_key, cos, signed_sin).split(
            [self.num_heads, self.num_kv_heads], dim=1
        )
        value = qkv[:, self.query_width + self.kv_width :].view(
            num_tokens, self.num_kv_heads, self.head_dim
        )
        attended = paged_attention(query, key, value, kv_cache, plan, self.scale)
        out = self.o_proj(attended)
        if lora is not None:
            out = lora.add_delta(layer, "o_proj", attended, out)
        return out


class LlamaMLP(nn.Module):
    """SwiGLU: down(silu(gate(x)) * up(x))."""

    def __init__(self, config: ModelConfig, factory: Factory) -> None:
        super().__init__()
        self.intermediate_size = config.intermediate_size
        self.gate_up_proj = Linear(config.hidden_size, 2 * config.intermediate_size, factory)
        self.down_proj = Linear(config.intermediate_size, config.hidden_size, factory)

    def forward(
        self, hidden: torch.Tensor, lora: LoRABatch | None = None, layer: int = 0
    ) -> torch.Tensor:
        gate_up = self.gate_up_proj(hidden)
        if lora is None:
            gate, up = gate_up.split(self.intermediate_size, dim=-1)
            return self.down_proj(F.silu(gate) * up)
        gate, up = lora.add_delta(layer, "gate_up_proj", hidden, gate_up).split(
            self.intermediate_size, dim=-1
        )
        activated = F.silu(gate) * up
        return lora.add_delta(layer, "down_proj", activated, self.down_proj(activated))


class LlamaDecoderLayer(nn.Module):
    def __init__(self, config: ModelConfig, factory: Factory, index: int = 0) -> None:
        super().__init__()
        self.index = index  # which layer's LoRA deltas apply here
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, factory)
        self.self_attn = LlamaAttention(config, factory)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps, factory)
        self.mlp = LlamaMLP(config, factory)

    def forward(
        self,
        hidden: torch.Tensor,
        cos: torch.Tensor,
        signed_sin: torch.Tensor,
        kv_cache: KVCache,
        plan: AttentionPlan,
        lora: LoRABatch | None = None,
    ) -> torch.Tensor:
        hidden = hidden + self.self_attn(
            self.input_layernorm(hidden), cos, signed_sin, kv_cache, plan, lora, self.index
        )
        return hidden + self.mlp(self.post_attention_layernorm(hidden), lora, self.index)


class LlamaModel(nn.Module):
    def __init__(self, config: ModelConfig, factory: Factory) -> None:
        super().__init__()
        self.embed_tokens = Embedding(config.vocab_size, config.hidden_size, factory)
        self.layers = nn.ModuleList(
            LlamaDecoderLayer(config, factory, index) for index in range(config.num_hidden_layers)
        )
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps, factory)


class LlamaForCausalLM(nn.Module):
    """Decoder plus LM head, with UNINITIALISED weights (see ``build_model``)."""

    def __init__(
        self,
        config: ModelConfig,
        device: torch.device | str | None = None,
        dtype: torch.dtype | None = None,
    ) -> None:
        super().__init__()
        factory: Factory = {"device": device, "dtype": dtype}
        self.config = config
        self.model = LlamaModel(config, factory)
        self.lm_head = Linear(config.hidden_size, config.vocab_size, factory)
        if config.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.rotary = RotaryEmbedding(config)

    def forward(
        self,
        input_ids: torch.Tensor,
        positions: torch.Tensor,
        kv_caches: Sequence[KVCache],
        attn_metadata: AttentionMetadata,
        lora: LoRABatch | None = None,
    ) -> torch.Tensor:
        """Run all scheduled tokens through the decoder.

        input_ids [T] and positions [T] (int64, on the model's device) are the new tokens
        of all requests back to back, as ``attn_metadata`` describes; ``kv_caches`` has
        one (K, V) pair per layer from ``allocate_kv_caches``, written in place.
        ``lora`` (None: the base model for every token) adds each token's adapter delta.
        Returns the final-norm hidden states [T, hidden_size] in the model dtype.
        """
        if len(kv_caches) != len(self.model.layers):
            raise ValueError(f"got {len(kv_caches)} KV caches for {len(self.model.layers)} layers")
        if input_ids.shape != positions.shape or input_ids.dim() != 1:
            raise ValueError(
                f"input_ids {tuple(input_ids.shape)} and positions {tuple(positions.shape)} "
                "must both be 1-D [num_tokens]"
            )
        plan = AttentionPlan.build(attn_metadata, num_tokens=input_ids.shape[0])
        hidden = self.model.embed_tokens(input_ids)
        cos, signed_sin = self.rotary.cos_sin(positions, hidden.dtype)
        for layer, kv_cache in zip(self.model.layers, kv_caches, strict=True):
            hidden = layer(hidden, cos, signed_sin, kv_cache, plan, lora)
        return self.model.norm(hidden)

    def compute_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [N, hidden_size] (e.g. each request's last token) -> float32 [N, vocab]."""
        return self.lm_head(hidden).float()


def build_model(config: ModelConfig, device: torch.device, dtype: torch.dtype) -> LlamaForCausalLM:
    """An inference-mode model on ``device`` in ``dtype`` with UNINITIALISED weights.

    Fill it with ``presets.init_random_weights`` or the loader's checkpoint tensors.
    """
    return LlamaForCausalLM(config, device=device, dtype=dtype).eval()
