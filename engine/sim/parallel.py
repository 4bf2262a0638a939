"""Tensor parallelism in the simulator: what one GPU of a ``tp`` group holds, and the
all-reduces that join the group each layer.

Megatron-style sharding, as vLLM does it: query heads, KV heads, the MLP's (and every
expert's) intermediate dimension and the vocabulary (input table and lm_head) are split
``tp`` ways; norms and an MoE router are replicated. When ``tp`` exceeds the KV heads
vLLM replicates each KV head ``tp / KV`` times, so a GPU holds one KV head (and the
group's KV cache is ``tp / KV`` times the model's). Two all-reduces a layer (after the
attention output projection and after the MLP) carry ``T x hidden`` activations.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.errors import ConfigError
from engine.model.config import ModelConfig

# NOTE: one HGX board's NVLink domain (and the largest PCIe box the L40S ships in) holds 8
# GPUs; a larger group would all-reduce over the network, which is not modelled.
MAX_TENSOR_PARALLEL_SIZE = 8


class Shard(NamedTuple):
    """One GPU's share of a model sharded ``tensor_parallel_size`` ways."""

    tensor_parallel_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def shard(shape: ModelConfig, tensor_parallel_size: int, model: str = "the model") -> Shard:
    """The per-GPU shard, or one ``ConfigError`` naming the knob: ``tp`` must divide the
    attention heads, and divide the KV heads or be a multiple of them (vLLM's rule)."""
    tp = tensor_parallel_size
    if isinstance(tp, bool) or not isinstance(tp, int) or tp < 1:
        raise ConfigError(f"tensor_parallel_size={tp!r}: must be a positive integer")
    heads, kv_heads = shape.num_attention_heads, shape.num_key_value_heads
    if tp > MAX_TENSOR_PARALLEL_SIZE:
        raise ConfigError(
            f"tensor_parallel_size={tp}: at most {MAX_TENSOR_PARALLEL_SIZE} (one NVLink "
            "domain); tensor parallelism across nodes is not simulated"
        )
    if heads % tp or (kv_heads % tp and tp % kv_heads):
        raise ConfigError(
            f"tensor_parallel_size={tp}: must divide {model}'s {heads} attention heads, and "
            f"divide its {kv_heads} KV heads or be a multiple of them"
        )
    return Shard(
        tensor_parallel_size=tp,
        num_attention_heads=heads // tp,
        num_key_value_heads=max(1, kv_heads // tp),
        # NOTE: vLLM pads the vocabulary to a multiple of the group; the intermediate
        # sizes shipped here divide by every allowed tp.
        intermediate_size=_ceil_div(shape.intermediate_size, tp),
        vocab_size=_ceil_div(shape.vocab_size, tp),
    )


def ring_all_reduce_seconds(
    num_bytes: float,
    tensor_parallel_size: int,
    link_bytes_per_second: float,
    latency_seconds: float,
) -> float:
    """One ring all-reduce of ``num_bytes`` over ``tensor_parallel_size`` GPUs: each GPU
    sends (and at once receives) ``2 (tp - 1) / tp`` of the buffer, so the time is that
    over the link's one-direction bandwidth, plus a fixed latency. Zero for one GPU."""
    tp = tensor_parallel_size
    if tp == 1:
        return 0.0
    return latency_seconds + 2 * (tp - 1) / tp * num_bytes / link_bytes_per_second
