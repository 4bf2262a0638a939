"""What ``LLMEngine`` needs from a simulated model: shape, tokenizer, KV pool size, runner."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from engine.config import EngineConfig, device_kv_budget_bytes
from engine.errors import ConfigError
from engine.model.config import ModelConfig
from engine.model.tokenizer import ByteTokenizer
from engine.sim.features import SimDrafter, SimFeatures
from engine.sim.runner import SimRunner, VirtualClock
from engine.sim.step_cost import Efficiency, StepCostModel
from engine.sim.structured import SimStructuredOutputs
from engine.sim.target import SimTarget, parse_target


@dataclass(frozen=True)
class SimBackend:
    target: SimTarget
    model_config: ModelConfig
    tokenizer: ByteTokenizer
    num_gpu_blocks: int
    runner: SimRunner
    # speculative decoding and structured outputs, priced (engine/sim/features.py)
    features: SimFeatures
    structured_outputs: SimStructuredOutputs
    drafter: SimDrafter


def sim_dtype(config: EngineConfig, target: SimTarget | None = None) -> str:
    """``auto`` is bfloat16, as on a GPU with bf16; float16 and bfloat16 are simulated.
    A calibrated target runs in the dtype it was measured in."""
    if target is not None and target.dtype is not None:
        if config.dtype not in ("auto", target.dtype):
            raise ConfigError(
                f"dtype={config.dtype!r}: {config.model!r} was calibrated in {target.dtype}; "
                "leave dtype at auto"
            )
        return target.dtype
    return "bfloat16" if config.dtype == "auto" else config.dtype


def build_sim_backend(
    config: EngineConfig,
    clock: Callable[[], float],
    efficiency: Efficiency | None = None,
) -> SimBackend:
    """The simulator for ``config.model`` (``sim:<model>@<gpu>``). With a ``VirtualClock``
    as the engine's clock each step advances it; with any other clock it sleeps.

    The KV pool: ``num_gpu_blocks`` if set, else ``kv_cache_memory_bytes``, else the GPU's
    memory by ``gpu_memory_utilization`` less the weights and headroom, the arithmetic the
    torch engine uses on CUDA (``device_kv_budget_bytes``). With ``tensor_parallel_size``
    > 1 that is per GPU, as vLLM sizes it: each GPU holds its shard of the weights and its
    KV heads of every block, so the group's blocks are one GPU's budget over one GPU's
    block bytes (``kv_cache_memory_bytes`` is per GPU, as in vLLM).
    """
    target = parse_target(config.model)
    if config.device != "auto":
        raise ConfigError(
            f"device={config.device!r}: {target.name} runs on no device (its steps are "
            "priced, not computed); leave device at auto"
        )
    tp = config.tensor_parallel_size
    try:
        cost_model = StepCostModel(
            target.model.shape,
            target.gpu,
            sim_dtype(config, target),
            efficiency or target.efficiency,
            experts=target.model.experts,
            tensor_parallel_size=tp,
            quantization=config.quantization,
        )
    except ConfigError as error:
        raise ConfigError(f"model={config.model!r}: {error}") from None
    num_blocks = config.num_gpu_blocks
    if num_blocks is None:
        budget = config.kv_cache_memory_bytes or target.default_kv_cache_memory_bytes
        if budget is None:
            try:
                budget = device_kv_budget_bytes(
                    target.gpu.memory_bytes, cost_model.weight_bytes, config.gpu_memory_utilization
                )
            except ConfigError as error:
                gpus = f"{tp} x {target.gpu.description} (tensor_parallel_size={tp})"
                if tp == 1:
                    gpus = f"one {target.gpu.description}"
                raise ConfigError(
                    f"model={config.model!r}: {target.model.description} does not fit "
                    f"{gpus} ({target.gpu.memory_bytes} bytes each); {error}. Raise "
                    "tensor_parallel_size, or pick a larger GPU or a smaller model"
                ) from None
        num_blocks = budget // (config.block_size * cost_model.kv_bytes_per_token)
        if num_blocks < 1:
            raise ConfigError(
                f"kv_cache_memory_bytes={budget}: less than one KV block of {config.model!r}"
            )
    advance = clock.advance if isinstance(clock, VirtualClock) else time.sleep
    features = SimFeatures()
    runner = SimRunner(cost_model, config.seed, advance, target.step_noise, features)
    structured = SimStructuredOutputs(features, advance, clock, config.seed)
    return SimBackend(
        target,
        target.model.shape,
        ByteTokenizer(),
        num_blocks,
        runner,
        features,
        structured,
        SimDrafter(runner),
    )
