"""Conventions of ``collectors``: the canonical families, their labels, and the plain data
types a dialect produces (``shared/DESIGN.md``, "Canonical families").

Every dialect maps onto these names; nothing else in ``collectors`` spells a canonical
family or label as a literal.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

# -- labels --------------------------------------------------------------------------------

LABEL_TARGET = "target"
LABEL_MODEL = "model"
LABEL_TENANT = "tenant"
LABEL_FINISHED_REASON = "finished_reason"
LABEL_CODE = "code"
LABEL_HANDLER = "handler"  # the route template that answered (``/v1/completions``)
LABEL_LE = "le"
LABEL_INSTANCE_ID = "instance_id"  # an engine process's id: its spans' service.instance.id
LABEL_LORA_NAME = "lora_name"  # a LoRA adapter's name ("" for the base model's requests)
LABEL_PHASE = "phase"  # a start-up phase: model_load, warm_up, ready

#: Labels that split a family into a breakdown of series that also exist without them
#: (the bundled engine exports per-tenant series next to its fleet-wide ones).
#: NOTE: a selector that does not name a breakdown label must not pick up such series, or
#: every sum would count the same requests twice (see ``collectors.store``).
BREAKDOWN_LABELS = (LABEL_TENANT,)

# -- families ------------------------------------------------------------------------------


class Kind(enum.Enum):
    """What a canonical family is on the wire."""

    COUNTER = "counter"
    GAUGE = "gauge"
    HISTOGRAM = "histogram"


TTFT_SECONDS = "ttft_seconds"
ITL_SECONDS = "itl_seconds"
E2E_SECONDS = "e2e_seconds"
QUEUE_SECONDS = "queue_seconds"
PREFILL_SECONDS = "prefill_seconds"
DECODE_SECONDS = "decode_seconds"
PROMPT_TOKENS = "prompt_tokens"
GENERATION_TOKENS = "generation_tokens"

PROMPT_TOKENS_TOTAL = "prompt_tokens_total"
GENERATION_TOKENS_TOTAL = "generation_tokens_total"
PREEMPTIONS_TOTAL = "preemptions_total"
PREFIX_CACHE_QUERIES_TOTAL = "prefix_cache_queries_total"
PREFIX_CACHE_HITS_TOTAL = "prefix_cache_hits_total"
REQUESTS_TOTAL = "requests_total"
#: The API's HTTP responses, by ``code`` (and ``handler`` where the engine labels it): only
#: the ``/v1/`` routes (:data:`API_HANDLER_PREFIX`), so probes and scrapes, answered many
#: times a minute, never dilute an error or 429 rate (``collectors.dialect_rules``).
HTTP_RESPONSES_TOTAL = "http_responses_total"
#: The routes whose responses are the API's: OpenAI's ``/v1/...``.
API_HANDLER_PREFIX = "/v1/"

#: Speculative decoding (vLLM's ``spec_decode_*`` counters): drafts verified, their tokens, the
#: tokens accepted, and those accepted per draft ``position`` (label kept, "0" first).
SPEC_DECODE_DRAFTS_TOTAL = "spec_decode_drafts_total"
SPEC_DECODE_DRAFT_TOKENS_TOTAL = "spec_decode_draft_tokens_total"
SPEC_DECODE_ACCEPTED_TOKENS_TOTAL = "spec_decode_accepted_tokens_total"
SPEC_DECODE_ACCEPTED_TOKENS_PER_POS_TOTAL = "spec_decode_accepted_tokens_per_pos_total"
#: SGLang's speculative decoding gauges (``sglang:spec_accept_rate``, ``…_length``): the last
#: logging interval's accepted over draft tokens (0..1), and tokens a verify step yields
#: (the bonus token included); no counters to take a window's difference of.
SPEC_ACCEPT_RATE = "spec_accept_rate"
SPEC_ACCEPT_LENGTH = "spec_accept_length"
#: Structured outputs (the bundled engine's ``tailwatch:structured_output_*``): requests by
#: constraint ``kind``, compiled-grammar cache hits and misses, and the compiles' seconds.
STRUCTURED_OUTPUT_REQUESTS_TOTAL = "structured_output_requests_total"
STRUCTURED_OUTPUT_CACHE_HITS_TOTAL = "structured_output_cache_hits_total"
STRUCTURED_OUTPUT_CACHE_MISSES_TOTAL = "structured_output_cache_misses_total"
STRUCTURED_OUTPUT_COMPILE_SECONDS = "structured_output_compile_seconds"
#: Structured-output requests finished, by ``finished_reason`` (``length``: cut before closing).
STRUCTURED_OUTPUT_FINISHED_TOTAL = "structured_output_finished_total"

REQUESTS_RUNNING = "requests_running"
REQUESTS_WAITING = "requests_waiting"
KV_CACHE_USAGE = "kv_cache_usage"  # a 0..1 fraction
ENGINE_INFO = "engine_info"  # 1, labelled with the engine's instance_id (replica → target)

# LoRA (the bundled engine's per-adapter series, and vLLM's info gauge)
LORA_REQUESTS_TOTAL = "lora_requests_total"  # finished requests by lora_name, finished_reason
LORA_LOADS_TOTAL = "lora_loads_total"  # cold loads by lora_name
LORA_LOAD_SECONDS_TOTAL = "lora_load_seconds_total"  # seconds spent loading, by lora_name
LORA_RESIDENT_ADAPTERS = "lora_resident_adapters"  # adapters loaded now
LORA_TTFT_SECONDS = "lora_ttft_seconds"  # TTFT by lora_name
LORA_E2E_SECONDS = "lora_e2e_seconds"  # e2e latency by lora_name
#: vLLM's: value the unix time of the update; labels max_lora, running_lora_adapters and
#: waiting_lora_adapters (names comma-joined).
LORA_REQUESTS_INFO = "lora_requests_info"
#: SGLang's: the adapter slots of the GPU pool (``max_loras_per_batch``); those occupied are
#: ``LORA_RESIDENT_ADAPTERS``
LORA_POOL_SLOTS = "lora_pool_slots"
# Start-up (the bundled engine's; vLLM exports none)
STARTUP_PHASE_SECONDS = "startup_phase_seconds"  # by phase
ENGINE_START_TIME_SECONDS = "engine_start_time_seconds"  # unix time the process started
#: The first token as a client sees it, in front of the engines: a gateway's or a load
#: generator's (Dynamo's frontend, ``tailwatch:client_time_to_first_token_seconds``). Its gap
#: over :data:`TTFT_SECONDS` is time spent outside the engines (proxy, network, TLS, auth).
CLIENT_TTFT_SECONDS = "client_ttft_seconds"

FAMILIES: dict[str, Kind] = {
    TTFT_SECONDS: Kind.HISTOGRAM,
    ITL_SECONDS: Kind.HISTOGRAM,
    E2E_SECONDS: Kind.HISTOGRAM,
    QUEUE_SECONDS: Kind.HISTOGRAM,
    PREFILL_SECONDS: Kind.HISTOGRAM,
    DECODE_SECONDS: Kind.HISTOGRAM,
    PROMPT_TOKENS: Kind.HISTOGRAM,
    GENERATION_TOKENS: Kind.HISTOGRAM,
    PROMPT_TOKENS_TOTAL: Kind.COUNTER,
    GENERATION_TOKENS_TOTAL: Kind.COUNTER,
    PREEMPTIONS_TOTAL: Kind.COUNTER,
    PREFIX_CACHE_QUERIES_TOTAL: Kind.COUNTER,
    PREFIX_CACHE_HITS_TOTAL: Kind.COUNTER,
    REQUESTS_TOTAL: Kind.COUNTER,
    HTTP_RESPONSES_TOTAL: Kind.COUNTER,
    SPEC_DECODE_DRAFTS_TOTAL: Kind.COUNTER,
    SPEC_DECODE_DRAFT_TOKENS_TOTAL: Kind.COUNTER,
    SPEC_DECODE_ACCEPTED_TOKENS_TOTAL: Kind.COUNTER,
    SPEC_DECODE_ACCEPTED_TOKENS_PER_POS_TOTAL: Kind.COUNTER,
    STRUCTURED_OUTPUT_REQUESTS_TOTAL: Kind.COUNTER,
    STRUCTURED_OUTPUT_CACHE_HITS_TOTAL: Kind.COUNTER,
    STRUCTURED_OUTPUT_CACHE_MISSES_TOTAL: Kind.COUNTER,
    STRUCTURED_OUTPUT_COMPILE_SECONDS: Kind.HISTOGRAM,
    STRUCTURED_OUTPUT_FINISHED_TOTAL: Kind.COUNTER,
    REQUESTS_RUNNING: Kind.GAUGE,
    REQUESTS_WAITING: Kind.GAUGE,
    KV_CACHE_USAGE: Kind.GAUGE,
    ENGINE_INFO: Kind.GAUGE,
    LORA_REQUESTS_TOTAL: Kind.COUNTER,
    LORA_LOADS_TOTAL: Kind.COUNTER,
    LORA_LOAD_SECONDS_TOTAL: Kind.COUNTER,
    LORA_RESIDENT_ADAPTERS: Kind.GAUGE,
    LORA_TTFT_SECONDS: Kind.HISTOGRAM,
    LORA_E2E_SECONDS: Kind.HISTOGRAM,
    LORA_REQUESTS_INFO: Kind.GAUGE,
    STARTUP_PHASE_SECONDS: Kind.GAUGE,
    ENGINE_START_TIME_SECONDS: Kind.GAUGE,
    LORA_POOL_SLOTS: Kind.GAUGE,
    SPEC_ACCEPT_RATE: Kind.GAUGE,
    SPEC_ACCEPT_LENGTH: Kind.GAUGE,
    CLIENT_TTFT_SECONDS: Kind.HISTOGRAM,
}


class Flag(enum.Enum):
    """A way a mapped series differs from the canonical meaning. Flags travel with every
    sample and are stored with the series; windows refuse to merge series whose flags differ.
    """

    RENAMED = "renamed"  # read from a name the engine has since renamed (old vLLM, old Dynamo)
    UNIT_CONVERTED = "unit_converted"  # ms or µs scaled to seconds
    TOKEN_WEIGHTED = "token_weighted"  # ITL whose _count is tokens, not engine steps (SGLang)
    PER_BATCH = "per_batch"  # one observation per batch, not per request (TGI prefill/decode)
    BLOCKS_OR_TOKENS = "blocks_or_tokens"  # old vLLM prefix counters: blocks before ≈0.9
    HTTP_LEVEL = "http_level"  # counts HTTP requests in flight, not scheduled ones (Dynamo)
    INCLUDES_PREFILL = "includes_prefill"  # "waiting" counts requests until first token
    COARSE_REASON = "coarse_reason"  # finished_reason is success/error, not stop/length/…
    NO_REASON = "no_reason"  # finished requests without any finished_reason
    PER_FINISHED_REQUEST = "per_finished_request"  # token counter bumped when a request ends
    PER_VALIDATED_REQUEST = "per_validated_request"  # observed at validation, before queueing (TGI)
    EXCLUDES_CACHED = "excludes_cached"  # prompt tokens without the prefix-cached ones (llama.cpp)
    FROM_HISTOGRAM_SUM = "from_histogram_sum"  # a counter read from a histogram's _sum
    FIRST_RESPONSE = "first_response"  # first response, not first streamed token (Triton)
    BEFORE_BACKEND = "before_backend"  # queued in the server before any backend took it (Triton)
    TYPE_ASSUMED = "type_assumed"  # source had no usable # TYPE; the expected type was assumed


#: Flags that change what a series means (so it must not be merged with unflagged data);
#: the others only record where a value came from.
SEMANTIC_FLAGS = frozenset(Flag) - {Flag.RENAMED, Flag.UNIT_CONVERTED, Flag.TYPE_ASSUMED}

#: Store family names of samples no dialect maps: ``raw:`` + the wire sample name.
RAW_PREFIX = "raw:"

# -- samples -------------------------------------------------------------------------------

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs


def labels_key(labels: dict[str, str]) -> Labels:
    """The canonical, hashable form of a label set: pairs sorted by name."""
    return tuple(sorted(labels.items()))


@dataclass(frozen=True)
class Exemplar:
    """An exemplar attached to one histogram bucket (OpenMetrics), e.g. a trace id."""

    upper_bound: float
    value: float
    labels: Labels
    timestamp_seconds: float | None = None


@dataclass(frozen=True)
class CanonicalSample:
    """One counter or gauge reading of a canonical family. ``value`` is in the family's unit
    (seconds, tokens, requests, 0..1)."""

    family: str
    labels: Labels
    value: float
    kind: Kind
    flags: frozenset[Flag] = frozenset()
    source: str = ""  # the engine's family name it came from


@dataclass(frozen=True)
class CanonicalHistogram:
    """One cumulative histogram of a canonical family: ``upper_bounds`` strictly increasing,
    ending with ``+Inf``; ``cumulative_counts[i]`` observations ``<= upper_bounds[i]``."""

    family: str
    labels: Labels
    upper_bounds: tuple[float, ...]
    cumulative_counts: tuple[float, ...]
    sum_value: float | None
    count: float
    flags: frozenset[Flag] = frozenset()
    source: str = ""
    exemplars: tuple[Exemplar, ...] = field(default=())


@dataclass(frozen=True)
class RawSample:
    """A sample of a family no dialect rule maps (kept, never dropped): the wire sample name,
    its labels as exposed plus ``target``, and the family's declared type (``unknown``
    without ``# TYPE``)."""

    name: str
    labels: Labels
    value: float
    family_type: str


