"""``tailwatch engine ...``: run the bundled engine from the command line."""

from __future__ import annotations

import time
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from engine.config import knob_defaults, knob_help
from tailwatch.cli_options import check_writable_output, cli_error, typer_app

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
    "tensor_parallel_size",
)

# NOTE: defaults and help come from EngineConfig's fields, the one place they are
# written (engine.config imports no torch, so the CLI still starts fast). A policy
# default is passed as its plain string: the option's type stays ``str`` and a bad
# name is refused by EngineConfig, naming the knob, as any other knob's value is.
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


def engine_config_from(options: dict[str, Any], **extra: Any):
    """An ``EngineConfig`` from a command's options (its ``locals()``) and ``extra``; a
    knob the command does not offer (``calibrate`` has no ``--tensor-parallel-size``: the
    torch engine runs on one device) keeps ``EngineConfig``'s default."""
    from engine.config import EngineConfig

    knobs = {k: options[k] for k in ENGINE_KNOB_OPTIONS if k in options}
    return EngineConfig(**knobs, **extra)


def _fail(error: BaseException) -> typer.Exit:
    # NOTE: one line whatever the console's width (rich fixes it when the module is
    # imported): the terminal wraps it, rich must not break it
    err_console.print(f"[bold red]error:[/] {error}", soft_wrap=True)
    return typer.Exit(code=2)


@engine_app.command()
def generate(
    prompt: Annotated[
        list[str], typer.Option("--prompt", "-p", help="A prompt; repeat for a batch.")
    ],
    model: Model = KNOB_DEFAULTS["model"],
    max_tokens: Annotated[int, typer.Option(help="Tokens to generate per prompt.")] = 32,
    temperature: Annotated[float, typer.Option(help="0 is greedy.")] = 0.0,
    top_p: Annotated[float, typer.Option(help="Nucleus sampling mass (0-1]; 1 is off.")] = 1.0,
    top_k: Annotated[int, typer.Option(help="Sample from the K likeliest; 0 is off.")] = 0,
    seed: Annotated[int | None, typer.Option(help="Per-request sampling seed.")] = None,
    stop: Annotated[list[str] | None, typer.Option(help="Stop string; repeatable.")] = None,
    ignore_eos: Annotated[bool, typer.Option(help="Keep generating past end-of-sequence.")] = False,
    block_size: BlockSize = KNOB_DEFAULTS["block_size"],
    num_gpu_blocks: NumGpuBlocks = KNOB_DEFAULTS["num_gpu_blocks"],
    kv_cache_memory_bytes: KvCacheMemoryBytes = KNOB_DEFAULTS["kv_cache_memory_bytes"],
    gpu_memory_utilization: GpuMemoryUtilization = KNOB_DEFAULTS["gpu_memory_utilization"],
    max_num_seqs: MaxNumSeqs = KNOB_DEFAULTS["max_num_seqs"],
    max_num_batched_tokens: MaxNumBatchedTokens = KNOB_DEFAULTS["max_num_batched_tokens"],
    max_model_len: MaxModelLen = KNOB_DEFAULTS["max_model_len"],
    enable_prefix_caching: EnablePrefixCaching = KNOB_DEFAULTS["enable_prefix_caching"],
    enable_chunked_prefill: EnableChunkedPrefill = KNOB_DEFAULTS["enable_chunked_prefill"],
    scheduling_policy: SchedulingPolicy = KNOB_DEFAULTS["scheduling_policy"],
    device: Device = KNOB_DEFAULTS["device"],
    dtype: Dtype = KNOB_DEFAULTS["dtype"],
    tensor_parallel_size: TensorParallelSize = KNOB_DEFAULTS["tensor_parallel_size"],
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


def _where(engine) -> str:
    """The device and dtype a run used; a simulated engine's GPUs, which it only priced."""
    if engine.simulation is None:
        return f"{engine.runner.device} ({engine.runner.dtype})"
    cost = engine.runner.cost_model
    return f"{cost.tensor_parallel_size} x {cost.gpu.name}, simulated ({cost.dtype})"


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
        f"({total / elapsed:.0f} tokens/s) on {_where(engine)}; "
        f"KV pool {engine.num_gpu_blocks} blocks x {engine.config.block_size}; "
        f"prefix cache hits {stats.prefix_cache_hits_tokens}/{stats.prefix_cache_queries_tokens} "
        f"tokens; preemptions {stats.num_preemptions_total}",
        soft_wrap=True,
    )


def _sizes(flag: str, help: str):
    """A comma-separated list of positive integers, checked while the line is parsed."""

    def parse(value: str) -> str:
        try:
            sizes = [int(part) for part in value.split(",") if part.strip()]
        except ValueError:
            raise cli_error(f"{flag} {value!r}: expected comma-separated integers") from None
        bad = next((s for s in sizes if s < 1), None)
        if not sizes or bad is not None:
            raise cli_error(f"{flag} {value!r}: sizes must be positive integers")
        return value

    return typer.Option(flag, callback=parse, help=help)


