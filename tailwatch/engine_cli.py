"""``tailwatch engine ...``: run the bundled engine from the command line."""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from tailwatch.cli_options import typer_app

engine_app = typer_app(help="The bundled inference engine.", no_args_is_help=True)
console = Console()
err_console = Console(stderr=True)


def _user_errors() -> tuple[type[BaseException], ...]:
    from engine.errors import EngineError
    from engine.model.config import ModelConfigError
    from engine.model.errors import ModelLoadError

    # ValueError covers device/dtype names (e.g. cuda asked for on a CPU-only machine).
    return (EngineError, ModelLoadError, ModelConfigError, ValueError)


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
)


# The engine knobs as options, shared by `engine generate` and `engine serve` (vLLM's names).
BlockSize = Annotated[int, typer.Option(help="Tokens per KV-cache block.")]
NumGpuBlocks = Annotated[
    int | None, typer.Option(help="KV pool size in blocks; default: sized from memory.")
]
KvCacheMemoryBytes = Annotated[
    int | None, typer.Option(help="KV-cache bytes on CPU (default 256 MiB).")
]
GpuMemoryUtilization = Annotated[
    float, typer.Option(help="On CUDA: share of device memory the engine may use (0-1].")
]
MaxNumSeqs = Annotated[int, typer.Option(help="Most requests running in one step.")]
MaxNumBatchedTokens = Annotated[int, typer.Option(help="Token budget of one step.")]
MaxModelLen = Annotated[int, typer.Option(help="Most tokens (prompt + output) per request.")]
EnablePrefixCaching = Annotated[bool, typer.Option(help="Reuse KV blocks of shared prefixes.")]
EnableChunkedPrefill = Annotated[
    bool, typer.Option(help="Split long prompts across steps (with decodes).")
]
SchedulingPolicy = Annotated[str, typer.Option(help="fcfs | priority (X-Priority header).")]
Device = Annotated[str, typer.Option(help="auto | cpu | cuda | cuda:N.")]
Dtype = Annotated[str, typer.Option(help="auto | float32 | float16 | bfloat16.")]


def engine_config_from(options: dict[str, Any], **extra: Any):
    """An ``EngineConfig`` from a command's options (its ``locals()``) and ``extra``."""
    from engine.config import EngineConfig

    return EngineConfig(**{k: options[k] for k in ENGINE_KNOB_OPTIONS}, **extra)


def _fail(error: BaseException) -> typer.Exit:
    err_console.print(f"[bold red]error:[/] {error}")
    return typer.Exit(code=2)


@engine_app.command()
def generate(
    prompt: Annotated[
        list[str], typer.Option("--prompt", "-p", help="A prompt; repeat for a batch.")
    ],
    model: Annotated[str, typer.Option(help="Preset name or local checkpoint directory.")] = "tiny",
    max_tokens: Annotated[int, typer.Option(help="Tokens to generate per prompt.")] = 32,
    temperature: Annotated[float, typer.Option(help="0 is greedy.")] = 0.0,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling mass (0-1]; 1 is off.")] = 1.0,
    top_k: Annotated[int, typer.Option(help="Sample from the K likeliest; 0 is off.")] = 0,
    seed: Annotated[int | None, typer.Option(help="Per-request sampling seed.")] = None,
    stop: Annotated[list[str] | None, typer.Option(help="Stop string; repeatable.")] = None,
    ignore_eos: Annotated[bool, typer.Option(help="Keep generating past end-of-sequence.")] = False,
    block_size: BlockSize = 16,
    num_gpu_blocks: NumGpuBlocks = None,
    kv_cache_memory_bytes: KvCacheMemoryBytes = None,
    gpu_memory_utilization: GpuMemoryUtilization = 0.9,
    max_num_seqs: MaxNumSeqs = 256,
    max_num_batched_tokens: MaxNumBatchedTokens = 2048,
    max_model_len: MaxModelLen = 2048,
    enable_prefix_caching: EnablePrefixCaching = True,
    enable_chunked_prefill: EnableChunkedPrefill = True,
    scheduling_policy: SchedulingPolicy = "fcfs",
    device: Device = "auto",
    dtype: Dtype = "auto",
) -> None:
    """Generate offline and print each request's tokens, text and timings."""
    try:
        from engine.llm import LLM
        from engine.sampling_params import SamplingParams

        params = SamplingParams(
            max_tokens=max_tokens,
            temperature=temperature,
            top_p=top_p,
            top_k=top_k,
            seed=seed,
            stop=tuple(stop or ()),
            ignore_eos=ignore_eos,
        )
        config = engine_config_from(locals())
        llm = LLM.from_config(config)
        started = time.perf_counter()
        outputs = llm.generate(prompt, params)
        elapsed = time.perf_counter() - started
    except _user_errors() as error:
        raise _fail(error) from None
    _print_outputs(outputs, elapsed, llm)


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _print_outputs(outputs, elapsed: float, llm) -> None:
    engine = llm.engine
    for out in outputs:
        console.print(f"[bold]{out.request_id}[/] tokens: {list(out.token_ids)}")
        console.print(f"  text: {out.text!r}")
    table = Table(title="per-request timings (ms)")
    for column in (
        "request",
        "prompt",
        "cached",
        "output",
        "finish",
        "queue",
        "TTFT",
        "mean ITL",
        "e2e",
        "preempted",
    ):
        table.add_column(column, justify="right")
    for out in outputs:
        t = out.timings
        gaps = t.inter_token_seconds
        table.add_row(
            out.request_id,
            str(len(out.prompt_token_ids)),
            str(out.num_cached_tokens),
            str(len(out.token_ids)),
            out.finish_reason,
            _ms(t.queue_seconds),
            _ms(t.ttft_seconds),
            _ms(sum(gaps) / len(gaps) if gaps else None),
            _ms(t.e2e_seconds),
            str(out.num_preemptions),
        )
    console.print(table)
    stats = engine.stats()
    total = sum(len(o.token_ids) for o in outputs)
    console.print(
        f"{len(outputs)} requests, {total} output tokens in {elapsed:.2f} s "
        f"({total / elapsed:.0f} tokens/s) on {engine.runner.device} ({engine.runner.dtype}); "
        f"KV pool {engine.num_gpu_blocks} blocks x {engine.config.block_size}; "
        f"prefix cache hits {stats.prefix_cache_hits_tokens}/{stats.prefix_cache_queries_tokens} "
        f"tokens; preemptions {stats.num_preemptions_total}"
    )
