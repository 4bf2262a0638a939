"""Capacity planning: KV-cache bytes per token, what fits in GPU memory, Little's law demand,
and replicas from a measured concurrency ceiling."""

from __future__ import annotations

import math
from dataclasses import dataclass

from slo.errors import SLOError

GIB = 1024**3
# NOTE: demand / ceiling computed in floats (3 * 12 / 24) can land a hair above an integer;
# a relative slack this small keeps ceil() from adding a phantom replica.
_CEIL_RELATIVE_SLACK = 1e-9


def kv_cache_bytes_per_token(
    num_layers: int, num_kv_heads: int, head_dim: int, bytes_per_value: float
) -> float:
    """``2 * layers * kv_heads * head_dim * bytes_per_value``: one key and one value vector
    per layer and KV head (2 bytes for fp16/bf16, 1 for fp8)."""
    for name, value in (
        ("num_layers", num_layers),
        ("num_kv_heads", num_kv_heads),
        ("head_dim", head_dim),
    ):
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise SLOError(f"{name} must be a positive integer, got {value!r}")
    _require_positive(bytes_per_value=bytes_per_value)
    return 2 * num_layers * num_kv_heads * head_dim * bytes_per_value


def kv_cache_budget_bytes(
    gpu_memory_bytes: float,
    gpu_memory_utilization: float,
    weights_bytes: float,
    activation_bytes: float,
) -> float:
    """Memory left for the KV cache: ``memory * utilization - weights - activations``
    (vLLM's ``gpu_memory_utilization`` reserves the rest). Errors when nothing is left."""
    _require_positive(gpu_memory_bytes=gpu_memory_bytes)
    if not 0 < gpu_memory_utilization <= 1:
        raise SLOError(f"gpu_memory_utilization must be in (0, 1], got {gpu_memory_utilization}")
    usable = gpu_memory_bytes * gpu_memory_utilization
    left = usable - weights_bytes - activation_bytes
    if left <= 0:
        raise SLOError(
            f"weights ({weights_bytes / GIB:.2f} GiB) and activations "
            f"({activation_bytes / GIB:.2f} GiB) use all {usable / GIB:.2f} GiB the utilization "
            "allows; raise gpu_memory_utilization, quantize the weights or shard the model"
        )
    return left


def tokens_that_fit(budget_bytes: float, bytes_per_token: float, block_size: int = 1) -> int:
    """KV-cache tokens that fit, in whole blocks of ``block_size`` tokens (vLLM pages the
    cache in blocks, 16 tokens by default)."""
    _require_positive(bytes_per_token=bytes_per_token)
    if block_size < 1:
        raise SLOError(f"block_size must be >= 1, got {block_size}")
    num_blocks = math.floor(budget_bytes / (bytes_per_token * block_size))
    return max(0, num_blocks) * block_size


def sequences_that_fit(num_tokens: int, tokens_per_sequence: int, block_size: int = 1) -> int:
    """Sequences of ``tokens_per_sequence`` (prompt + output) that fit in ``num_tokens`` of KV
    cache, each rounded up to whole blocks."""
    if tokens_per_sequence < 1:
        raise SLOError(f"tokens_per_sequence must be >= 1, got {tokens_per_sequence}")
    blocks_per_sequence = math.ceil(tokens_per_sequence / block_size)
    return num_tokens // (blocks_per_sequence * block_size)


def littles_law_concurrency(arrival_rate_per_second: float, mean_latency_seconds: float) -> float:
    """Requests in flight on average, ``L = arrival rate * time in system``."""
    _require_non_negative(
        arrival_rate_per_second=arrival_rate_per_second, mean_latency_seconds=mean_latency_seconds
    )
    return arrival_rate_per_second * mean_latency_seconds


def replicas_needed(
    demand_concurrency: float, measured_ceiling_concurrency: float, num_spares: int = 1
) -> int:
    """``ceil(demand / ceiling) + spares``; the ceiling is the concurrency one replica holds
    while meeting its SLO (the knee of a load sweep), not its hard limit."""
    _require_non_negative(demand_concurrency=demand_concurrency)
    _require_positive(measured_ceiling_concurrency=measured_ceiling_concurrency)
    if num_spares < 0:
        raise SLOError(f"num_spares must be >= 0, got {num_spares}")
    needed = demand_concurrency / measured_ceiling_concurrency
    return math.ceil(needed * (1 - _CEIL_RELATIVE_SLACK)) + num_spares


@dataclass(frozen=True)
class CapacityPlan:
    """Every intermediate figure of :func:`plan_capacity`, for display."""

    kv_bytes_per_token: float
    kv_budget_bytes: float
    kv_tokens: int
    sequences_at_length: int
    demand_concurrency: float
    num_replicas: int


def plan_capacity(
    *,
    num_layers: int,
    num_kv_heads: int,
    head_dim: int,
    bytes_per_value: float,
    gpu_memory_bytes: float,
    gpu_memory_utilization: float,
    weights_bytes: float,
    activation_bytes: float,
    tokens_per_sequence: int,
    arrival_rate_per_second: float,
    mean_latency_seconds: float,
    measured_ceiling_concurrency: float,
    num_spares: int = 1,
    block_size: int = 1,
) -> CapacityPlan:
    """The whole chain, from model shape and memory to a replica count."""
    per_token = kv_cache_bytes_per_token(num_layers, num_kv_heads, head_dim, bytes_per_value)
    budget = kv_cache_budget_bytes(
        gpu_memory_bytes, gpu_memory_utilization, weights_bytes, activation_bytes
    )
    tokens = tokens_that_fit(budget, per_token, block_size)
    demand = littles_law_concurrency(arrival_rate_per_second, mean_latency_seconds)
    return CapacityPlan(
        kv_bytes_per_token=per_token,
        kv_budget_bytes=budget,
        kv_tokens=tokens,
        sequences_at_length=sequences_that_fit(tokens, tokens_per_sequence, block_size),
        demand_concurrency=demand,
        num_replicas=replicas_needed(demand, measured_ceiling_concurrency, num_spares),
    )


def _require_positive(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value > 0):
            raise SLOError(f"{name} must be a positive number, got {value}")


def _require_non_negative(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value >= 0):
            raise SLOError(f"{name} must be a finite number >= 0, got {value}")
