"""``tailwatch engine ...``: run the bundled engine from the command line (``generate`` and
``calibrate`` here, ``serve`` in :mod:`tailwatch.serve_cli`; their shared knob options in
:mod:`tailwatch.engine_options`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from engine.llm import LLM
from engine.sampling_params import SamplingParams
from engine.sim.calibrate import calibrate as run_calibration
from engine.sim.calibrate_profile import Grid
from tailwatch.calibrate_view import RichProgress, print_fit, print_validation
from tailwatch.cli_options import check_writable_output, cli_error, typer_app
from tailwatch.engine_options import (
    KNOB_DEFAULTS,
    USER_ERRORS,
    BlockSize,
    Device,
    Dtype,
    EnableChunkedPrefill,
    EnablePrefixCaching,
    EngineSeed,
    GpuMemoryUtilization,
    KvCacheMemoryBytes,
    MaxModelLen,
    MaxNumBatchedTokens,
    MaxNumSeqs,
    Model,
    NumGpuBlocks,
    Quantization,
    SchedulingPolicy,
    SpeculativeConfigJson,
    TensorParallelSize,
    engine_config_from,
    fail,
)
from tailwatch.serve_cli import serve

engine_app = typer_app(help="The bundled inference engine.", no_args_is_help=True)
console = Console()


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
    quantization: Quantization = KNOB_DEFAULTS["quantization"],
    speculative_config: SpeculativeConfigJson = KNOB_DEFAULTS["speculative_config"],
) -> None:
    """Generate offline and print each request's tokens, text and timings."""
    try:
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
    except USER_ERRORS as error:
        raise fail(error) from None
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
    except USER_ERRORS as error:
        raise fail(error) from None
    if run.validation is not None:
        print_validation(console, run.validation)
    console.print(f"wrote {run.path}; simulate it with --model {run.sim_model_name}")


# NOTE: registered last, so that the help lists it after generate and calibrate.
engine_app.command()(serve)
