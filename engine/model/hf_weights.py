"""Map Hugging Face Llama checkpoint tensor names onto our (fused) parameters.

A checkpoint stores ``q_proj``/``k_proj``/``v_proj`` and ``gate_proj``/``up_proj``
separately; our model keeps them as row blocks of ``qkv_proj`` and ``gate_up_proj``.
``hf_weight_targets`` returns, for every checkpoint name, the view of our parameter that
tensor must be copied into, so loading is a shape check and a ``copy_`` per tensor.
"""

from __future__ import annotations

import torch

from engine.model.llama import LlamaForCausalLM

# Tensors some checkpoints carry that are derived, not learned; safe to skip.
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def hf_weight_targets(model: LlamaForCausalLM) -> dict[str, torch.Tensor]:
    """HF tensor name -> writable view of the parameter rows it fills."""
    config = model.config
    query_width = config.num_attention_heads * config.head_dim
    kv_width = config.num_key_value_heads * config.head_dim
    targets: dict[str, torch.Tensor] = {
        "model.embed_tokens.weight": model.model.embed_tokens.weight.data,
        "model.norm.weight": model.model.norm.weight.data,
    }
    if not config.tie_word_embeddings:
        targets["lm_head.weight"] = model.lm_head.weight.data
    for index, layer in enumerate(model.model.layers):
        prefix = f"model.layers.{index}."
        qkv = layer.self_attn.qkv_proj.weight.data
        gate_up = layer.mlp.gate_up_proj.weight.data
        targets.update(
            {
                prefix + "self_attn.q_proj.weight": qkv[:query_width],
                prefix + "self_attn.k_proj.weight": qkv[query_width : query_width + kv_width],
                prefix + "self_attn.v_proj.weight": qkv[query_width + kv_width :],
                prefix + "self_attn.o_proj.weight": layer.self_attn.o_proj.weight.data,
                prefix + "mlp.gate_proj.weight": gate_up[: config.intermediate_size],
                prefix + "mlp.up_proj.weight": gate_up[config.intermediate_size :],
                prefix + "mlp.down_proj.weight": layer.mlp.down_proj.weight.data,
                prefix + "input_layernorm.weight": layer.input_layernorm.weight.data,
                prefix
                + "post_attention_layernorm.weight": layer.post_attention_layernorm.weight.data,
            }
        )
    return targets


def is_ignorable(name: str, model: LlamaForCausalLM) -> bool:
    """True for checkpoint tensors we deliberately do not load."""
    # NOTE: with tied embeddings the LM head *is* the embedding matrix; a checkpoint
    # that also saved lm_head.weight holds a copy of it.
    if name == "lm_head.weight" and model.config.tie_word_embeddings:
        return True
    return name.endswith(IGNORED_SUFFIXES)
