"""Metric conventions for the engine: vLLM 0.33's names, HELP strings, labels, buckets.

The wire format is vLLM's (``shared/reference/engine-metrics.md`` §1-§3), so existing
vLLM dashboards, alert rules and collectors work against this engine unchanged.
Counters are declared without ``_total``: ``prometheus_client`` appends it on the
wire, as vLLM 0.10+ does. The histogram ``vllm:iteration_tokens_total`` keeps
``_total`` in its family name, as upstream does. Series of our own live under
``tailwatch:``. Every name here is a legal classic metric name (colons included),
which ``render`` relies on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# -- labels --------------------------------------------------------------------------------

LABEL_MODEL_NAME = "model_name"
LABEL_ENGINE = "engine"
LABEL_FINISHED_REASON = "finished_reason"
LABEL_REASON = "reason"
LABEL_SOURCE = "source"
LABEL_TENANT = "tenant"
LABEL_CODE = "code"
LABEL_HANDLER = "handler"  # the route template, as prometheus-fastapi-instrumentator's
LABEL_KNOB = "knob"
LABEL_INSTANCE_ID = "instance_id"
LABEL_GPU = "gpu"
LABEL_SIMULATED = "simulated"
LABEL_TENSOR_PARALLEL_SIZE = "tensor_parallel_size"  # GPUs one simulated engine stands for
LABEL_LORA_NAME = "lora_name"
LABEL_PHASE = "phase"
LABEL_POSITION = "position"  # a draft token's position (speculative decoding), "0" first
LABEL_KIND = "kind"  # a structured output's constraint: json, json_object, regex, choice, grammar

ENGINE_LABELS = (LABEL_MODEL_NAME, LABEL_ENGINE)
FRONTEND_LABELS = (LABEL_MODEL_NAME,)  # front-end series: no engine label (as vLLM's)

FINISHED_REASONS = ("stop", "length", "abort", "error", "repetition")
REJECTED = "rejected"  # a tenant outcome next to the finished reasons
PROMPT_TOKEN_SOURCES = ("local_compute", "local_cache_hit", "external_kv_transfer")
# vLLM's two reasons, plus the per-tenant concurrency cap of our admission control.
ADMISSION_REJECTION_REASONS = ("max_num_queued_reqs", "max_num_queued_tokens", "tenant_concurrency")

NO_TENANT = ""  # requests without a tenant; PromQL treats it as the label being absent
OTHER_TENANT = "_other"  # every tenant past MAX_TENANTS shares this label value
MAX_TENANTS = 200  # NOTE: tenant names come from clients; this bounds the series count

# -- buckets (vllm/v1/metrics/buckets.py, 0.33.0 = @139b1c3f, locked by vLLM's
# tests/v1/metrics/test_histogram_buckets.py; not @3168f587's layouts: docs/metrics.md) ------

BUCKETS: dict[str, tuple[float, ...]] = {
    "time_to_first_token": (
        0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0,
        2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
    ),
    "inter_token_latency": (
        0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0,
        2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
    ),
    "request_latency": (
        0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0,
        50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0,
    ),
    "iteration_tokens": (1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384),
    "request_params_n": (1, 2, 5, 10, 20),
    "request_num_preemptions": (1, 2, 3, 4, 5, 10, 20),
    # ours: a grammar compile, from a small schema on a byte vocabulary (under a millisecond)
    # to a large one on a 128k vocabulary (seconds)
    "grammar_compile": (
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ),
}  # fmt: skip
REQUEST_TOKENS = "request_tokens"  # the one family sized by max_model_len


def build_1_2_5_buckets(max_value: int) -> tuple[int, ...]:
    """Every ``m * 10**k <= max_value`` for m in 1, 2, 5, ascending (vLLM's helper).

    >>> build_1_2_5_buckets(100)
    (1, 2, 5, 10, 20, 50, 100)
    """
    buckets: list[int] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return tuple(buckets)
            buckets.append(value)
        exponent += 1


def buckets_for(family: str, max_model_len: int) -> tuple[float, ...]:
    """Upper bounds (``+Inf`` implied) of a bucket family; token families scale with
    ``max_model_len``."""
    if family == REQUEST_TOKENS:
        return build_1_2_5_buckets(max_model_len)
    return BUCKETS[family]


# -- families ------------------------------------------------------------------------------

Kind = Literal["counter", "gauge", "histogram"]


@dataclass(frozen=True)
class MetricSpec:
    """One family as declared: counters without ``_total`` (it is added on the wire)."""

    name: str
    documentation: str
    kind: Kind
    labels: tuple[str, ...] = ENGINE_LABELS
    buckets: str | None = None  # a key of BUCKETS, or REQUEST_TOKENS


def _h(
    name: str, documentation: str, buckets: str, labels: tuple[str, ...] = ENGINE_LABELS
) -> MetricSpec:
    return MetricSpec(name, documentation, "histogram", labels, buckets)


# Scheduler state
NUM_REQUESTS_RUNNING = MetricSpec(
    "vllm:num_requests_running", "Number of requests in model execution batches.", "gauge"
)
NUM_REQUESTS_WAITING = MetricSpec(
    "vllm:num_requests_waiting", "Number of requests waiting to be processed.", "gauge"
)
KV_CACHE_USAGE = MetricSpec(
    "vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", "gauge"
)
CACHE_CONFIG_INFO_NAME = "vllm:cache_config_info"  # labels: one per knob, plus engine
CACHE_CONFIG_INFO_HELP = "Information of the LLMEngine CacheConfig"

# Counters
PREFIX_CACHE_QUERIES = MetricSpec(
    "vllm:prefix_cache_queries",
    "Prefix cache queries, in terms of number of queried tokens.",
    "counter",
)
PREFIX_CACHE_HITS = MetricSpec(
    "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens.", "counter"
)
NUM_PREEMPTIONS = MetricSpec(
    "vllm:num_preemptions", "Cumulative number of preemption from the engine.", "counter"
)
PROMPT_TOKENS = MetricSpec("vllm:prompt_tokens", "Number of prefill tokens processed.", "counter")
PROMPT_TOKENS_BY_SOURCE = MetricSpec(
    "vllm:prompt_tokens_by_source",
    "Number of prompt tokens by source.",
    "counter",
    (*ENGINE_LABELS, LABEL_SOURCE),
)
PROMPT_TOKENS_CACHED = MetricSpec(
    "vllm:prompt_tokens_cached", "Number of cached prompt tokens (local + external).", "counter"
)
GENERATION_TOKENS = MetricSpec(
    "vllm:generation_tokens", "Number of generation tokens processed.", "counter"
)
REQUEST_SUCCESS = MetricSpec(
    "vllm:request_success",
    "Count of successfully processed requests.",
    "counter",
    (*ENGINE_LABELS, LABEL_FINISHED_REASON),
)
# NOTE: HELP text not in the reference (the family postdates the pinned sources); ours.
ADMISSION_REJECTIONS = MetricSpec(
    "vllm:admission_rejections",
    "Number of requests rejected by admission control.",
    "counter",
    (LABEL_MODEL_NAME, LABEL_REASON),
)

# Histograms of counts
REQUEST_PROMPT_TOKENS = _h(
    "vllm:request_prompt_tokens", "Number of prefill tokens processed.", REQUEST_TOKENS
)
REQUEST_GENERATION_TOKENS = _h(
    "vllm:request_generation_tokens", "Number of generation tokens processed.", REQUEST_TOKENS
)
ITERATION_TOKENS = _h(
    "vllm:iteration_tokens_total",
    "Histogram of number of tokens per engine_step.",
    "iteration_tokens",
)
REQUEST_MAX_NUM_GENERATION_TOKENS = _h(
    "vllm:request_max_num_generation_tokens",
    "Histogram of maximum number of requested generation tokens.",
    REQUEST_TOKENS,
)
REQUEST_PARAMS_N = _h(
    "vllm:request_params_n", "Histogram of the n request parameter.", "request_params_n"
)
REQUEST_PARAMS_MAX_TOKENS = _h(
    "vllm:request_params_max_tokens",
    "Histogram of the max_tokens request parameter.",
    REQUEST_TOKENS,
)
REQUEST_PREFILL_KV_COMPUTED_TOKENS = _h(
    "vllm:request_prefill_kv_computed_tokens",
    "Histogram of new KV tokens computed during prefill (excluding cached tokens).",
    REQUEST_TOKENS,
)
# NOTE: HELP text not in the reference; ours.
REQUEST_NUM_PREEMPTIONS = _h(
    "vllm:request_num_preemptions",
    "Histogram of the number of preemptions per request.",
    "request_num_preemptions",
)

# Histograms of timing intervals
TIME_TO_FIRST_TOKEN = _h(
    "vllm:time_to_first_token_seconds",
    "Histogram of time to first token in seconds.",
    "time_to_first_token",
)
INTER_TOKEN_LATENCY = _h(
    "vllm:inter_token_latency_seconds",
    "Histogram of inter-token latency in seconds.",
    "inter_token_latency",
)
REQUEST_TIME_PER_OUTPUT_TOKEN = _h(
    "vllm:request_time_per_output_token_seconds",
    "Histogram of time_per_output_token_seconds per request.",
    "inter_token_latency",
)
E2E_REQUEST_LATENCY = _h(
    "vllm:e2e_request_latency_seconds",
    "Histogram of e2e request latency in seconds.",
    "request_latency",
)
REQUEST_QUEUE_TIME = _h(
    "vllm:request_queue_time_seconds",
    "Histogram of time spent in WAITING phase for request.",
    "request_latency",
)
REQUEST_INFERENCE_TIME = _h(
    "vllm:request_inference_time_seconds",
    "Histogram of time spent in RUNNING phase for request.",
    "request_latency",
)
REQUEST_PREFILL_TIME = _h(
    "vllm:request_prefill_time_seconds",
    "Histogram of time spent in PREFILL phase for request.",
    "request_latency",
)
REQUEST_DECODE_TIME = _h(
    "vllm:request_decode_time_seconds",
    "Histogram of time spent in DECODE phase for request.",
    "request_latency",
)

# tailwatch: extras
_TENANT_LABELS = (*ENGINE_LABELS, LABEL_TENANT)
TENANT_REQUESTS = MetricSpec(
    "tailwatch:tenant_requests",
    "Requests per tenant by outcome: a finished reason, or rejected at admission.",
    "counter",
    (*_TENANT_LABELS, LABEL_FINISHED_REASON),
)
TENANT_PROMPT_TOKENS = MetricSpec(
    "tailwatch:tenant_prompt_tokens",
    "Prompt tokens per tenant (cached included), counted when prefill completes.",
    "counter",
    _TENANT_LABELS,
)
TENANT_GENERATION_TOKENS = MetricSpec(
    "tailwatch:tenant_generation_tokens",
    "Generation tokens per tenant.",
    "counter",
    _TENANT_LABELS,
)
TENANT_TIME_TO_FIRST_TOKEN = _h(
    "tailwatch:tenant_time_to_first_token_seconds",
    "Histogram of time to first token in seconds, per tenant.",
    "time_to_first_token",
    _TENANT_LABELS,
)
#: The ``handler`` of a request no route matched (a 404), as prometheus-fastapi-instrumentator
#: names it: the path itself would let any client add series.
UNMATCHED_HANDLER = "none"
#: Routes whose responses are the API's (the OpenAI routes); every other handler is a probe,
#: a scrape or the admin API, which error and 429 rates must not count.
API_HANDLER_PREFIX = "/v1/"
HTTP_RESPONSES = MetricSpec(
    "tailwatch:http_responses",
    "HTTP responses sent by the engine server, by status code and route template (handler).",
    "counter",
    (LABEL_MODEL_NAME, LABEL_CODE, LABEL_HANDLER),
)
KNOB_CHANGES = MetricSpec(
    "tailwatch:knob_changes",
    "Live knob changes applied between engine steps, by knob.",
    "counter",
    (*ENGINE_LABELS, LABEL_KNOB),
)

# Speculative decoding: vLLM's four counters (vllm/v1/spec_decode/metrics.py), registered only
# when speculation is on, as vLLM registers them; per_pos has one series per draft position.
SPEC_DECODE_NUM_DRAFTS = MetricSpec(
    "vllm:spec_decode_num_drafts", "Number of spec decoding drafts.", "counter"
)
SPEC_DECODE_NUM_DRAFT_TOKENS = MetricSpec(
    "vllm:spec_decode_num_draft_tokens", "Number of draft tokens.", "counter"
)
SPEC_DECODE_NUM_ACCEPTED_TOKENS = MetricSpec(
    "vllm:spec_decode_num_accepted_tokens", "Number of accepted tokens.", "counter"
)
SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS = MetricSpec(
    "vllm:spec_decode_num_accepted_tokens_per_pos",
    "Accepted tokens per draft position.",
    "counter",
    (*ENGINE_LABELS, LABEL_POSITION),
)
SPEC_DECODE_SPECS: tuple[MetricSpec, ...] = (
    SPEC_DECODE_NUM_DRAFTS,
    SPEC_DECODE_NUM_DRAFT_TOKENS,
    SPEC_DECODE_NUM_ACCEPTED_TOKENS,
    SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS,
)

# Structured outputs: vLLM exports nothing about grammar compiles; these are ours.
STRUCTURED_OUTPUT_REQUESTS = MetricSpec(
    "tailwatch:structured_output_requests",
    "Structured-output requests that joined the engine, by constraint kind.",
    "counter",
    (*ENGINE_LABELS, LABEL_KIND),
)
STRUCTURED_OUTPUT_CACHE_HITS = MetricSpec(
    "tailwatch:structured_output_cache_hits",
    "Structured-output requests whose compiled grammar was cached.",
    "counter",
)
STRUCTURED_OUTPUT_CACHE_MISSES = MetricSpec(
    "tailwatch:structured_output_cache_misses",
    "Structured-output requests whose grammar was compiled (not cached).",
    "counter",
)
STRUCTURED_OUTPUT_COMPILE_SECONDS = _h(
    "tailwatch:structured_output_compile_seconds",
    "Histogram of grammar compile time in seconds (cache misses only).",
    "grammar_compile",
)
#: Structured-output requests that finished, by how: ``length`` is a structured answer cut
#: at ``max_tokens`` before its object closed (invalid); vLLM's ``request_success`` counts
#: every request, where plain ones that run to ``max_tokens`` also end with ``length``.
STRUCTURED_OUTPUT_FINISHED = MetricSpec(
    "tailwatch:structured_output_finished",
    "Structured-output requests that finished, by finished_reason.",
    "counter",
    (*ENGINE_LABELS, LABEL_FINISHED_REASON),
)
STRUCTURED_OUTPUT_KINDS = ("json", "json_object", "regex", "choice", "grammar")

# NOTE: the join key between this engine's scrapes and its spans: the same id is the
# spans' resource ``service.instance.id``, so a collector can tell which scrape target served
# a traced request whatever the target is called (docs/collectors.md, "Replica to target").
ENGINE_INFO = MetricSpec(
    "tailwatch:engine_info",
    "This engine process: its instance id (the service.instance.id of its spans); always 1.",
    "gauge",
    (*ENGINE_LABELS, LABEL_INSTANCE_ID),
)

# NOTE: set only by a simulated engine (``sim:<model>@<gpu>``), so a dashboard or a
# collector can tell simulated series from production ones even under a served name.
SIMULATION_INFO = MetricSpec(
    "tailwatch:engine_simulation_info",
    "This engine is simulated: its steps are priced by a roofline model of this GPU; always 1.",
    "gauge",
    (*ENGINE_LABELS, LABEL_GPU, LABEL_SIMULATED, LABEL_TENSOR_PARALLEL_SIZE),
)

# -- LoRA (``engine/lora/metrics.py``; registered only when LoRA is on, as vLLM's) ---------

#: vLLM's own: a gauge whose value is the time of the last update (unix seconds) and whose
#: labels carry the state: the running and waiting adapters' names, comma-joined, and
#: max_loras. Only these three labels (no model_name, no engine), in vLLM's order.
LORA_REQUESTS_INFO_NAME = "vllm:lora_requests_info"
LORA_REQUESTS_INFO_HELP = "Running stats on lora requests."
LABEL_MAX_LORA = "max_lora"
LABEL_WAITING_LORA_ADAPTERS = "waiting_lora_adapters"
LABEL_RUNNING_LORA_ADAPTERS = "running_lora_adapters"
LORA_REQUESTS_INFO_LABELS = (
    LABEL_MAX_LORA,
    LABEL_WAITING_LORA_ADAPTERS,
    LABEL_RUNNING_LORA_ADAPTERS,
)
NO_ADAPTER = ""  # lora_name of the base model's requests (PromQL: the label is absent)
OTHER_ADAPTER = "_other"  # every adapter name past MAX_ADAPTERS shares this label value
MAX_ADAPTERS = 200  # NOTE: adapters can be loaded at run time; this bounds the series
_LORA_LABELS = (*ENGINE_LABELS, LABEL_LORA_NAME)
LORA_REQUESTS = MetricSpec(
    "tailwatch:lora_requests",
    "Finished requests per LoRA adapter (lora_name empty: the base model), by finished reason.",
    "counter",
    (*_LORA_LABELS, LABEL_FINISHED_REASON),
)
LORA_LOADS = MetricSpec(
    "tailwatch:lora_loads",
    "Cold loads of a LoRA adapter (not loaded when a request or the API needed it).",
    "counter",
    _LORA_LABELS,
)
LORA_LOAD_SECONDS = MetricSpec(
    "tailwatch:lora_load_seconds",
    "Seconds spent loading a LoRA adapter (reading it plus the storage latency), cumulative.",
    "counter",
    _LORA_LABELS,
)
LORA_RESIDENT_ADAPTERS = MetricSpec(
    "tailwatch:lora_resident_adapters",
    "LoRA adapters loaded now (at most max_cpu_loras).",
    "gauge",
)
LORA_TIME_TO_FIRST_TOKEN = _h(
    "tailwatch:lora_time_to_first_token_seconds",
    "Histogram of time to first token in seconds, per LoRA adapter.",
    "time_to_first_token",
    _LORA_LABELS,
)
LORA_E2E_REQUEST_LATENCY = _h(
    "tailwatch:lora_e2e_request_latency_seconds",
    "Histogram of e2e request latency in seconds, per LoRA adapter.",
    "request_latency",
    _LORA_LABELS,
)
LORA_SPECS: tuple[MetricSpec, ...] = (
    LORA_REQUESTS,
    LORA_LOADS,
    LORA_LOAD_SECONDS,
    LORA_RESIDENT_ADAPTERS,
    LORA_TIME_TO_FIRST_TOKEN,
    LORA_E2E_REQUEST_LATENCY,
)

# -- start-up (``engine/startup.py``) -----------------------------------------------------

#: NOTE: vLLM exports no start-up metric (its start-up times are log lines only); SGLang's
#: ``sglang:startup_time_seconds{phase}`` is the nearest. Ours, per phase of this process:
#: ``model_load`` (process start to model loaded, imports and KV allocation included),
#: ``warm_up`` (the warm-up request), ``ready`` (process start to ready: their sum and the
#: gaps between them). A phase not reached yet has no series.
STARTUP_PHASES = ("model_load", "warm_up", "ready")
STARTUP_PHASE_SECONDS = MetricSpec(
    "tailwatch:startup_phase_seconds",
    "Seconds each start-up phase of this engine process took (model_load, warm_up, ready).",
    "gauge",
    (*ENGINE_LABELS, LABEL_PHASE),
)
ENGINE_START_TIME = MetricSpec(
    "tailwatch:engine_start_time_seconds",
    "Unix time this engine process started.",
    "gauge",
)

# Span delivery (``engine/span_metrics.py``): read from the tracer at scrape time, so not
# in ALL_SPECS; exposed only while tracing is on.
TRACE_SPANS_ENDED = "tailwatch:trace_spans_ended"
TRACE_SPANS_EXPORTED = "tailwatch:trace_spans_exported"
TRACE_SPANS_EXPORT_FAILED = "tailwatch:trace_spans_export_failed"

ALL_SPECS: tuple[MetricSpec, ...] = (
    NUM_REQUESTS_RUNNING,
    NUM_REQUESTS_WAITING,
    KV_CACHE_USAGE,
    PREFIX_CACHE_QUERIES,
    PREFIX_CACHE_HITS,
    NUM_PREEMPTIONS,
    PROMPT_TOKENS,
    PROMPT_TOKENS_BY_SOURCE,
    PROMPT_TOKENS_CACHED,
    GENERATION_TOKENS,
    REQUEST_SUCCESS,
    ADMISSION_REJECTIONS,
    REQUEST_PROMPT_TOKENS,
    REQUEST_GENERATION_TOKENS,
    ITERATION_TOKENS,
    REQUEST_MAX_NUM_GENERATION_TOKENS,
    REQUEST_PARAMS_N,
    REQUEST_PARAMS_MAX_TOKENS,
    REQUEST_PREFILL_KV_COMPUTED_TOKENS,
    REQUEST_NUM_PREEMPTIONS,
    TIME_TO_FIRST_TOKEN,
    INTER_TOKEN_LATENCY,
    REQUEST_TIME_PER_OUTPUT_TOKEN,
    E2E_REQUEST_LATENCY,
    REQUEST_QUEUE_TIME,
    REQUEST_INFERENCE_TIME,
    REQUEST_PREFILL_TIME,
    REQUEST_DECODE_TIME,
    TENANT_REQUESTS,
    TENANT_PROMPT_TOKENS,
    TENANT_GENERATION_TOKENS,
    TENANT_TIME_TO_FIRST_TOKEN,
    HTTP_RESPONSES,
    KNOB_CHANGES,
    ENGINE_INFO,
    SIMULATION_INFO,
    STARTUP_PHASE_SECONDS,
    ENGINE_START_TIME,
    STRUCTURED_OUTPUT_REQUESTS,
    STRUCTURED_OUTPUT_CACHE_HITS,
    STRUCTURED_OUTPUT_CACHE_MISSES,
    STRUCTURED_OUTPUT_COMPILE_SECONDS,
    STRUCTURED_OUTPUT_FINISHED,
)
