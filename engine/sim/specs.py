"""GPU and model specs of the simulator, each figure with its source.

GPU figures are the vendor datasheet's dense tensor-core peaks (the "with sparsity"
figures are twice these and are not used) and HBM/GDDR bandwidth; memory is the
datasheet's capacity in decimal gigabytes as sold. Model shapes are the published
``config.json`` of each checkpoint family (parameters counted by
``ModelConfig.num_parameters``, so they are the engine's own count, not a marketing figure).
GPU-to-GPU links (for tensor parallelism) are the datasheets' per-GPU interconnect figures.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.model.config import ModelConfig
from engine.model.tokenizer import ByteTokenizer
from engine.quantization import INT8_WEIGHT_ONLY
from engine.sim.experts import Experts

GB = 10**9
TERA = 10**12


@dataclass(frozen=True)
class Interconnect:
    """The GPU-to-GPU link a tensor-parallel group all-reduces over."""

    name: str
    # NOTE: the datasheets quote the per-GPU total of both directions (NVLink 4: 18 links
    # x 25 GB/s each way = 900 GB/s). A ring all-reduce sends and receives at once, each
    # at one direction's rate, so the cost model uses half of it (``bytes_per_second``).
    bidirectional_bytes_per_second: float
    all_reduce_latency_seconds: float
    source: str

    @property
    def bytes_per_second(self) -> float:
        """One direction's bandwidth per GPU: the rate a ring all-reduce's sends run at."""
        return self.bidirectional_bytes_per_second / 2


# NOTE: the per-all-reduce latency is no datasheet figure. A decode step's all-reduces are
# tens of KB, where fixed cost dominates: on H100 NVLink vLLM's custom all-reduce takes
# 8.5-11.8 us and SGLang's 3.7-7.8 us from 512 B to 32 KB at TP 2-8 (measured outside CUDA
# graphs, sgl-project/sglang#2904); NCCL over a PCIe switch in a CUDA graph takes 19-24 us
# for 4-32 KB (haohervchb/sglang-V100#2). Calibration on a multi-GPU host should refit both.
NVLINK_ALL_REDUCE_LATENCY_SECONDS = 8e-6
PCIE_ALL_REDUCE_LATENCY_SECONDS = 20e-6


# NOTE: no datasheet gives it: int8 weight-only kernels (vLLM's Marlin/Machete family)
# convert the weights to 16 bits in registers before the tensor-core matmul, so a
# compute-bound step runs somewhat below the 16-bit peak while a memory-bound one reads half
# the weight bytes. 0.85 of the 16-bit matmul rate is an estimate until a calibration on
# the device measures it.
DEFAULT_QUANTIZED_MATMUL_SPEED = 0.85


def _quantized_speeds() -> dict[str, float]:
    return {INT8_WEIGHT_ONLY: DEFAULT_QUANTIZED_MATMUL_SPEED}


@dataclass(frozen=True)
class GpuSpec:
    """One accelerator: dense peak FLOP/s per dtype, memory bandwidth and capacity, the
    link to its peers (``None``: no tensor parallelism on it), and per quantization method
    the share of the 16-bit matmul rate its kernels reach (``quantization_speed``)."""

    name: str
    description: str
    peak_flops_per_second: dict[str, float]  # dtype name -> dense FLOP/s
    memory_bandwidth_bytes_per_second: float
    memory_bytes: int
    source: str
    interconnect: Interconnect | None = None
    quantization_speed: dict[str, float] = field(default_factory=_quantized_speeds)


# NOTE: only 16-bit dtypes are simulated: weights, activations and the KV cache share one
# dtype (as in the torch engine); int8 weights are priced by ``quantization`` on top of it
# (``StepCostModel``), other formats are not modelled.
# float32 is for calibrated CPU specs (engine.sim.calibration_file) only: no GPU here
# lists a float32 peak, so the step model refuses it on them.
SIM_DTYPES: dict[str, int] = {"bfloat16": 2, "float16": 2, "float32": 4}  # name -> bytes

GPUS: dict[str, GpuSpec] = {
    gpu.name: gpu
    for gpu in (
        GpuSpec(
            name="a100",
            description="NVIDIA A100 80GB SXM",
            # A100 datasheet: BF16/FP16 tensor 312 TFLOPS (624 with sparsity); HBM2e
            # 2,039 GB/s; 80 GB.
            peak_flops_per_second={"bfloat16": 312 * TERA, "float16": 312 * TERA},
            memory_bandwidth_bytes_per_second=2039 * GB,
            memory_bytes=80 * GB,
            source="NVIDIA A100 Tensor Core GPU datasheet (80GB SXM column)",
            interconnect=Interconnect(
                "NVLink 3",
                600 * GB,
                NVLINK_ALL_REDUCE_LATENCY_SECONDS,
                "A100 datasheet: NVLink 600 GB/s",
            ),
        ),
        GpuSpec(
            name="h100",
            description="NVIDIA H100 SXM 80GB",
            # H100 datasheet: BF16/FP16 tensor 1,979 TFLOPS "with sparsity" -> 989 dense;
            # HBM3 3.35 TB/s; 80 GB.
            peak_flops_per_second={"bfloat16": 989 * TERA, "float16": 989 * TERA},
            memory_bandwidth_bytes_per_second=3350 * GB,
            memory_bytes=80 * GB,
            source="NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column)",
            interconnect=Interconnect(
                "NVLink 4",
                900 * GB,
                NVLINK_ALL_REDUCE_LATENCY_SECONDS,
                "H100 datasheet: NVLink 900 GB/s",
            ),
        ),
        GpuSpec(
            name="h200",
            description="NVIDIA H200 SXM 141GB",
            # H200 datasheet: BF16/FP16 tensor 1,979 TFLOPS with sparsity -> 989 dense;
            # HBM3e 4.8 TB/s; 141 GB.
            peak_flops_per_second={"bfloat16": 989 * TERA, "float16": 989 * TERA},
            memory_bandwidth_bytes_per_second=4800 * GB,
            memory_bytes=141 * GB,
            source="NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column)",
            interconnect=Interconnect(
                "NVLink 4",
                900 * GB,
                NVLINK_ALL_REDUCE_LATENCY_SECONDS,
                "H200 datasheet: NVLink 900 GB/s",
            ),
        ),
        GpuSpec(
            name="l40s",
            description="NVIDIA L40S 48GB",
            # L40S datasheet: BF16/FP16 tensor 733 TFLOPS with sparsity -> 362.05 dense;
            # GDDR6 864 GB/s; 48 GB.
            peak_flops_per_second={"bfloat16": 362.05 * TERA, "float16": 362.05 * TERA},
            memory_bandwidth_bytes_per_second=864 * GB,
            memory_bytes=48 * GB,
            source="NVIDIA L40S GPU datasheet",
            # NOTE: the L40S has no NVLink; peers talk over PCIe Gen4 x16 (64 GB/s both ways).
            interconnect=Interconnect(
                "PCIe Gen4 x16",
                64 * GB,
                PCIE_ALL_REDUCE_LATENCY_SECONDS,
                "L40S datasheet: PCIe Gen4 x16 64 GB/s bidirectional",
            ),
        ),
    )
}


@dataclass(frozen=True)
class SimModel:
    """A named shape; with ``experts`` an MoE whose ``shape.intermediate_size`` is one
    expert's (``engine.sim.experts``)."""

    name: str
    description: str
    shape: ModelConfig
    source: str
    experts: Experts | None = None

    def num_parameters(self) -> int:
        """All parameters (every expert): what the weights' memory holds."""
        if self.experts is None:
            return self.shape.num_parameters()
        return self.experts.total_parameters(self.shape)


