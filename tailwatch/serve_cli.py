"""``tailwatch engine serve``: the bundled engine behind an OpenAI-compatible HTTP API."""

from __future__ import annotations

import logging
import os
from typing import Annotated

import typer
import uvicorn

from engine.server.launch import ServeOptions, build_engine_server
from engine.server.uvicorn_server import DrainingServer, listen_socket
from tailwatch.cli_options import port_option
from tailwatch.engine_options import (
    KNOB_DEFAULTS,
    USER_ERRORS,
    BlockSize,
    Device,
    Dtype,
    EnableChunkedPrefill,
    EnableLora,
    EnablePrefixCaching,
    EngineSeed,
    GpuMemoryUtilization,
    KvCacheMemoryBytes,
    LoraLoadSeconds,
    MaxCpuLoras,
    MaxLoraRank,
    MaxLoras,
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

ADMIN_TOKEN_ENV = "TAILWATCH_ADMIN_TOKEN"
# After the drain, how long uvicorn waits for responses still being written.
GRACEFUL_SHUTDOWN_SECONDS = 5
EXIT_ENGINE_DEAD = 3  # 1 is a failed start, 2 a usage error


def serve(
    model: Model = KNOB_DEFAULTS["model"],
    host: Annotated[str, typer.Option(help="Address to listen on (loopback by default).")] = (
        "127.0.0.1"
    ),
    port: Annotated[
        int, port_option("Port to listen on; 0 picks a free one.", allow_zero=True)
    ] = 8000,
    served_model_name: Annotated[
        str | None, typer.Option(help="The model name clients send; default: --model.")
    ] = None,
    max_waiting_requests: Annotated[
        int | None, typer.Option(help="Waiting-queue bound; past it requests get 429.")
    ] = None,
    max_concurrency_per_tenant: Annotated[
        int | None, typer.Option(help="Requests in flight per tenant; past it 429.")
    ] = None,
    otlp_endpoint: Annotated[
        str | None,
        typer.Option(help="OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces."),
    ] = None,
    trace_sampling_ratio: Annotated[
        float, typer.Option(help="Share of requests traced (0-1).")
    ] = 1.0,
    drain_timeout: Annotated[
        float, typer.Option(help="Seconds in-flight requests get to finish after SIGTERM.")
    ] = 30.0,
    access_log: Annotated[bool, typer.Option(help="Log every HTTP request.")] = True,
    lora_modules: Annotated[
        list[str] | None,
        typer.Option(
            help="A LoRA adapter to serve: name=path (PEFT directory) or "
            "name=random:rank=8,seed=3; repeatable (needs --enable-lora)."
        ),
    ] = None,
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
    tensor_parallel_size: TensorParallelSize = KNOB_DEFAULTS["tensor_parallel_size"],
    quantization: Quantization = KNOB_DEFAULTS["quantization"],
    enable_lora: EnableLora = KNOB_DEFAULTS["enable_lora"],
    max_loras: MaxLoras = KNOB_DEFAULTS["max_loras"],
    max_cpu_loras: MaxCpuLoras = KNOB_DEFAULTS["max_cpu_loras"],
    max_lora_rank: MaxLoraRank = KNOB_DEFAULTS["max_lora_rank"],
    lora_load_seconds: LoraLoadSeconds = KNOB_DEFAULTS["lora_load_seconds"],
    speculative_config: SpeculativeConfigJson = KNOB_DEFAULTS["speculative_config"],
) -> None:
    """Serve the OpenAI API, /metrics and probes over HTTP (see docs/server.md).

    The admin API is on only when TAILWATCH_ADMIN_TOKEN is set. SIGTERM drains, exit 0
    (exit 3 if the engine had died of a failure it could not contain).
    """
    try:
        options = ServeOptions(
            served_model_name=served_model_name,
            max_waiting_requests=max_waiting_requests,
            max_concurrency_per_tenant=max_concurrency_per_tenant,
            otlp_endpoint=otlp_endpoint,
            trace_sampling_ratio=trace_sampling_ratio,
            drain_timeout_seconds=drain_timeout,
            admin_token=os.environ.get(ADMIN_TOKEN_ENV) or None,
            lora_modules=tuple(lora_modules or ()),
        )
        config = engine_config_from(locals(), seed=seed)
    except USER_ERRORS as error:
        raise fail(error) from None
    # Listen before loading the model: a taken port fails in a second, not a minute.
    try:
        sock = listen_socket(host, port)
    except OSError as error:
        reason = error.strerror or str(error)
        raise fail(OSError(f"cannot listen on {host}:{port}: {reason}")) from None
    try:
        server = build_engine_server(config, options)
    except USER_ERRORS as error:
        sock.close()
        raise fail(error) from None

    logging.basicConfig(level=logging.INFO, format="%(levelname)s:     %(name)s: %(message)s")
    bound_host, bound_port = sock.getsockname()[:2]
    admin = "on" if options.admin_token else f"off (set {ADMIN_TOKEN_ENV} to enable)"
    typer.echo(
        f"serving {server.served_model_name!r} on http://{_url_host(bound_host)}:{bound_port} "
        f"(admin API {admin})",
        err=True,
    )
    uvicorn_config = uvicorn.Config(
        server.app,
        log_level="info",
        access_log=access_log,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )
    http_server = DrainingServer(uvicorn_config, server.async_engine, drain_timeout)
    http_server.run(sockets=[sock])
    if not http_server.started:
        raise typer.Exit(code=1)
    if server.async_engine.loop_error is not None:
        # NOTE: a dead engine exits non-zero so a supervisor sees a failure, not a stop.
        typer.echo(f"error: the engine died: {server.async_engine.loop_error!r}", err=True)
        raise typer.Exit(code=EXIT_ENGINE_DEAD)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
