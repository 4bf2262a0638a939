"""One validated engine configuration, with vLLM's knob names.

Validated once, at construction; frozen afterwards. Values found at run time (the
number of KV blocks after profiling memory) are returned by the engine, never written
back here.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from engine.errors import ConfigError
from engine.lora.config import LoRAConfig, lora_config
from engine.quantization import check_quantization
from engine.spec_decode.config import SpeculativeConfig


class SchedulingPolicy(StrEnum):
    """The order of the waiting queue and of preemption victims (vLLM's policies)."""

    FCFS = "fcfs"  # arrival order; the last admitted is preempted first
    PRIORITY = "priority"  # lowest ``priority`` value first; the largest is preempted first

    @classmethod
    def parse(cls, value: Any) -> SchedulingPolicy:
        """The policy named ``value``; ``ConfigError`` naming it and the allowed ones."""
        try:
            return cls(value)
        except ValueError:
            raise _fail(
                "scheduling_policy", value, f"must be one of {', '.join(SCHEDULING_POLICIES)}"
            ) from None


SCHEDULING_POLICIES: tuple[str, ...] = tuple(p.value for p in SchedulingPolicy)

# NOTE: vLLM's own defaults, except the CPU KV budget, which vLLM sizes with
# VLLM_CPU_KVCACHE_SPACE (GiB); 256 MiB holds >100k tokens of the tiny preset.
DEFAULT_CPU_KV_CACHE_MEMORY_BYTES = 256 * 1024 * 1024


def _fail(knob: str, value: Any, why: str) -> ConfigError:
    return ConfigError(f"{knob}={value!r}: {why}")


def _check_positive_int(knob: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _fail(knob, value, "must be a positive integer")


def _check_bool(knob: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise _fail(knob, value, "must be true or false")


def _knob(default: Any, help: str) -> Any:
    """A config field whose default and help text the CLI options are built from."""
    return field(default=default, metadata={"help": help})


@dataclass(frozen=True)
class SchedulerLimits:
    """What one scheduler step may take: the batch limits, validated together.

    Frozen and replaced whole on a live knob change, so a step never sees half of a
    change, and a bad change (refused here) leaves the limits in force untouched.
    """

    max_num_seqs: int
    max_num_batched_tokens: int
    max_model_len: int
    enable_chunked_prefill: bool

    def __post_init__(self) -> None:
        for knob in ("max_num_seqs", "max_num_batched_tokens", "max_model_len"):
            _check_positive_int(knob, getattr(self, knob))
        _check_bool("enable_chunked_prefill", self.enable_chunked_prefill)
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


@dataclass(frozen=True)
class EngineConfig:
    """Engine knobs. Names and meanings follow vLLM's engine arguments.

    ``num_gpu_blocks`` fixes the KV pool size in blocks; otherwise it is derived from
    ``kv_cache_memory_bytes`` (on CPU; default 256 MiB) or ``gpu_memory_utilization``
    (on CUDA: the fraction of device memory the engine may use, weights included).
    Each field's ``help`` metadata is the help text of its ``tailwatch engine`` option.
    """

    model: str = _knob("tiny", "Preset name, local checkpoint directory, or sim:<model>@<gpu>.")
    block_size: int = _knob(16, "Tokens per KV-cache block.")
    num_gpu_blocks: int | None = _knob(None, "KV pool size in blocks; default: sized from memory.")
    kv_cache_memory_bytes: int | None = _knob(None, "KV-cache bytes on CPU (default 256 MiB).")
    gpu_memory_utilization: float = _knob(
        0.9, "On CUDA: share of device memory the engine may use (0-1]."
    )
    max_num_seqs: int = _knob(256, "Most requests running in one step.")
    max_num_batched_tokens: int = _knob(2048, "Token budget of one step.")
    max_model_len: int = _knob(2048, "Most tokens (prompt + output) per request.")
    enable_prefix_caching: bool = _knob(True, "Reuse KV blocks of shared prefixes.")
    enable_chunked_prefill: bool = _knob(True, "Split long prompts across steps (with decodes).")
    scheduling_policy: SchedulingPolicy = _knob(  # noqa: RUF009 (an enum member is immutable)
        SchedulingPolicy.FCFS, "fcfs | priority (X-Priority header)."
    )
    device: str = _knob("auto", "auto | cpu | cuda | cuda:N.")
    dtype: str = _knob("auto", "auto | float32 | float16 | bfloat16.")
    seed: int = _knob(0, "Seed of unseeded random sampling.")
    tensor_parallel_size: int = _knob(
        1, "GPUs one engine shards the model over; >1 only for sim: models."
    )
    quantization: str | None = _knob(
        None, "Weight quantization: int8_per_channel_weight_only (vLLM's name); default: none."
    )
    enable_lora: bool = _knob(False, "Serve LoRA adapters (--lora-modules, load_lora_adapter).")
    max_loras: int = _knob(1, "With LoRA: most distinct adapters in one batch.")
    max_cpu_loras: int | None = _knob(
        None, "With LoRA: most adapters kept loaded (LRU); default: max_loras."
    )
    max_lora_rank: int = _knob(16, "With LoRA: the largest adapter rank (vLLM's choices).")
    lora_load_seconds: float = _knob(
        0.0, "With LoRA: storage latency each cold adapter load adds (seconds)."
    )
    # NOTE: a JSON string from the flag or a YAML mapping becomes a SpeculativeConfig here
    speculative_config: SpeculativeConfig | None = _knob(  # noqa: RUF009 (frozen; None)
        None,
        "Speculative decoding, vLLM's JSON: "
        '{"method": "ngram", "num_speculative_tokens": 3} (also prompt_lookup_min/max).',
    )

    def __post_init__(self) -> None:
        _check_positive_int("block_size", self.block_size)
        if self.block_size > 1024:
            raise _fail("block_size", self.block_size, "must be at most 1024 (vLLM uses 16)")
        _check_bool("enable_prefix_caching", self.enable_prefix_caching)
        self.scheduler_limits()  # NOTE: the same checks a live knob change passes
        _check_tensor_parallel_size(self.model, self.tensor_parallel_size)
        if self.num_gpu_blocks is not None:
            _check_positive_int("num_gpu_blocks", self.num_gpu_blocks)
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
        # NOTE: a string from a flag or a JSON body becomes the enum here, once; frozen
        # dataclasses allow that only through object.__setattr__.
        object.__setattr__(
            self, "scheduling_policy", SchedulingPolicy.parse(self.scheduling_policy)
        )
        object.__setattr__(
            self, "speculative_config", SpeculativeConfig.parse(self.speculative_config)
        )
        if self.num_gpu_blocks is not None:
            check_kv_pool_fits(self, self.num_gpu_blocks)
        check_quantization(self.quantization)
        self.lora_config()  # NOTE: checked even with LoRA off, so a typo fails at start-up

    def lora_config(self) -> LoRAConfig | None:
        """The LoRA limits this configuration runs with (validated); None with LoRA off."""
        return lora_config(
            enable_lora=self.enable_lora,
            max_loras=self.max_loras,
            max_cpu_loras=self.max_cpu_loras,
            max_lora_rank=self.max_lora_rank,
            lora_load_seconds=self.lora_load_seconds,
        )

    def scheduler_limits(self) -> SchedulerLimits:
        """The batch limits this configuration gives a scheduler (validated)."""
        return SchedulerLimits(
            max_num_seqs=self.max_num_seqs,
            max_num_batched_tokens=self.max_num_batched_tokens,
            max_model_len=self.max_model_len,
            enable_chunked_prefill=self.enable_chunked_prefill,
        )

    def to_dict(self) -> dict[str, Any]:
        """Every knob by name; ``speculative_config`` as its JSON text (or None), which is
        what the flag takes and what ``EngineConfig(**to_dict())`` reads back."""
        knobs = asdict(self)
        spec = self.speculative_config
        knobs["speculative_config"] = None if spec is None else spec.to_json()
        return knobs


def _check_tensor_parallel_size(model: Any, size: Any) -> None:
    _check_positive_int("tensor_parallel_size", size)
    if size == 1:
        return
    # NOTE: imported here, only for a size above 1: engine.sim.target pulls in the model
    # specs, which the CLI need not load to parse its options.
    from engine.sim.target import is_simulated

    if not is_simulated(model):
        raise _fail(
            "tensor_parallel_size",
            size,
            f"the torch engine runs model {model!r} on one device, so only 1 is supported; "
            "tensor parallelism is simulated only (--model sim:<model>@<gpu>)",
        )


def knob_defaults() -> dict[str, Any]:
    """Each ``EngineConfig`` field's default, by name."""
    return {f.name: f.default for f in fields(EngineConfig)}


def knob_help() -> dict[str, str]:
    """Each ``EngineConfig`` field's help text, by name (a CLI option's help)."""
    return {f.name: f.metadata["help"] for f in fields(EngineConfig)}


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


def device_kv_budget_bytes(total_bytes: int, used_bytes: int, gpu_memory_utilization: float) -> int:
    """Bytes left for KV blocks on a device of ``total_bytes`` whose weights use
    ``used_bytes``: the allowed share, less the weights, less activation headroom.

    NOTE: vLLM profiles a max-size forward to size activation memory; we reserve a fixed
    headroom instead (10% of what is left after weights, at least 256 MiB), which is
    conservative for the presets here. ``kv_cache_memory_bytes`` overrides it exactly.
    """
    allowed = int(total_bytes * gpu_memory_utilization)
    allowance = allowed - used_bytes
    budget = allowance - max(256 * 1024 * 1024, allowance // 10)
    if budget <= 0:
        raise ConfigError(
            f"gpu_memory_utilization={gpu_memory_utilization}: the weights already use "
            f"{used_bytes} of the {allowed} bytes allowed; raise it or set kv_cache_memory_bytes"
        )
    return budget
