"""Prometheus metrics for the engine, in vLLM 0.33's dialect (see ``metric_names``).

``EngineMetrics`` is an ``EngineObserver``: the engine thread calls ``on_step`` after
every step (and after aborts), the front end calls ``on_rejected`` and
``observe_http_response``, and ``render`` serves ``GET /metrics``. Work per step is
O(outputs): a few counter increments per request and one dict entry per request in
flight (the time of its last token, for inter-token latency).
"""

from __future__ import annotations

import inspect
import logging
import re
import threading
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.openmetrics import exposition as openmetrics
from prometheus_client.utils import INF

from engine import metric_names as mn
from engine.errors import ConfigError
from engine.safe_text import MAX_LABEL_VALUE_CHARS, safe_text

if TYPE_CHECKING:
    from engine.async_engine import RequestHandle
    from engine.llm_engine import KnobChange, LLMEngine
    from engine.lora.metrics import LoRAMetrics
    from engine.outputs import RequestOutput
    from engine.scheduler import SchedulerStats
    from engine.spec_decode.stats import SpecDecodingStats
    from engine.structured.cache import GrammarCacheStats

OPENMETRICS_CONTENT_TYPE = "application/openmetrics-text; version=1.0.0; charset=utf-8"
# NOTE: prometheus_client 0.26 escapes ':' to '_' on OpenMetrics sample lines but not on
# '# TYPE' lines (client_python #1177), so a scraper would store vllm_… names. Our names
# are all legal classic names, for which "allow-utf-8" renders them unescaped.
_OM_KWARGS = (
    {"escaping": "allow-utf-8"}
    if "escaping" in inspect.signature(openmetrics.generate_latest).parameters
    else {}
)
_LABEL_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
logger = logging.getLogger("tailwatch.engine")


class _TenantSeries:
    """The bound per-tenant children, so a step costs no label lookups."""

    def __init__(self, metrics: EngineMetrics, tenant: str) -> None:
        labels = (*metrics.labels, tenant)
        requests = metrics.family(mn.TENANT_REQUESTS)
        self.requests = {
            reason: requests.labels(*labels, reason)
            for reason in (*mn.FINISHED_REASONS, mn.REJECTED)
        }
        self.prompt_tokens = metrics.family(mn.TENANT_PROMPT_TOKENS).labels(*labels)
        self.generation_tokens = metrics.family(mn.TENANT_GENERATION_TOKENS).labels(*labels)
        self.ttft = metrics.family(mn.TENANT_TIME_TO_FIRST_TOKEN).labels(*labels)


class _SpecDecodeSeries:
    """vLLM's speculative-decoding counters, bound: made only for an engine that speculates
    (as vLLM registers them), with one ``position`` series per draft position."""

    def __init__(self, metrics: EngineMetrics, num_speculative_tokens: int) -> None:
        labels, registry = metrics.labels, metrics.registry
        made = {spec.name: _create(spec, registry, 0) for spec in mn.SPEC_DECODE_SPECS}
        self.num_drafts = made[mn.SPEC_DECODE_NUM_DRAFTS.name].labels(*labels)
        self.num_draft_tokens = made[mn.SPEC_DECODE_NUM_DRAFT_TOKENS.name].labels(*labels)
        self.num_accepted_tokens = made[mn.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name].labels(*labels)
        per_pos = made[mn.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.name]
        self.per_pos = [per_pos.labels(*labels, str(i)) for i in range(num_speculative_tokens)]

    def observe(self, stats: SpecDecodingStats) -> None:
        self.num_drafts.inc(stats.num_drafts)
        self.num_draft_tokens.inc(stats.num_draft_tokens)
        self.num_accepted_tokens.inc(stats.num_accepted_tokens)
        for counter, accepted in zip(self.per_pos, stats.num_accepted_tokens_per_pos, strict=True):
            counter.inc(accepted)