def _shape(**fields: int | float | bool) -> ModelConfig:
    # NOTE: the byte tokenizer's BOS/EOS ids as the special tokens: prompts are bytes, and a
    # full-size vocabulary keeps the lm_head cost of the real model.
    tokenizer = ByteTokenizer()
    return ModelConfig(
        rms_norm_eps=1e-5,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_ids=tokenizer.eos_token_ids,
        **fields,
    )


SIM_MODELS: dict[str, SimModel] = {
    model.name: model
    for model in (
        SimModel(
            name="llama-3.1-8b",
            description="Llama 3.1 8B (8.03B params)",
            shape=_shape(
                vocab_size=128256,
                hidden_size=4096,
                intermediate_size=14336,
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                head_dim=128,
                rope_theta=500000.0,
                max_position_embeddings=131072,
                tie_word_embeddings=False,
            ),
            source="meta-llama/Llama-3.1-8B config.json",
        ),
        SimModel(
            name="llama-3.1-70b",
            description="Llama 3.1 70B (70.6B params; needs >141 GB in 16-bit)",
            shape=_shape(
                vocab_size=128256,
                hidden_size=8192,
                intermediate_size=28672,
                num_hidden_layers=80,
                num_attention_heads=64,
                num_key_value_heads=8,
                head_dim=128,
                rope_theta=500000.0,
                max_position_embeddings=131072,
                tie_word_embeddings=False,
            ),
            source="meta-llama/Llama-3.1-70B config.json",
        ),
        SimModel(
            name="qwen2.5-14b",
            # NOTE: Qwen2's QKV biases (~0.01% of the parameters) are not counted.
            description="Qwen2.5-14B class (14.7B params; QKV biases not modelled)",
            shape=_shape(
                vocab_size=152064,
                hidden_size=5120,
                intermediate_size=13824,
                num_hidden_layers=48,
                num_attention_heads=40,
                num_key_value_heads=8,
                head_dim=128,
                rope_theta=1000000.0,
                max_position_embeddings=131072,
                tie_word_embeddings=False,
            ),
            source="Qwen/Qwen2.5-14B config.json",
        ),
        SimModel(
            name="mixtral-8x7b",
            description="Mixtral 8x7B (46.7B params, 12.9B active; needs >93 GB in 16-bit)",
            shape=_shape(
                vocab_size=32000,
                hidden_size=4096,
                intermediate_size=14336,  # NOTE: one expert's MLP
                num_hidden_layers=32,
                num_attention_heads=32,
                num_key_value_heads=8,
                head_dim=128,
                rope_theta=1000000.0,
                max_position_embeddings=32768,
                tie_word_embeddings=False,
            ),
            experts=Experts(num_local_experts=8, num_experts_per_tok=2),
            source="mistralai/Mixtral-8x7B-v0.1 config.json (sliding_window null)",
        ),
    )
}
