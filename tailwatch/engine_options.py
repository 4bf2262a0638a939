"""What ``tailwatch engine generate``, ``calibrate`` and ``serve`` share: the engine's knobs
as options (defaults and help from ``EngineConfig``), the ``EngineConfig`` they build, and
how an engine error becomes one ``error:`` line."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

import typer
from rich.console import Console

from engine.config import EngineConfig, knob_defaults, knob_help
from engine.errors import EngineError
from engine.model.config import ModelConfigError
from engine.model.errors import ModelLoadError

err_console = Console(stderr=True)


#: The errors that are the user's to fix (a knob, the model, its files): one ``error:`` line.
#: ValueError covers device/dtype names (e.g. cuda asked for on a CPU-only machine).
USER_ERRORS: tuple[type[BaseException], ...] = (
    EngineError,
    ModelLoadError,
    ModelConfigError,
    ValueError,
)


# The EngineConfig knobs that `engine generate` and `engine serve` take as options.
ENGINE_KNOB_OPTIONS = (
    "model",
    "block_size",
    "num_gpu_blocks",
    "kv_cache_memory_bytes",
    "gpu_memory_utilization",
    "max_num_seqs",
    "max_num_batched_tokens",
    "max_model_len",
    "enable_prefix_caching",
    "enable_chunked_prefill",
    "scheduling_policy",
    "device",
    "dtype",
    "tensor_parallel_size",
    "quantization",
    "speculative_config",
)
# The EngineConfig knobs only `engine serve` takes: adapters are served, not generated with.
SERVE_KNOB_OPTIONS = (
    "enable_lora",
    "max_loras",
    "max_cpu_loras",
    "max_lora_rank",
    "lora_load_seconds",
)

# NOTE: defaults and help come from EngineConfig's fields, the one place they are
# written. A policy default is passed as its plain string: the option's type stays ``str``
# and a bad name is refused by EngineConfig, naming the knob, as any other knob's value is.
KNOB_DEFAULTS: dict[str, Any] = {
    name: value.value if isinstance(value, Enum) else value
    for name, value in knob_defaults().items()
}
_KNOB_HELP = knob_help()


def _knob_option(knob: str) -> Any:
    return typer.Option(help=_KNOB_HELP[knob])


# The engine knobs as options, shared by `engine generate` and `engine serve` (vLLM's names).
Model = Annotated[str, _knob_option("model")]
BlockSize = Annotated[int, _knob_option("block_size")]
NumGpuBlocks = Annotated[int | None, _knob_option("num_gpu_blocks")]
KvCacheMemoryBytes = Annotated[int | None, _knob_option("kv_cache_memory_bytes")]
GpuMemoryUtilization = Annotated[float, _knob_option("gpu_memory_utilization")]
MaxNumSeqs = Annotated[int, _knob_option("max_num_seqs")]
MaxNumBatchedTokens = Annotated[int, _knob_option("max_num_batched_tokens")]
MaxModelLen = Annotated[int, _knob_option("max_model_len")]
EnablePrefixCaching = Annotated[bool, _knob_option("enable_prefix_caching")]
EnableChunkedPrefill = Annotated[bool, _knob_option("enable_chunked_prefill")]
SchedulingPolicy = Annotated[str, _knob_option("scheduling_policy")]
Device = Annotated[str, _knob_option("device")]
Dtype = Annotated[str, _knob_option("dtype")]
EngineSeed = Annotated[int, _knob_option("seed")]
TensorParallelSize = Annotated[int, _knob_option("tensor_parallel_size")]
Quantization = Annotated[str | None, _knob_option("quantization")]
EnableLora = Annotated[bool, _knob_option("enable_lora")]
MaxLoras = Annotated[int, _knob_option("max_loras")]
MaxCpuLoras = Annotated[int | None, _knob_option("max_cpu_loras")]
MaxLoraRank = Annotated[int, _knob_option("max_lora_rank")]
LoraLoadSeconds = Annotated[float, _knob_option("lora_load_seconds")]
SpeculativeConfigJson = Annotated[str | None, _knob_option("speculative_config")]


def engine_config_from(options: dict[str, Any], **extra: Any):
    """An ``EngineConfig`` from a command's options (its ``locals()``) and ``extra``; a
    knob the command does not offer (``calibrate`` has no ``--tensor-parallel-size``: the
    torch engine runs on one device) keeps ``EngineConfig``'s default."""
    knobs = {k: options[k] for k in (*ENGINE_KNOB_OPTIONS, *SERVE_KNOB_OPTIONS) if k in options}
    return EngineConfig(**knobs, **extra)


def fail(error: BaseException) -> typer.Exit:
    # NOTE: one line whatever the console's width (rich fixes it when the module is
    # imported): the terminal wraps it, rich must not break it
    err_console.print(f"[bold red]error:[/] {error}", soft_wrap=True)
    return typer.Exit(code=2)