class EngineMetrics:
    """vLLM's metric families for one engine, plus ``tailwatch:`` per-tenant series.

    ``knobs`` (name → value, e.g. ``AsyncEngine.knobs()``) become the labels of
    ``vllm:cache_config_info``; values render as ``str(value)``, as vLLM's do. Without a
    ``registry`` a private one is made, so several engines can live in one process.
    ``instance_id`` labels ``tailwatch:engine_info`` (the server passes the one its spans
    carry as ``service.instance.id``); None makes a fresh UUID. ``num_speculative_tokens``
    (an engine that speculates) registers vLLM's ``vllm:spec_decode_*`` counters at once;
    otherwise they appear with the first step that verified drafts, if any.
    """

    def __init__(
        self,
        model_name: str,
        knobs: Mapping[str, Any],
        engine_index: str = "0",
        registry: CollectorRegistry | None = None,
        max_model_len: int = 2048,
        instance_id: str | None = None,
        num_speculative_tokens: int | None = None,
    ) -> None:
        self._knobs = dict(knobs)
        bad = [k for k in self._knobs if not _LABEL_NAME.fullmatch(k) or k == mn.LABEL_ENGINE]
        if bad:
            raise ConfigError(
                f"knob names {bad}: not usable as vllm:cache_config_info label names; "
                "use [a-zA-Z_][a-zA-Z0-9_]* and not 'engine'"
            )
        self.registry = registry if registry is not None else CollectorRegistry()
        self.model_name = model_name = safe_text(model_name, MAX_LABEL_VALUE_CHARS)
        self.engine_index = str(engine_index)
        self.labels = (model_name, self.engine_index)
        self._families: dict[str, Counter | Gauge | Histogram] = {
            spec.name: _create(spec, self.registry, max_model_len) for spec in mn.ALL_SPECS
        }
        self._lock = threading.Lock()
        self._bind_children()
        self.instance_id = instance_id or str(uuid.uuid4())
        self.family(mn.ENGINE_INFO).labels(*self.labels, self.instance_id).set(1)
        self._info = Gauge(
            mn.CACHE_CONFIG_INFO_NAME,
            mn.CACHE_CONFIG_INFO_HELP,
            [*self._knobs, mn.LABEL_ENGINE],
            registry=self.registry,
        )
        self._info_labels = self._knob_labels()
        self._info.labels(*self._info_labels).set(1)
        self._tenants: dict[str, _TenantSeries] = {}
        self._last_token_time: dict[str, float] = {}
        self._last_step_index = 0
        self._num_prefix_queries = 0
        self._num_prefix_hits = 0
        self._num_preemptions = 0
        self._lora: LoRAMetrics | None = None
        self._num_grammar_hits = 0
        self._num_grammar_misses = 0
        self._spec: _SpecDecodeSeries | None = None
        if num_speculative_tokens is not None:
            self._spec = _SpecDecodeSeries(self, num_speculative_tokens)

    def enable_lora(self) -> None:
        """Add the LoRA series (``engine/lora/metrics.py``), as vLLM does when LoRA is on."""
        from engine.lora.metrics import LoRAMetrics

        if self._lora is None:
            self._lora = LoRAMetrics(self.registry, self.labels, self._lock)

    def set_start_time(self, unix_seconds: float) -> None:
        """When this engine's process started (``tailwatch:engine_start_time_seconds``)."""
        self.family(mn.ENGINE_START_TIME).labels(*self.labels).set(unix_seconds)

    def set_startup_phase(self, phase: str, seconds: float) -> None:
        """How long a start-up phase took (``mn.STARTUP_PHASES``); set once it ends."""
        if phase not in mn.STARTUP_PHASES:
            raise ValueError(f"phase={phase!r}: must be one of {', '.join(mn.STARTUP_PHASES)}")
        self.family(mn.STARTUP_PHASE_SECONDS).labels(*self.labels, phase).set(seconds)

    def mark_simulated(self, gpu: str, tensor_parallel_size: int = 1) -> None:
        """Label this engine's series as a simulation on ``tensor_parallel_size`` x ``gpu``
        (engine/sim)."""
        family = self.family(mn.SIMULATION_INFO)
        family.labels(*self.labels, gpu, "true", str(tensor_parallel_size)).set(1)

    def family(self, spec: mn.MetricSpec) -> Any:
        return self._families[spec.name]

    def _bind_children(self) -> None:
        labels, f = self.labels, self.family
        self._running = f(mn.NUM_REQUESTS_RUNNING).labels(*labels)
        self._waiting = f(mn.NUM_REQUESTS_WAITING).labels(*labels)
        self._kv_usage = f(mn.KV_CACHE_USAGE).labels(*labels)
        self._prefix_queries = f(mn.PREFIX_CACHE_QUERIES).labels(*labels)
        self._prefix_hits = f(mn.PREFIX_CACHE_HITS).labels(*labels)
        self._preemptions = f(mn.NUM_PREEMPTIONS).labels(*labels)
        self._prompt_tokens = f(mn.PROMPT_TOKENS).labels(*labels)
        by_source = f(mn.PROMPT_TOKENS_BY_SOURCE)
        self._prompt_by_source = {s: by_source.labels(*labels, s) for s in mn.PROMPT_TOKEN_SOURCES}
        self._prompt_cached = f(mn.PROMPT_TOKENS_CACHED).labels(*labels)
        self._generation_tokens = f(mn.GENERATION_TOKENS).labels(*labels)
        success = f(mn.REQUEST_SUCCESS)
        self._success = {r: success.labels(*labels, r) for r in mn.FINISHED_REASONS}
        for reason in mn.ADMISSION_REJECTION_REASONS:
            f(mn.ADMISSION_REJECTIONS).labels(self.model_name, reason)
        self._iteration_tokens = f(mn.ITERATION_TOKENS).labels(*labels)
        self._grammar_hits = f(mn.STRUCTURED_OUTPUT_CACHE_HITS).labels(*labels)
        self._grammar_misses = f(mn.STRUCTURED_OUTPUT_CACHE_MISSES).labels(*labels)
        self._grammar_compile = f(mn.STRUCTURED_OUTPUT_COMPILE_SECONDS).labels(*labels)
        kinds = f(mn.STRUCTURED_OUTPUT_REQUESTS)
        self._structured = {k: kinds.labels(*labels, k) for k in mn.STRUCTURED_OUTPUT_KINDS}
        finished = f(mn.STRUCTURED_OUTPUT_FINISHED)
        self._structured_finished = {r: finished.labels(*labels, r) for r in mn.FINISHED_REASONS}
        self._ttft = f(mn.TIME_TO_FIRST_TOKEN).labels(*labels)
        self._itl = f(mn.INTER_TOKEN_LATENCY).labels(*labels)
        self._per_request = {
            spec.name: f(spec).labels(*labels)
            for spec in (
                mn.REQUEST_PROMPT_TOKENS,
                mn.REQUEST_GENERATION_TOKENS,
                mn.REQUEST_MAX_NUM_GENERATION_TOKENS,
                mn.REQUEST_PARAMS_N,
                mn.REQUEST_PARAMS_MAX_TOKENS,
                mn.REQUEST_PREFILL_KV_COMPUTED_TOKENS,
                mn.REQUEST_NUM_PREEMPTIONS,
                mn.REQUEST_TIME_PER_OUTPUT_TOKEN,
                mn.E2E_REQUEST_LATENCY,
                mn.REQUEST_QUEUE_TIME,
                mn.REQUEST_INFERENCE_TIME,
                mn.REQUEST_PREFILL_TIME,
                mn.REQUEST_DECODE_TIME,
            )
        }

    # -- EngineObserver ----------------------------------------------------------------------

    def on_step(
        self,
        engine: LLMEngine,
        outputs: Sequence[RequestOutput],
        handles: Mapping[str, RequestHandle],
    ) -> None:
        """Record one step's outputs (or an abort's), then the scheduler's state.

        The warm-up request (``handle.is_warm_up``) counts nowhere: a step that served only
        it moves no counter or histogram, only the gauges."""
        generated: dict[str | None, int] = {}  # tokens per tenant, counted once per step
        num_client_outputs = 0
        for out in outputs:
            handle = handles.get(out.request_id)
            if handle is not None and handle.is_warm_up:
                continue
            num_client_outputs += 1
            tenant = handle.tenant if handle is not None else None
            if out.new_token_ids:
                generated[tenant] = generated.get(tenant, 0) + len(out.new_token_ids)
            self._observe_output(out, handle, tenant)
        # NOTE: a step shared by the warm-up and client requests counts in full (its tokens
        # are not split per request); only the start-up steps are left out.
        is_warm_up_only = bool(outputs) and not num_client_outputs
        step = engine.last_step
        # NOTE: an abort delivers outputs without a step; the step index tells them apart.
        if step.step_index != self._last_step_index:
            self._last_step_index = step.step_index
            if step.num_requests and not is_warm_up_only:
                self._iteration_tokens.observe(step.num_prompt_tokens + step.num_generation_tokens)
            spec = step.spec_decoding
            if spec is not None and spec.num_drafts and not is_warm_up_only:
                if self._spec is None:
                    self._spec = _SpecDecodeSeries(self, len(spec.num_accepted_tokens_per_pos))
                self._spec.observe(spec)
        if generated:
            self._generation_tokens.inc(sum(generated.values()))
            for tenant, num_tokens in generated.items():
                self._tenant(tenant).generation_tokens.inc(num_tokens)
        self._observe_scheduler(engine.stats(), count=not is_warm_up_only)
        if self._lora is not None:
            self._lora.on_step(engine, outputs, handles)
        self._observe_grammar_cache(engine.grammar_cache_stats())

    def on_knob_changes(self, changes: Sequence[KnobChange]) -> None:
        """Count each change and re-label ``vllm:cache_config_info`` (old set removed)."""
        if not changes:
            return
        counter = self.family(mn.KNOB_CHANGES)
        for change in changes:
            counter.labels(*self.labels, change.knob).inc()
            if change.knob in self._knobs:
                self._knobs[change.knob] = change.new_value
        with self._lock:
            new = self._knob_labels()
            if new != self._info_labels:
                self._info.remove(*self._info_labels)
                self._info.labels(*new).set(1)
                self._info_labels = new

    def on_rejected(self, reason: str, tenant: str | None) -> None:
        self.family(mn.ADMISSION_REJECTIONS).labels(self.model_name, reason).inc()
        self._tenant(tenant).requests[mn.REJECTED].inc()

    # -- front end ---------------------------------------------------------------------------

    def observe_http_response(self, status_code: int, handler: str = mn.UNMATCHED_HANDLER) -> None:
        """Count one response by status code and ``handler``, the route template that served
        it (``/v1/completions``; ``none`` when no route matched)."""
        family = self.family(mn.HTTP_RESPONSES)
        family.labels(self.model_name, str(int(status_code)), handler).inc()

    def render(self, accept_header: str | None) -> tuple[bytes, str]:
        """The exposition and its content type: OpenMetrics 1.0 (with exemplars) when
        ``Accept`` lists ``application/openmetrics-text``, else Prometheus text 0.0.4."""
        with self._lock:
            try:
                return _render(self.registry, accept_header)
            except (UnicodeError, ValueError):
                # NOTE: label values are made safe where they are set; should one get
                # through anyway, the scrape still answers, with it made safe here.
                logger.exception("rendering /metrics failed; rendering safe label values")
                return _render(_SafeLabels(self.registry), accept_header)

    # -- internals ---------------------------------------------------------------------------

    def _knob_labels(self) -> tuple[str, ...]:
        return (*(str(v) for v in self._knobs.values()), self.engine_index)

    def _tenant(self, tenant: str | None) -> _TenantSeries:
        label = mn.NO_TENANT if tenant is None else tenant
        # NOTE: looked up before it is made safe: every key is already safe (safe_text
        # leaves its own output unchanged), so a known tenant costs a dict lookup per step.
        series = self._tenants.get(label)
        if series is not None:
            return series
        label = safe_text(label, MAX_LABEL_VALUE_CHARS)
        with self._lock:
            if label not in self._tenants and len(self._tenants) >= mn.MAX_TENANTS:
                label = mn.OTHER_TENANT
            if label not in self._tenants:
                self._tenants[label] = _TenantSeries(self, label)
            return self._tenants[label]

    def _observe_output(
        self, out: RequestOutput, handle: RequestHandle | None, tenant_name: str | None
    ) -> None:
        trace_id = handle.trace_id if handle is not None else None
        exemplar = {"trace_id": trace_id} if trace_id else None
        num_new = len(out.new_token_ids)
        if num_new and out.token_time is not None:
            if out.num_output_tokens == num_new:  # the first token: prefill is complete
                tenant = self._tenant(tenant_name)
                ttft = out.token_time - out.arrival_time
                self._ttft.observe(ttft, exemplar)
                tenant.ttft.observe(ttft, exemplar)
                self._count_prompt(out, tenant)
            else:
                previous = self._last_token_time.get(out.request_id)
                if previous is not None:
                    self._itl.observe(out.token_time - previous, exemplar)
            self._last_token_time[out.request_id] = out.token_time
        if out.finished:
            self._last_token_time.pop(out.request_id, None)
            compile_ = out.timings.grammar_compile if out.timings is not None else None
            if compile_ is not None:
                # NOTE: when the request ends, whatever the end: its compile was paid
                self._structured[compile_.kind].inc()
                if not compile_.cache_hit:
                    self._grammar_compile.observe(compile_.compile_seconds)
            reason = out.finish_reason or "error"
            success = self._success.get(reason)
            if success is None:
                success = self.family(mn.REQUEST_SUCCESS).labels(*self.labels, reason)
            success.inc()
            if compile_ is not None:
                structured = self._structured_finished.get(reason)
                if structured is None:
                    family = self.family(mn.STRUCTURED_OUTPUT_FINISHED)
                    structured = family.labels(*self.labels, reason)
                structured.inc()
            tenant = self._tenant(tenant_name)
            tenant.requests[reason if reason in tenant.requests else "error"].inc()
            # NOTE: an aborted request's latencies measure the client, not the engine;
            # they stay out of the per-request histograms (TTFT/ITL already counted).
            if reason != "abort" and out.timings is not None:
                self._observe_finished(out, handle, exemplar)

    def _count_prompt(self, out: RequestOutput, tenant: _TenantSeries) -> None:
        cached = min(out.num_cached_tokens, out.num_prompt_tokens)
        self._prompt_tokens.inc(out.num_prompt_tokens)
        self._prompt_by_source["local_compute"].inc(out.num_prompt_tokens - cached)
        self._prompt_by_source["local_cache_hit"].inc(cached)
        self._prompt_cached.inc(cached)
        tenant.prompt_tokens.inc(out.num_prompt_tokens)

    def _observe_finished(
        self, out: RequestOutput, handle: RequestHandle | None, exemplar: dict[str, str] | None
    ) -> None:
        t = out.timings
        assert t is not None
        h = self._per_request
        if t.finished_time is not None:
            h[mn.E2E_REQUEST_LATENCY.name].observe(t.finished_time - t.arrival_time, exemplar)
        scheduled, first, tokens = t.first_scheduled_time, t.first_token_time, t.token_times
        if scheduled is not None:
            h[mn.REQUEST_QUEUE_TIME.name].observe(scheduled - t.arrival_time)
        if scheduled is not None and first is not None and tokens:
            decode = tokens[-1] - first
            h[mn.REQUEST_PREFILL_TIME.name].observe(first - scheduled)
            h[mn.REQUEST_DECODE_TIME.name].observe(decode)
            h[mn.REQUEST_INFERENCE_TIME.name].observe(tokens[-1] - scheduled)
            num_output = out.num_output_tokens
            tpot = decode / (num_output - 1) if num_output > 1 else 0.0
            h[mn.REQUEST_TIME_PER_OUTPUT_TOKEN.name].observe(tpot)
        h[mn.REQUEST_PROMPT_TOKENS.name].observe(out.num_prompt_tokens)
        h[mn.REQUEST_GENERATION_TOKENS.name].observe(out.num_output_tokens)
        # n is always 1 here, so the longest of the request's sequences is this one.
        h[mn.REQUEST_MAX_NUM_GENERATION_TOKENS.name].observe(out.num_output_tokens)
        h[mn.REQUEST_PARAMS_N.name].observe(1)
        if handle is not None:
            h[mn.REQUEST_PARAMS_MAX_TOKENS.name].observe(handle.params.max_tokens)
        computed = out.num_prompt_tokens - min(out.num_cached_tokens, out.num_prompt_tokens)
        h[mn.REQUEST_PREFILL_KV_COMPUTED_TOKENS.name].observe(computed)
        h[mn.REQUEST_NUM_PREEMPTIONS.name].observe(out.num_preemptions)

    def _observe_grammar_cache(self, stats: GrammarCacheStats) -> None:
        """Move the compiled-grammar cache counters by what its lookups gained."""
        self._num_grammar_hits = _advance(
            self._grammar_hits, self._num_grammar_hits, stats.num_hits
        )
        self._num_grammar_misses = _advance(
            self._grammar_misses, self._num_grammar_misses, stats.num_misses
        )

    def _observe_scheduler(self, stats: SchedulerStats, count: bool = True) -> None:
        """Set the gauges; move the counters by what the scheduler's cumulative figures
        gained, or (``count`` False: the warm-up's step) only take them as the new base."""
        self._running.set(stats.num_running)
        self._waiting.set(stats.num_waiting)
        self._kv_usage.set(stats.kv_cache_usage)
        self._num_prefix_queries = _advance(
            self._prefix_queries, self._num_prefix_queries, stats.prefix_cache_queries_tokens, count
        )
        self._num_prefix_hits = _advance(
            self._prefix_hits, self._num_prefix_hits, stats.prefix_cache_hits_tokens, count
        )
        self._num_preemptions = _advance(
            self._preemptions, self._num_preemptions, stats.num_preemptions_total, count
        )


