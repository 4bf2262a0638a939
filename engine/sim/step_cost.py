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

Tensor parallelism (``tensor_parallel_size`` = tp, ``engine.sim.parallel``): FLOPs and bytes
are one GPU's (heads, KV heads, MLP and vocabulary sharded tp ways), and each layer adds two
ring all-reduces of ``T * hidden`` activations over the GPU's link. An MoE shape
(``engine.sim.experts``): FLOPs count the router and ``k`` of ``E`` experts per token; bytes
read the non-expert weights plus the ``E * (1 - (1 - k/E)^T)`` experts a layer's T tokens
are expected to touch.

Step seconds = max(FLOPs / (peak * compute_efficiency), bytes / (bandwidth *
bandwidth_efficiency)) + all-reduce seconds + overhead. NOTE: the all-reduces are added,
not overlapped with compute, as in a decode step whose layers wait on them. Activations are not counted in bytes (they stay in
cache at these sizes) and no kernel launch granularity is modelled: that is what the
efficiency factors and the overhead stand for until calibration fits them.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from engine.errors import ConfigError
from engine.model.config import ModelConfig
from engine.quantization import check_quantization
from engine.sim.experts import Experts
from engine.sim.parallel import ring_all_reduce_seconds, shard
from engine.sim.specs import SIM_DTYPES, GpuSpec

INT8_BYTES = 1

DEFAULT_COMPUTE_EFFICIENCY = 0.6
DEFAULT_BANDWIDTH_EFFICIENCY = 0.8
# NOTE: scheduling, input preparation, sampling and launch gaps of a CUDA-graph engine:
# about a millisecond a step at small batch (vLLM v1 on H100); calibration refits it.
DEFAULT_STEP_OVERHEAD_SECONDS = 0.001


class BatchItem(NamedTuple):
    """One scheduled request: tokens computed this step, and its context after them."""

    num_new_tokens: int
    num_context_tokens: int


class BatchTotals(NamedTuple):
    """What ``StepCostModel`` reads of a batch: its sums (see the module docstring)."""

    num_items: int
    num_tokens: int  # T = sum q_i
    attention_positions: int  # sum_i(q_i * c_i - q_i * (q_i - 1) / 2)
    num_context_tokens: int  # sum c_i

    @classmethod
    def of(cls, batch: Iterable[BatchItem]) -> BatchTotals:
        num_tokens = attention_positions = num_context_tokens = num_items = 0
        for q, c in batch:
            num_items += 1
            num_tokens += q
            attention_positions += q * c - q * (q - 1) // 2
            num_context_tokens += c
        return cls(num_items, num_tokens, attention_positions, num_context_tokens)


class ExtraWork(NamedTuple):
    """Work a step does beside the base model's, on one GPU: FLOPs and bytes that join the
    roofline, and fixed seconds (kernel launches) added to it."""

    flops: float = 0.0
    bytes: float = 0.0
    seconds: float = 0.0