@dataclass(frozen=True)
class Normalised:
    """One exposition in canonical form. ``notes`` say what could not be mapped and why
    (e.g. "TGI exposes no TTFT histogram")."""

    dialects: frozenset[str]
    samples: tuple[CanonicalSample, ...]
    histograms: tuple[CanonicalHistogram, ...]
    raw: tuple[RawSample, ...]
    notes: tuple[str, ...]


# -- GPU telemetry (NVML, collectors/gpu.py) -------------------------------------------------

LABEL_GPU = "gpu"  # the device index NVML reports, as a string
LABEL_UUID = "uuid"
LABEL_GPU_NAME = "gpu_name"  # e.g. "NVIDIA H200"
LABEL_ERROR_TYPE = "error_type"  # corrected | uncorrected
LABEL_COUNTER = "counter"  # volatile (since the driver loaded) | aggregate (device lifetime)
LABEL_REASON = "reason"  # a clock throttle reason, e.g. hw_thermal_slowdown

GPU_MEMORY_USED_BYTES = "gpu_memory_used_bytes"
GPU_MEMORY_TOTAL_BYTES = "gpu_memory_total_bytes"
GPU_UTILIZATION = "gpu_utilization"  # a 0..1 fraction of the last sample period busy
GPU_TEMPERATURE_CELSIUS = "gpu_temperature_celsius"
GPU_POWER_WATTS = "gpu_power_watts"
GPU_ECC_ERRORS_TOTAL = "gpu_ecc_errors_total"
GPU_THROTTLE_ACTIVE = "gpu_throttle_active"  # 1 while the reason holds clocks down, else 0

#: NVML families, kept apart from :data:`FAMILIES` (what an engine's exposition maps onto).
GPU_FAMILIES: dict[str, Kind] = {
    GPU_MEMORY_USED_BYTES: Kind.GAUGE,
    GPU_MEMORY_TOTAL_BYTES: Kind.GAUGE,
    GPU_UTILIZATION: Kind.GAUGE,
    GPU_TEMPERATURE_CELSIUS: Kind.GAUGE,
    GPU_POWER_WATTS: Kind.GAUGE,
    GPU_ECC_ERRORS_TOTAL: Kind.COUNTER,
    GPU_THROTTLE_ACTIVE: Kind.GAUGE,
}
