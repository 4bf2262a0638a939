"""Everything a serving process needs, wired from one ``EngineConfig`` and ``ServeOptions``.

Used by ``tailwatch engine serve`` and by tests, so both run the same wiring: the
engine, its async front end with admission limits, metrics and tracing as observers,
and the app.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.errors import ConfigError
from engine.lora.source import LoRASource, parse_lora_module

if TYPE_CHECKING:
    from fastapi import FastAPI
    from prometheus_client import CollectorRegistry

    from engine.async_engine import AsyncEngine, EngineObserver
    from engine.config import EngineConfig
    from engine.metrics import EngineMetrics
    from engine.tracing import RequestTracer


@dataclass(frozen=True)
class ServeOptions:
    """Serving knobs that are not the engine's.

    ``served_model_name`` None serves the model under its ``--model`` name.
    ``otlp_endpoint`` None turns tracing off. ``admin_token`` None (or empty) leaves
    the admin API unmounted (and the runtime LoRA API with it). ``lora_modules`` are
    vLLM's ``--lora-modules``: ``name=path`` (a PEFT directory) or ``name=random:rank=R``,
    loaded at start-up (they need ``enable_lora``).
    """

    served_model_name: str | None = None
    max_waiting_requests: int | None = None
    max_concurrency_per_tenant: int | None = None
    otlp_endpoint: str | None = None
    trace_sampling_ratio: float = 1.0
    drain_timeout_seconds: float = 30.0
    admin_token: str | None = None
    lora_modules: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.served_model_name is not None and not self.served_model_name.strip():
            raise ConfigError("served_model_name='': give a name or leave it unset")
        self.parsed_lora_modules()
        timeout = self.drain_timeout_seconds
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not timeout >= 0:
            raise ConfigError(f"drain_timeout_seconds={timeout!r}: must be >= 0 seconds")

    def parsed_lora_modules(self) -> list[tuple[str, LoRASource]]:
        """(name, source) of each ``lora_modules`` entry; ``ConfigError`` for a bad one or
        a name given twice."""
        parsed = [parse_lora_module(text) for text in self.lora_modules]
        names = [name for name, _ in parsed]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ConfigError(f"lora_modules: {', '.join(twice)} given more than once")
        return parsed


@dataclass(frozen=True)
class EngineServer:
    app: FastAPI
    async_engine: AsyncEngine
    metrics: EngineMetrics
    tracer: RequestTracer
    served_model_name: str
    instance_id: str  # tailwatch:engine_info's instance_id and the spans' service.instance.id


def build_engine_server(
    config: EngineConfig,
    options: ServeOptions,
    *,
    registry: CollectorRegistry | None = None,
    tracer: RequestTracer | None = None,
    extra_observers: Sequence[EngineObserver] = (),
) -> EngineServer:
    """Load the model and wire the server; raises ``ConfigError`` (or the loader's
    errors) for settings that cannot work, before anything is started.

    ``tracer`` replaces the one ``options`` describes (tests pass one with an in-memory
    exporter); ``extra_observers`` are called after metrics and tracing.
    """
    from engine.async_engine import AsyncEngine
    from engine.live_knobs import NOT_INFO_LABELS
    from engine.llm_engine import LLMEngine
    from engine.metrics import EngineMetrics
    from engine.server.app import build_app
    from engine.span_metrics import SpanDeliveryCollector
    from engine.startup import StartupPhases
    from engine.tracing import RequestTracer, TracingConfig

    name = options.served_model_name or config.model
    # NOTE: one id per serving process, on /metrics and on every span's resource: the key that
    # joins request records to the scrape target that served them (docs/collectors.md).
    instance_id = str(uuid.uuid4())
    # Cheap checks first: they fail before a (possibly large) model is loaded.
    tracing = TracingConfig(
        options.otlp_endpoint, options.trace_sampling_ratio, service_instance_id=instance_id
    )
    for knob in ("max_waiting_requests", "max_concurrency_per_tenant"):
        value = getattr(options, knob)
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ConfigError(f"{knob}={value!r}: must be a positive integer or unset")
    lora_modules = options.parsed_lora_modules()
    if lora_modules and not config.enable_lora:
        raise ConfigError(
            f"lora_modules={list(options.lora_modules)}: needs enable_lora (--enable-lora)"
        )
    if name in {n for n, _ in lora_modules}:
        raise ConfigError(f"lora_modules: {name!r} names the served model; rename the adapter")
    engine = LLMEngine(config)
    for lora_name, source in lora_modules:
        engine.add_lora(lora_name, source)
    if tracer is None:
        tracer = RequestTracer.from_config(tracing, name)
    async_engine = AsyncEngine(
        engine,
        max_waiting_requests=options.max_waiting_requests,
        max_concurrency_per_tenant=options.max_concurrency_per_tenant,
    )
    # NOTE: a fault counts down by itself, and a simulator's feature knobs are drill
    # parameters: no labels of vllm:cache_config_info (engine.live_knobs.NOT_INFO_LABELS).
    knobs = {k: v for k, v in async_engine.knobs().items() if k not in NOT_INFO_LABELS}
    spec = config.speculative_config
    metrics = EngineMetrics(
        name,
        knobs,
        registry=registry,
        max_model_len=config.max_model_len,
        instance_id=instance_id,
        num_speculative_tokens=None if spec is None else spec.num_speculative_tokens,
    )
    startup = StartupPhases(metrics)
    startup.model_loaded()
    if engine.simulation is not None:
        metrics.mark_simulated(engine.simulation.target.gpu.name, config.tensor_parallel_size)
    if engine.lora is not None:
        metrics.enable_lora()
    async_engine.observers.extend([metrics, tracer, *extra_observers])
    metrics.registry.register(SpanDeliveryCollector(tracer.delivery, name))
    app = build_app(
        async_engine,
        served_model_name=name,
        metrics=metrics,
        tracer=tracer,
        admin_token=options.admin_token or None,
        drain_timeout_seconds=options.drain_timeout_seconds,
        startup=startup,
    )
    return EngineServer(app, async_engine, metrics, tracer, name, instance_id)