class StepCost(NamedTuple):
    """One step on one GPU of the group (all of them do the same work)."""

    flops: float
    bytes: float
    compute_seconds: float
    memory_seconds: float
    step_seconds: float
    communication_seconds: float = 0.0  # the step's all-reduces (0 at tensor_parallel_size 1)

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
    """The roofline of one model shape on one GPU in one dtype (see the module docstring),
    sharded over ``tensor_parallel_size`` GPUs, with ``experts`` for an MoE shape."""

    def __init__(
        self,
        shape: ModelConfig,
        gpu: GpuSpec,
        dtype: str = "bfloat16",
        efficiency: Efficiency | None = None,
        *,
        experts: Experts | None = None,
        tensor_parallel_size: int = 1,
        quantization: str | None = None,
    ) -> None:
        if dtype not in SIM_DTYPES or dtype not in gpu.peak_flops_per_second:
            raise ConfigError(
                f"dtype={dtype!r}: the simulator models "
                f"{', '.join(d for d in SIM_DTYPES if d in gpu.peak_flops_per_second)} on {gpu.name}"
            )
        part = shard(shape, tensor_parallel_size)
        if part.tensor_parallel_size > 1 and gpu.interconnect is None:
            raise ConfigError(
                f"tensor_parallel_size={tensor_parallel_size}: {gpu.name} has no GPU-to-GPU "
                "link in its spec; use 1"
            )
        self.shape, self.gpu, self.dtype, self.experts = shape, gpu, dtype, experts
        self.tensor_parallel_size = part.tensor_parallel_size
        self.efficiency = efficiency or Efficiency()
        self.dtype_bytes = SIM_DTYPES[dtype]
        h, layers = shape.hidden_size, shape.num_hidden_layers
        # Per GPU: the vocabulary-sharded tables, and each layer's sharded attention and
        # (every expert's) MLP; norms and the router are replicated.
        embedding = part.vocab_size * h
        lm_head = 0 if shape.tie_word_embeddings else embedding
        attention = h * shape.head_dim * 2 * (part.num_attention_heads + part.num_key_value_heads)
        mlp = 3 * h * part.intermediate_size  # one expert's, or the dense MLP
        num_experts = num_active = 1
        router = 0
        if experts is not None:
            num_experts, num_active = experts.num_local_experts, experts.num_experts_per_tok
            router = h * num_experts
        dense_layer = attention + router + 2 * h  # read whole every step
        num_parameters = embedding + lm_head + layers * (dense_layer + num_experts * mlp) + h
        # NOTE: quantized, the layers' projections (attention, router, experts) are int8,
        # one byte each; norms and the embedding tables keep the dtype (engine.quantization)
        self.quantization = check_quantization(quantization)
        self._matmul_speed = 1.0
        weight_byte = self.dtype_bytes
        if self.quantization is not None:
            self._matmul_speed = gpu.quantization_speed.get(self.quantization, 1.0)
            weight_byte = INT8_BYTES
        dense_bytes = (num_parameters - layers * (attention + router + num_experts * mlp)) * (
            self.dtype_bytes
        ) + layers * (attention + router) * weight_byte
        self.weight_bytes = dense_bytes + layers * num_experts * mlp * weight_byte  # per GPU
        # NOTE: the input table is only looked up (T rows a step); tied, it is the lm_head
        # too and so read whole.
        input_table = embedding if lm_head else 0
        streamed_bytes = self.weight_bytes - input_table * self.dtype_bytes
        self._expert_bytes = 0
        if experts is not None:
            # NOTE: an MoE step reads only the experts its tokens touch (see ``cost``).
            self._expert_bytes = layers * mlp * weight_byte
            streamed_bytes -= layers * num_experts * mlp * weight_byte
        self._streamed_weight_bytes = streamed_bytes
        # matmul parameters one token passes through: the router and k experts a layer
        self._matmul_params = layers * (dense_layer + num_active * mlp) + h
        self._lm_head_flops = 2 * part.vocab_size * h
        self._attention_flops = 4 * layers * part.num_attention_heads * shape.head_dim
        # NOTE: the KV sizing is the engine's own, for the KV heads one GPU holds.
        kv_shape = dataclasses.replace(
            shape,
            num_attention_heads=part.num_key_value_heads,
            num_key_value_heads=part.num_key_value_heads,
        )
        self.kv_bytes_per_token = kv_shape.kv_bytes_per_token(self.dtype_bytes)
        self._row_bytes = h * self.dtype_bytes
        self._flops_per_second = gpu.peak_flops_per_second[dtype] * self.efficiency.compute
        self._bytes_per_second = gpu.memory_bandwidth_bytes_per_second * self.efficiency.bandwidth
        self._num_all_reduces = 2 * layers if part.tensor_parallel_size > 1 else 0

    def all_reduce_seconds(self, num_tokens: int) -> float:
        """The step's all-reduces: two a layer of ``T x hidden`` activations each."""
        if not self._num_all_reduces or not num_tokens:
            return 0.0
        link = self.gpu.interconnect
        assert link is not None  # NOTE: checked at construction for tp > 1
        one = ring_all_reduce_seconds(
            num_tokens * self._row_bytes,
            self.tensor_parallel_size,
            link.bytes_per_second,
            link.all_reduce_latency_seconds,
        )
        return self._num_all_reduces * one

    def cost(
        self, batch: Iterable[BatchItem], num_sampled: int, extra: ExtraWork | None = None
    ) -> StepCost:
        """The cost of one step; an empty batch costs only the overhead."""
        return self.cost_of_totals(BatchTotals.of(batch), num_sampled, extra)

    def cost_of_totals(
        self, totals: BatchTotals, num_sampled: int, extra: ExtraWork | None = None
    ) -> StepCost:
        """``cost`` from the batch's sums alone (integers, so a caller that keeps them as
        running totals gets exactly the floats ``cost`` gives for the whole batch).
        ``extra`` is work beside the base model's (a step's LoRA matmuls), on one GPU."""
        num_items, num_tokens, attention_positions, num_context_tokens = totals
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
        if extra is not None:
            flops += extra.flops
            num_bytes += extra.bytes
            overhead += extra.seconds
        if self.experts is not None:
            num_bytes += self._expert_bytes * self.experts.expected_distinct_experts(num_tokens)
        if self._matmul_speed == 1.0:
            compute = flops / self._flops_per_second
        else:  # NOTE: the layers' matmuls at the quantized kernel's rate, the rest at peak
            matmul = 2.0 * self._matmul_params * num_tokens
            compute = (matmul / self._matmul_speed + (flops - matmul)) / self._flops_per_second
        memory = num_bytes / self._bytes_per_second
        communication = self.all_reduce_seconds(num_tokens)
        overhead += self.efficiency.request_overhead_seconds * num_items
        step = max(compute, memory) + communication + overhead
        return StepCost(flops, float(num_bytes), compute, memory, step, communication)