def _positive(flag: str, help: str, *, allow_zero: bool = False):
    def check(value):
        if value is not None and not (value >= 0 if allow_zero else value > 0):
            raise cli_error(f"{flag}={value!r}: must be {'>= 0' if allow_zero else '> 0'}")
        return value

    return typer.Option(flag, callback=check, help=help)


def _size_list(value: str) -> tuple[int, ...]:
    return tuple(int(part) for part in value.split(",") if part.strip())


@engine_app.command()
def calibrate(
    output: Annotated[
        Path, typer.Option("--output", "-o", help="Where the calibration (JSON) is written.")
    ] = Path("calibration.json"),
    skip_validation: Annotated[
        bool, typer.Option("--skip-validation", help="Profile and fit only.")
    ] = False,
    prefill_tokens: Annotated[
        str, _sizes("--prefill-tokens", "Prefill chunk sizes (new tokens per step).")
    ] = "32,128,512",
    prefill_contexts: Annotated[
        str, _sizes("--prefill-contexts", "Prompt lengths the chunks run up to.")
    ] = "512,1536",
    decode_batches: Annotated[
        str, _sizes("--decode-batches", "Requests decoding together.")
    ] = "1,8,32",
    decode_contexts: Annotated[
        str, _sizes("--decode-contexts", "Context lengths of the decodes.")
    ] = "64,512,1024",
    decode_steps: Annotated[
        int, _positive("--decode-steps", "Decode steps measured per decode cell.")
    ] = 8,
    repeats: Annotated[int, _positive("--repeats", "Runs of each prefill cell.")] = 2,
    warmup_steps: Annotated[
        int, _positive("--warmup-steps", "Unrecorded warm-up decodes.", allow_zero=True)
    ] = 4,
    rate: Annotated[float, _positive("--rate", "Validation arrivals per second (Poisson).")] = 2.0,
    duration: Annotated[
        float | None,
        _positive(
            "--duration",
            "Seconds of validation arrivals; default 60 (real time), or 180 of the engine's "
            "CPU clock with --timer cpu.",
        ),
    ] = None,
    torch_threads: Annotated[
        int | None, _positive("--torch-threads", "torch intra-op threads; default: torch's.")
    ] = None,
    timer: Annotated[
        str, typer.Option(help="wall | cpu (engine thread CPU time; CPU, 1 thread).")
    ] = "wall",
    model: Model = KNOB_DEFAULTS["model"],
    block_size: BlockSize = KNOB_DEFAULTS["block_size"],
    num_gpu_blocks: NumGpuBlocks = KNOB_DEFAULTS["num_gpu_blocks"],
    kv_cache_memory_bytes: KvCacheMemoryBytes = KNOB_DEFAULTS["kv_cache_memory_bytes"],
    gpu_memory_utilization: GpuMemoryUtilization = KNOB_DEFAULTS["gpu_memory_utilization"],
    max_num_seqs: MaxNumSeqs = KNOB_DEFAULTS["max_num_seqs"],
    max_num_batched_tokens: MaxNumBatchedTokens = KNOB_DEFAULTS["max_num_batched_tokens"],
    max_model_len: MaxModelLen = KNOB_DEFAULTS["max_model_len"],
    enable_prefix_caching: EnablePrefixCaching = KNOB_DEFAULTS["enable_prefix_caching"],
    enable_chunked_prefill: EnableChunkedPrefill = KNOB_DEFAULTS["enable_chunked_prefill"],
    scheduling_policy: SchedulingPolicy = KNOB_DEFAULTS["scheduling_policy"],
    device: Device = KNOB_DEFAULTS["device"],
    dtype: Dtype = KNOB_DEFAULTS["dtype"],
    seed: EngineSeed = KNOB_DEFAULTS["seed"],
) -> None:
    """Profile the torch engine's steps, fit the simulator's efficiency factors, save them
    (load with --model sim:<model>@file:<output>) and validate side by side (docs/knob-lab.md)."""
    check_writable_output([output], "--output")
    try:
        from engine.sim.calibrate import calibrate as run_calibration
        from engine.sim.calibrate_profile import Grid
        from tailwatch.calibrate_view import RichProgress, print_fit, print_validation

        grid = Grid(
            prefill_tokens=_size_list(prefill_tokens),
            prefill_contexts=_size_list(prefill_contexts),
            decode_batches=_size_list(decode_batches),
            decode_contexts=_size_list(decode_contexts),
            decode_steps=decode_steps,
            repeats=repeats,
            warmup_steps=warmup_steps,
        )
        config = engine_config_from(locals(), seed=seed)
        with RichProgress(console) as progress:
            run = run_calibration(
                config,
                grid,
                output,
                validation=not skip_validation,
                rate=rate,
                duration_seconds=duration,
                torch_threads=torch_threads,
                timer=timer,
                progress=progress,
                on_fitted=lambda fitted: print_fit(console, fitted),
            )
    except _user_errors() as error:
        raise _fail(error) from None
    if run.validation is not None:
        print_validation(console, run.validation)
    console.print(f"wrote {run.path}; simulate it with --model {run.sim_model_name}")
