"""Roofline time of one engine step: max(compute, memory) at derated peaks, plus overhead.

For a batch whose item ``i`` computes ``q_i`` new tokens ending at context length ``c_i``
(so ``T = sum q_i`` tokens in the step, ``S`` of them sampled):

- FLOPs: ``2 * P_matmul * T`` for the layer matmuls (``P_matmul``: parameters less both
  embedding tables), ``2 * vocab * hidden * S`` for the lm_head (logits only for sampled
  rows, as the runner computes them), and attention ``4 * L * H * d * sum_i(q_i * c_i -
  q_i * (q_i - 1) / 2)``: QK^T and AV over each new token's causal context;
- bytes: every weight read once per step (the input embedding only for the T rows it
  looks up), each item's whole context of K/V read once per layer, and the T new tokens'
  K/V written.

Step seconds = max(FLOPs / (peak * compute_efficiency), bytes / (bandwidth *
bandwidth_efficiency)) + overhead. Activations are not counted in bytes (they stay in
cache at these sizes) and no kernel launch granularity is modelled: that is what the
efficiency factors and the overhead stand for until calibration fits them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from engine.errors import ConfigError
from engine.model.config import ModelConfig
from engine.sim.specs import SIM_DTYPES, GpuSpec

DEFAULT_COMPUTE_EFFICIENCY = 0.6
DEFAULT_BANDWIDTH_EFFICIENCY = 0.8
# NOTE: scheduling, input preparation, sampling and launch gaps of a CUDA-graph engine:
# about a millisecond a step at small batch (vLLM v1 on H100); calibration refits it.
DEFAULT_STEP_OVERHEAD_SECONDS = 0.001


class BatchItem(NamedTuple):
    """One scheduled request: tokens computed this step, and its context after them."""

    num_new_tokens: int
    num_context_tokens: int


class StepCost(NamedTuple):
    flops: float
    bytes: float
    compute_seconds: float
    memory_seconds: float
    step_seconds: float

    @property
    def is_compute_bound(self) -> bool:
        return self.compute_seconds >= self.memory_seconds


@dataclass(frozen=True)
class Efficiency:
    """Shares of the datasheet peaks a real step reaches, and the fixed per-step cost."""

    compute: float = DEFAULT_COMPUTE_EFFICIENCY
    bandwidth: float = DEFAULT_BANDWIDTH_EFFICIENCY
    step_overhead_seconds: float = DEFAULT_STEP_OVERHEAD_SECONDS
    # NOTE: host time per scheduled request per step (its bookkeeping, its own attention
    # call): 0 by default; calibration fits it, as a CPU engine pays it visibly.
    request_overhead_seconds: float = 0.0

    def __post_init__(self) -> None:
        for knob in ("compute", "bandwidth"):
            value = getattr(self, knob)
            if not (isinstance(value, int | float) and 0 < value <= 1):
                raise ConfigError(f"{knob}_efficiency={value!r}: must be in (0, 1]")
        for knob in ("step_overhead_seconds", "request_overhead_seconds"):
            value = getattr(self, knob)
            if not (isinstance(value, int | float) and math.isfinite(value) and value >= 0):
                raise ConfigError(f"{knob}={value!r}: must be >= 0 seconds")


class StepCostModel:
    """The roofline of one model shape on one GPU in one dtype (see the module docstring)."""

    def __init__(
        self,
        shape: ModelConfig,
        gpu: GpuSpec,
        dtype: str = "bfloat16",
        efficiency: Efficiency | None = None,
    ) -> None:
        if dtype not in SIM_DTYPES or dtype not in gpu.peak_flops_per_second:
            raise ConfigError(
                f"dtype={dtype!r}: the simulator models "
                f"{', '.join(d for d in SIM_DTYPES if d in gpu.peak_flops_per_second)} on {gpu.name}"
            )
        self.shape, self.gpu, self.dtype = shape, gpu, dtype
        self.efficiency = efficiency or Efficiency()
        self.dtype_bytes = SIM_DTYPES[dtype]
        embedding = shape.vocab_size * shape.hidden_size
        lm_head = 0 if shape.tie_word_embeddings else embedding
        self.weight_bytes = shape.num_parameters() * self.dtype_bytes
        # NOTE: the input table is only looked up (T rows a step); tied, it is the lm_head
        # too and so read whole.
        input_table = embedding if lm_head else 0
        self._streamed_weight_bytes = (shape.num_parameters() - input_table) * self.dtype_bytes
        self._matmul_params = shape.num_parameters() - embedding - lm_head
        self._lm_head_flops = 2 * shape.vocab_size * shape.hidden_size
        self._attention_flops = (
            4 * shape.num_hidden_layers * shape.num_attention_heads * shape.head_dim
        )
        self.kv_bytes_per_token = shape.kv_bytes_per_token(self.dtype_bytes)
        self._row_bytes = shape.hidden_size * self.dtype_bytes
        self._flops_per_second = gpu.peak_flops_per_second[dtype] * self.efficiency.compute
        self._bytes_per_second = gpu.memory_bandwidth_bytes_per_second * self.efficiency.bandwidth

    def cost(self, batch: Iterable[BatchItem], num_sampled: int) -> StepCost:
        """The cost of one step; an empty batch costs only the overhead."""
        num_tokens = 0
        attention_positions = 0
        num_context_tokens = 0
        num_items = 0
        for q, c in batch:
            num_items += 1
            num_tokens += q
            attention_positions += q * c - q * (q - 1) // 2
            num_context_tokens += c
        overhead = self.efficiency.step_overhead_seconds
        if not num_tokens:
            return StepCost(0.0, 0.0, 0.0, 0.0, overhead)
        flops = (
            2.0 * self._matmul_params * num_tokens
            + self._lm_head_flops * num_sampled
            + self._attention_flops * attention_positions
        )
        num_bytes = (
            self._streamed_weight_bytes
            + self._row_bytes * num_tokens
            + self.kv_bytes_per_token * (num_context_tokens + num_tokens)
        )
        compute = flops / self._flops_per_second
        memory = num_bytes / self._bytes_per_second
        overhead += self.efficiency.request_overhead_seconds * num_items
        return StepCost(flops, float(num_bytes), compute, memory, max(compute, memory) + overhead)