def _render(registry: Any, accept_header: str | None) -> tuple[bytes, str]:
    if wants_openmetrics(accept_header):
        return openmetrics.generate_latest(registry, **_OM_KWARGS), OPENMETRICS_CONTENT_TYPE
    return generate_latest(registry), CONTENT_TYPE_PLAIN_0_0_4


class _SafeLabels:
    """A registry's families with every label value (and exemplar label) made safe."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._registry = registry

    def collect(self) -> Any:
        for family in self._registry.collect():
            family.samples = [
                sample._replace(
                    labels=_safe_labels(sample.labels),
                    exemplar=sample.exemplar
                    and sample.exemplar._replace(labels=_safe_labels(sample.exemplar.labels)),
                )
                for sample in family.samples
            ]
            yield family


def _safe_labels(labels: Mapping[str, str]) -> dict[str, str]:
    return {name: safe_text(value, MAX_LABEL_VALUE_CHARS) for name, value in labels.items()}


def _advance(counter: Counter, seen: int, now: int, count: bool = True) -> int:
    """Increase ``counter`` by what a cumulative figure gained (a drop is a restart);
    with ``count`` False, return the new figure without counting the gain."""
    if count:
        counter.inc(now - seen if now >= seen else now)
    return now


def _create(
    spec: mn.MetricSpec, registry: CollectorRegistry, max_model_len: int
) -> Counter | Gauge | Histogram:
    if spec.kind == "counter":
        return Counter(spec.name, spec.documentation, spec.labels, registry=registry)
    if spec.kind == "gauge":
        return Gauge(spec.name, spec.documentation, spec.labels, registry=registry)
    assert spec.buckets is not None
    buckets = (*mn.buckets_for(spec.buckets, max_model_len), INF)
    return Histogram(spec.name, spec.documentation, spec.labels, registry=registry, buckets=buckets)


def wants_openmetrics(accept_header: str | None) -> bool:
    """True when an ``Accept`` header lists ``application/openmetrics-text`` (q > 0)."""
    for media_range in (accept_header or "").split(","):
        media_type, *params = (part.strip() for part in media_range.split(";"))
        if media_type.lower() != "application/openmetrics-text":
            continue
        weights = [p.split("=", 1)[1] for p in params if p.split("=", 1)[0].strip() == "q"]
        try:
            if not weights or float(weights[0]) > 0:
                return True
        except ValueError:
            return True
    return False
