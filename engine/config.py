"""One validated engine configuration, with vLLM's knob names.

Validated once, at construction; frozen afterwards. Values found at run time (the
number of KV blocks after profiling memory) are returned by the engine, never written
back here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from engine.errors import ConfigError

SchedulingPolicy = Literal["fcfs", "priority"]
SCHEDULING_POLICIES: tuple[str, ...] = ("fcfs", "priority")

# NOTE: vLLM's own defaults, except the CPU KV budget, which vLLM sizes with
# VLLM_CPU_KVCACHE_SPACE (GiB); 256 MiB holds >100k tokens of the tiny preset.
DEFAULT_CPU_KV_CACHE_MEMORY_BYTES = 256 * 1024 * 1024


def _fail(knob: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"{knob}={value!r}: {why}")


@dataclass(frozen=True)
class EngineConfig:
    """Engine knobs. Names and meanings follow vLLM's engine arguments.

    ``num_gpu_blocks`` fixes the KV pool size in blocks; otherwise it is derived from
    ``kv_cache_memory_bytes`` (on CPU; default 256 MiB) or ``gpu_memory_utilization``
    (on CUDA: the fraction of device memory the engine may use, weights included).
    """

    model: str = "tiny"
    block_size: int = 16
    num_gpu_blocks: int | None = None
    kv_cache_memory_bytes: int | None = None
    gpu_memory_utilization: float = 0.9
    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    max_model_len: int = 2048
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    scheduling_policy: SchedulingPolicy = "fcfs"
    device: str = "auto"
    dtype: str = "auto"
    seed: int = 0

    def __post_init__(self) -> None:
        for knob in ("block_size", "max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            value = getattr(self, knob)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise _fail(knob, value, "must be a positive integer")
        for knob in ("enable_prefix_caching", "enable_chunked_prefill"):
            if not isinstance(getattr(self, knob), bool):
                raise _fail(knob, getattr(self, knob), "must be true or false")
        if self.block_size > 1024:
            raise _fail("block_size", self.block_size, "must be at most 1024 (vLLM uses 16)")
        if self.num_gpu_blocks is not None and (
            isinstance(self.num_gpu_blocks, bool)
            or not isinstance(self.num_gpu_blocks, int)
            or self.num_gpu_blocks < 1
        ):
            raise _fail("num_gpu_blocks", self.num_gpu_blocks, "must be a positive integer")
        if self.kv_cache_memory_bytes is not None and (
            not isinstance(self.kv_cache_memory_bytes, int) or self.kv_cache_memory_bytes < 1
        ):
            raise _fail("kv_cache_memory_bytes", self.kv_cache_memory_bytes, "must be > 0 bytes")
        if self.num_gpu_blocks is not None and self.kv_cache_memory_bytes is not None:
            raise _fail(
                "num_gpu_blocks",
                self.num_gpu_blocks,
                "set either num_gpu_blocks or kv_cache_memory_bytes, not both",
            )
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise _fail("gpu_memory_utilization", self.gpu_memory_utilization, "must be in (0, 1]")
        if self.scheduling_policy not in SCHEDULING_POLICIES:
            raise _fail(
                "scheduling_policy",
                self.scheduling_policy,
                f"must be one of {', '.join(SCHEDULING_POLICIES)}",
            )
        if self.max_num_batched_tokens < self.max_num_seqs:
            raise _fail(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                f"must be >= max_num_seqs ({self.max_num_seqs}) so every running request "
                "can decode in one step",
            )
        if not self.enable_chunked_prefill and self.max_num_batched_tokens < self.max_model_len:
            raise _fail(
                "max_num_batched_tokens",
                self.max_num_batched_tokens,
                f"with enable_chunked_prefill off it must be >= max_model_len "
                f"({self.max_model_len}), or a long prompt could never be scheduled; "
                "raise it or turn chunked prefill on",
            )
        if self.num_gpu_blocks is not None:
            check_kv_pool_fits(self, self.num_gpu_blocks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# Knobs that can change while the engine runs (applied between steps).
LIVE_KNOBS: tuple[str, ...] = (
    "max_num_seqs",
    "max_num_batched_tokens",
    "enable_chunked_prefill",
    "enable_prefix_caching",
    "num_usable_gpu_blocks",
)


def check_kv_pool_fits(config: EngineConfig, num_blocks: int) -> None:
    """Raise unless a pool of ``num_blocks`` holds one request of ``max_model_len`` tokens."""
    capacity_tokens = num_blocks * config.block_size
    if capacity_tokens < config.max_model_len:
        raise ConfigError(
            f"max_model_len={config.max_model_len}: the KV pool holds only {capacity_tokens} "
            f"tokens ({num_blocks} blocks x block_size {config.block_size}); lower max_model_len "
            "or give the KV cache more memory (num_gpu_blocks, kv_cache_memory_bytes or "
            "gpu_memory_utilization)"
        )
