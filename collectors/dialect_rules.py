"""The dialect tables: which engine family maps onto which canonical family, how.

Transcribed from ``shared/reference/engine-metrics.md`` §2 (vLLM 0.33), §4 (old vLLM names),
§7 (cross-engine map and semantic differences), and checked against the engines' sources
(issue 16; ``docs/collectors.md``, "Engine versions", names the repository, path and commit of
every name, and ``tests/collectors/fixtures/conformance/`` holds one exposition per engine
version). Family names are as ``prometheus_client.parser`` reports them: a counter's family
drops ``_total`` (``vllm:prompt_tokens_total`` → ``vllm:prompt_tokens``), TGI's counters have
none to drop.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from collectors import canonical as c
from collectors.canonical import Flag, Labels


class Dialect(enum.Enum):
    """An engine's metric dialect."""

    TAILWATCH = "tailwatch"  # the bundled engine: vLLM names plus tailwatch: series
    VLLM = "vllm"
    SGLANG = "sglang"
    TGI = "tgi"
    LLAMACPP = "llamacpp"
    TRTLLM = "trtllm"
    DYNAMO = "dynamo"
    TRITON = "triton"


#: Name prefix → dialect. Separators differ (§8.1). ``trtllm:`` (older Dynamo docs) is
#: rewritten to ``trtllm_`` before lookup.
PREFIXES: tuple[tuple[str, Dialect], ...] = (
    ("tailwatch:", Dialect.TAILWATCH),
    ("vllm:", Dialect.VLLM),
    ("sglang:", Dialect.SGLANG),
    ("tgi_", Dialect.TGI),
    ("llamacpp:", Dialect.LLAMACPP),
    ("trtllm_", Dialect.TRTLLM),
    ("dynamo_", Dialect.DYNAMO),
    ("nv_", Dialect.TRITON),
)

#: Older TensorRT-LLM builds expose vLLM-0.10-style names without any prefix. They are
#: mapped only when at least ``UNPREFIXED_TRTLLM_MIN`` of them are present, since names
#: this generic could come from anything.
UNPREFIXED_TRTLLM_MIN = 2

MS = 1e-3


@dataclass(frozen=True)
class Rule:
    """How one source family (or a labelled slice of it) becomes a canonical family.

    ``match``: only series carrying these labels (the labels are then dropped).
    ``match_prefix``: only series whose label, where they carry it, starts with this text;
    the label is kept, and a series without it (an engine from before the label) is mapped.
    ``rename``: source label → canonical label. ``set_labels``: labels added.
    ``scale``: multiplies values (counters, gauges) or bucket bounds and ``_sum``
    (histograms) into the canonical unit. ``from_sum``: a counter read from a histogram's
    ``_sum`` (token totals of engines that only keep a token histogram).
    """

    source: str
    family: str
    flags: frozenset[Flag] = frozenset()
    match: Labels = ()
    rename: Labels = ()
    set_labels: Labels = ()
    scale: float = 1.0
    from_sum: bool = False
    match_prefix: Labels = ()

    def selects(self, labels: Mapping[str, str]) -> bool:
        """Whether a source series with ``labels`` is this rule's (``match``,
        ``match_prefix``)."""
        return all(labels.get(k) == v for k, v in self.match) and all(
            labels.get(k, v).startswith(v) for k, v in self.match_prefix
        )


def _r(
    source: str,
    family: str,
    *flags: Flag,
    match: Labels = (),
    rename: Labels = (),
    set_labels: Labels = (),
    scale: float = 1.0,
    from_sum: bool = False,
    match_prefix: Labels = (),
) -> Rule:
    return Rule(
        source, family, frozenset(flags), match, rename, set_labels, scale, from_sum, match_prefix
    )


_MODEL_NAME = (("model_name", c.LABEL_MODEL),)
_API_HANDLERS = ((c.LABEL_HANDLER, c.API_HANDLER_PREFIX),)
_STATUS_AS_REASON = (("status", c.LABEL_FINISHED_REASON),)

VLLM_RULES = (
    _r("vllm:time_to_first_token_seconds", c.TTFT_SECONDS),
    _r("vllm:inter_token_latency_seconds", c.ITL_SECONDS),
    _r("vllm:e2e_request_latency_seconds", c.E2E_SECONDS),
    _r("vllm:request_queue_time_seconds", c.QUEUE_SECONDS),
    _r("vllm:request_prefill_time_seconds", c.PREFILL_SECONDS),
    _r("vllm:request_decode_time_seconds", c.DECODE_SECONDS),
    _r("vllm:request_prompt_tokens", c.PROMPT_TOKENS),
    _r("vllm:request_generation_tokens", c.GENERATION_TOKENS),
    _r("vllm:prompt_tokens", c.PROMPT_TOKENS_TOTAL),
    _r("vllm:generation_tokens", c.GENERATION_TOKENS_TOTAL),
    _r("vllm:num_preemptions", c.PREEMPTIONS_TOTAL),
    _r("vllm:prefix_cache_queries", c.PREFIX_CACHE_QUERIES_TOTAL),
    _r("vllm:prefix_cache_hits", c.PREFIX_CACHE_HITS_TOTAL),
    _r("vllm:request_success", c.REQUESTS_TOTAL),
    _r("vllm:num_requests_running", c.REQUESTS_RUNNING),
    _r("vllm:num_requests_waiting", c.REQUESTS_WAITING),
    _r("vllm:kv_cache_usage_perc", c.KV_CACHE_USAGE),
    # speculative decoding (vllm/v1/spec_decode/metrics.py): only while a server speculates
    _r("vllm:spec_decode_num_drafts", c.SPEC_DECODE_DRAFTS_TOTAL),
    _r("vllm:spec_decode_num_draft_tokens", c.SPEC_DECODE_DRAFT_TOKENS_TOTAL),
    _r("vllm:spec_decode_num_accepted_tokens", c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL),
    _r("vllm:spec_decode_num_accepted_tokens_per_pos", c.SPEC_DECODE_ACCEPTED_TOKENS_PER_POS_TOTAL),
    # §4: names vLLM renamed; still read from older servers. Which versions: gpu_cache_usage_perc
    # V0 (≈0.5) to 0.10 (hidden 0.11); gpu_prefix_cache_* V1 0.8 (blocks) to 0.10 (tokens);
    # time_per_output_token_seconds V0 to 0.11; time_in_queue_requests V0 only (≈0.6-0.8.5).
    _r("vllm:gpu_cache_usage_perc", c.KV_CACHE_USAGE, Flag.RENAMED),
    _r("vllm:gpu_prefix_cache_queries", c.PREFIX_CACHE_QUERIES_TOTAL, Flag.RENAMED, Flag.BLOCKS_OR_TOKENS),
    _r("vllm:gpu_prefix_cache_hits", c.PREFIX_CACHE_HITS_TOTAL, Flag.RENAMED, Flag.BLOCKS_OR_TOKENS),
    _r("vllm:time_per_output_token_seconds", c.ITL_SECONDS, Flag.RENAMED),
    _r("vllm:time_in_queue_requests", c.QUEUE_SECONDS, Flag.RENAMED),
)  # fmt: skip

TAILWATCH_RULES = (
    _r("tailwatch:tenant_requests", c.REQUESTS_TOTAL),
    _r("tailwatch:tenant_prompt_tokens", c.PROMPT_TOKENS_TOTAL),
    _r("tailwatch:tenant_generation_tokens", c.GENERATION_TOKENS_TOTAL),
    _r("tailwatch:tenant_time_to_first_token_seconds", c.TTFT_SECONDS),
    # NOTE: the API's responses only: the engine's probes and scrapes (handler "/metrics",
    # "/ready", ...) are kept raw, or every scrape would dilute the error and 429 rates.
    _r("tailwatch:http_responses", c.HTTP_RESPONSES_TOTAL, match_prefix=_API_HANDLERS),
    _r("tailwatch:engine_info", c.ENGINE_INFO),
    _r("tailwatch:lora_requests", c.LORA_REQUESTS_TOTAL),
    _r("tailwatch:lora_loads", c.LORA_LOADS_TOTAL),
    _r("tailwatch:lora_load_seconds", c.LORA_LOAD_SECONDS_TOTAL),
    _r("tailwatch:lora_resident_adapters", c.LORA_RESIDENT_ADAPTERS),
    _r("tailwatch:lora_time_to_first_token_seconds", c.LORA_TTFT_SECONDS),
    _r("tailwatch:lora_e2e_request_latency_seconds", c.LORA_E2E_SECONDS),
    _r("tailwatch:startup_phase_seconds", c.STARTUP_PHASE_SECONDS),
    _r("tailwatch:engine_start_time_seconds", c.ENGINE_START_TIME_SECONDS),
    _r("tailwatch:structured_output_requests", c.STRUCTURED_OUTPUT_REQUESTS_TOTAL),
    _r("tailwatch:structured_output_cache_hits", c.STRUCTURED_OUTPUT_CACHE_HITS_TOTAL),
    _r("tailwatch:structured_output_cache_misses", c.STRUCTURED_OUTPUT_CACHE_MISSES_TOTAL),
    _r("tailwatch:structured_output_compile_seconds", c.STRUCTURED_OUTPUT_COMPILE_SECONDS),
    _r("tailwatch:structured_output_finished", c.STRUCTURED_OUTPUT_FINISHED_TOTAL),
    # a gateway's or the load generator's first tokens (loadgen/client_metrics.py)
    _r("tailwatch:client_time_to_first_token_seconds", c.CLIENT_TTFT_SECONDS),
)

#: vLLM's LoRA gauge, exported only with LoRA on (``vllm/v1/metrics/loggers.py``), so no
#: conformance fixture (LoRA off) has it; the bundled engine exports it in vLLM's shape, and
#: ``tests/collectors/test_lora_startup_families.py`` maps it from there.
VLLM_LORA_RULES = (_r("vllm:lora_requests_info", c.LORA_REQUESTS_INFO),)

SGLANG_RULES = (
    _r("sglang:time_to_first_token_seconds", c.TTFT_SECONDS),
    # §7: observe_inter_token_latency(interval, n) adds n to _count: a per-token distribution.
    _r("sglang:inter_token_latency_seconds", c.ITL_SECONDS, Flag.TOKEN_WEIGHTED),
    _r("sglang:e2e_request_latency_seconds", c.E2E_SECONDS),
    _r("sglang:queue_time_seconds", c.QUEUE_SECONDS),
    _r("sglang:prompt_tokens_histogram", c.PROMPT_TOKENS),
    _r("sglang:generation_tokens_histogram", c.GENERATION_TOKENS),
    _r("sglang:prompt_tokens", c.PROMPT_TOKENS_TOTAL, Flag.PER_FINISHED_REQUEST),
    # NOTE: observe_one_finished_request bumps all three token counters when a request ends.
    _r("sglang:generation_tokens", c.GENERATION_TOKENS_TOTAL, Flag.PER_FINISHED_REQUEST),
    _r("sglang:num_retracted_requests", c.PREEMPTIONS_TOTAL),
    _r("sglang:cached_tokens", c.PREFIX_CACHE_HITS_TOTAL, Flag.PER_FINISHED_REQUEST),
    _r("sglang:num_requests", c.REQUESTS_TOTAL, Flag.NO_REASON),
    _r("sglang:num_running_reqs", c.REQUESTS_RUNNING),
    _r("sglang:num_queue_reqs", c.REQUESTS_WAITING),
    _r("sglang:token_usage", c.KV_CACHE_USAGE),
    # speculative decoding: gauges in python/sglang/srt/metrics/collector.py
    # (SchedulerMetricsCollector), set only while a server speculates
    _r("sglang:spec_accept_rate", c.SPEC_ACCEPT_RATE),
    _r("sglang:spec_accept_length", c.SPEC_ACCEPT_LENGTH),
    _r("sglang:http_responses", c.HTTP_RESPONSES_TOTAL, rename=(("status_code", c.LABEL_CODE),)),
    # NOTE: the LoRA pool, registered only with --enable-lora (python/sglang/srt/metrics/
    # collector.py @00ae9c15); lora_pool_utilization is their ratio, not kept twice
    _r("sglang:lora_pool_slots_used", c.LORA_RESIDENT_ADAPTERS),
    _r("sglang:lora_pool_slots_total", c.LORA_POOL_SLOTS),
)

TGI_RULES = (
    _r("tgi_request_duration", c.E2E_SECONDS),
    _r("tgi_request_queue_duration", c.QUEUE_SECONDS),
    _r("tgi_batch_inference_duration", c.PREFILL_SECONDS, Flag.PER_BATCH, match=(("method", "prefill"),)),
    _r("tgi_batch_inference_duration", c.DECODE_SECONDS, Flag.PER_BATCH, match=(("method", "decode"),)),
    # NOTE: input_length is recorded when input validation passes (router/src/validation.rs),
    # so it also counts requests that later fail or are cancelled; generated_tokens only at success.
    _r("tgi_request_input_length", c.PROMPT_TOKENS, Flag.PER_VALIDATED_REQUEST),
    _r("tgi_request_generated_tokens", c.GENERATION_TOKENS),
    _r("tgi_request_input_length", c.PROMPT_TOKENS_TOTAL, Flag.FROM_HISTOGRAM_SUM, Flag.PER_VALIDATED_REQUEST, from_sum=True),
    _r("tgi_request_generated_tokens", c.GENERATION_TOKENS_TOTAL, Flag.FROM_HISTOGRAM_SUM, Flag.PER_FINISHED_REQUEST, from_sum=True),
    _r("tgi_request_success", c.REQUESTS_TOTAL, Flag.COARSE_REASON, set_labels=((c.LABEL_FINISHED_REASON, "success"),)),
    _r("tgi_request_failure", c.REQUESTS_TOTAL, Flag.COARSE_REASON, set_labels=((c.LABEL_FINISHED_REASON, "error"),)),
    _r("tgi_batch_current_size", c.REQUESTS_RUNNING),
    _r("tgi_queue_size", c.REQUESTS_WAITING),
)  # fmt: skip

LLAMACPP_RULES = (
    # NOTE: counts only the prompt tokens the server evaluated, never those reused from its
    # cache (every build; current ones say so in HELP), while vLLM's counter includes them.
    # Flagged, not summed with prompt_tokens_cached: older builds have no cached counter.
    _r("llamacpp:prompt_tokens", c.PROMPT_TOKENS_TOTAL, Flag.EXCLUDES_CACHED),
    _r("llamacpp:prompt_tokens_cached", c.PREFIX_CACHE_HITS_TOTAL),  # current builds only
    _r("llamacpp:tokens_predicted", c.GENERATION_TOKENS_TOTAL),
    _r("llamacpp:requests_processing", c.REQUESTS_RUNNING),
    _r("llamacpp:requests_deferred", c.REQUESTS_WAITING),
    _r("llamacpp:kv_cache_usage_ratio", c.KV_CACHE_USAGE),  # older builds only; nothing replaces it
)

# tensorrt_llm/metrics/collector.py @050f80de: every per-request family, token counters
# included, is logged in log_request_metrics_dict only once the request has finished.
TRTLLM_RULES = (
    _r("trtllm_time_to_first_token_seconds", c.TTFT_SECONDS),
    _r("trtllm_e2e_request_latency_seconds", c.E2E_SECONDS),
    _r("trtllm_request_queue_time_seconds", c.QUEUE_SECONDS),
    _r("trtllm_request_prefill_time_seconds", c.PREFILL_SECONDS),
    _r("trtllm_request_decode_time_seconds", c.DECODE_SECONDS),
    _r("trtllm_prompt_tokens", c.PROMPT_TOKENS_TOTAL, Flag.PER_FINISHED_REQUEST),
    _r("trtllm_generation_tokens", c.GENERATION_TOKENS_TOTAL, Flag.PER_FINISHED_REQUEST),
    _r("trtllm_prompt_cached_tokens", c.PREFIX_CACHE_HITS_TOTAL, Flag.PER_FINISHED_REQUEST),
    _r("trtllm_request_success", c.REQUESTS_TOTAL),
    _r("trtllm_num_requests_running", c.REQUESTS_RUNNING),
    _r("trtllm_num_requests_waiting", c.REQUESTS_WAITING),
    _r("trtllm_kv_cache_utilization", c.KV_CACHE_USAGE),
)
# NOTE: trtllm_time_per_output_token_seconds is per request (a TPOT), not an ITL: kept raw.
# The older, unprefixed collector (@89fd9b74) had only these four (and that TPOT).
TRTLLM_UNPREFIXED_RULES = (
    _r("time_to_first_token_seconds", c.TTFT_SECONDS),
    _r("e2e_request_latency_seconds", c.E2E_SECONDS),
    _r("request_queue_time_seconds", c.QUEUE_SECONDS),
    _r("request_success", c.REQUESTS_TOTAL),
)

DYNAMO_RULES = (
    # NOTE: the frontend's first token is the client's: the HTTP service in front of the
    # workers times it from its handler's start (ResponseMetricCollector's start_time,
    # lib/llm/src/http/service/metrics.rs @79a21ca4); scraped beside the workers' engines it
    # must not merge with their TTFT, or the gap between them would vanish into one tail
    _r("dynamo_frontend_time_to_first_token_seconds", c.CLIENT_TTFT_SECONDS),
    _r("dynamo_frontend_inter_token_latency_seconds", c.ITL_SECONDS),
    _r("dynamo_frontend_request_duration_seconds", c.E2E_SECONDS),
    _r("dynamo_frontend_input_sequence_tokens", c.PROMPT_TOKENS),
    _r("dynamo_frontend_output_sequence_tokens", c.GENERATION_TOKENS),
    _r("dynamo_frontend_input_sequence_tokens", c.PROMPT_TOKENS_TOTAL, Flag.FROM_HISTOGRAM_SUM, from_sum=True),
    _r("dynamo_frontend_output_tokens", c.GENERATION_TOKENS_TOTAL),
    _r("dynamo_frontend_requests", c.REQUESTS_TOTAL, Flag.COARSE_REASON, rename=_STATUS_AS_REASON),
    _r("dynamo_frontend_inflight_requests", c.REQUESTS_RUNNING, Flag.HTTP_LEVEL),
    _r("dynamo_frontend_queued_requests", c.REQUESTS_WAITING, Flag.INCLUDES_PREFILL),
    # 0..1 despite "_percent". Current name (prometheus_names.rs kvstats, no "kvstats_" prefix
    # in the name), then the older one (generated prometheus_names.py: "kvstats_…").
    _r("dynamo_component_gpu_cache_usage_percent", c.KV_CACHE_USAGE),
    _r("dynamo_component_kvstats_gpu_cache_usage_percent", c.KV_CACHE_USAGE, Flag.RENAMED),
)  # fmt: skip

TRITON_RULES = (
    # §7: ms, and the first *response* of a decoupled model, not the first streamed token.
    _r("nv_inference_first_response_histogram_ms", c.TTFT_SECONDS, Flag.UNIT_CONVERTED, Flag.FIRST_RESPONSE, scale=MS),
    # Triton core's queue before a backend takes the request; the TensorRT-LLM backend's own
    # waiting queue is request_type="waiting" (newer backends), so the two are kept apart.
    _r("nv_inference_pending_request_count", c.REQUESTS_WAITING, Flag.BEFORE_BACKEND),
    _r("nv_trt_llm_request_metrics", c.REQUESTS_RUNNING, match=(("request_type", "active"),)),
    _r("nv_trt_llm_request_metrics", c.REQUESTS_WAITING, match=(("request_type", "waiting"),)),
    _r("nv_trt_llm_kv_cache_block_metrics", c.KV_CACHE_USAGE, match=(("kv_cache_block_type", "fraction"),)),
)  # fmt: skip

#: Source label renames applied by every rule (before a rule's own ``rename``).
COMMON_RENAMES: dict[str, str] = dict(_MODEL_NAME)

#: What each dialect cannot provide at all, reported as notes when the dialect is seen.
GAPS: dict[Dialect, tuple[str, ...]] = {
    Dialect.TGI: (
        "TGI exposes no TTFT histogram (its dashboard approximates p50 queue + p50 prefill; "
        "not computed here) and no ITL histogram",
        "TGI has no model label: pass the model as a default label of the target",
        "TGI prompt tokens are recorded at validation, failed requests included (flag "
        "per_validated_request)",
    ),
    Dialect.LLAMACPP: (
        "llama.cpp exposes no histograms: no latency distributions",
        "llama.cpp prompt tokens exclude cached ones (flag excludes_cached); the cached ones are "
        "prefix_cache_hits_total (current builds only)",
        "current llama.cpp builds export no KV-cache usage gauge (kv_cache_usage_ratio was "
        "removed and nothing replaces it): kv_cache_usage stays empty for them",
    ),
    Dialect.SGLANG: (
        "SGLang ITL counts tokens, not engine steps (flag token_weighted); it never merges "
        "with a per-step ITL",
        "SGLang has no prefix-cache queries counter and no finished_reason",
        "SGLang token counters move only when a request finishes (flag per_finished_request)",
    ),
    Dialect.TRTLLM: (
        "TensorRT-LLM has no ITL histogram (time_per_output_token_seconds is per request; kept raw)",
        "TensorRT-LLM token counters move only when a request finishes (flag "
        "per_finished_request); it has no prefix-cache queries counter (kv_cache_hit_rate is a "
        "gauge, kept raw)",
    ),
    Dialect.DYNAMO: ("Dynamo's inflight_requests is HTTP-level; queued_requests includes prefill",),
    Dialect.TRITON: (
        "Triton latencies are cumulative µs counters or summaries (kept raw); its ms "
        "first-response histogram is converted to seconds but is not a TTFT",
        "Triton's pending_request_count is the server's queue before a backend takes a request "
        "(flag before_backend), not the TensorRT-LLM batch manager's waiting queue",
        'TensorRT-LLM backends before request_type="waiting" and kv_cache_block_type='
        '"fraction" give no engine waiting queue and no KV usage (used/max blocks kept raw)',
    ),
}


def _index(*tables: tuple[Rule, ...]) -> dict[str, tuple[Rule, ...]]:
    index: dict[str, list[Rule]] = {}
    for table in tables:
        for rule in table:
            index.setdefault(rule.source, []).append(rule)
    return {name: tuple(rules) for name, rules in index.items()}


#: Source family → rules, for every prefixed dialect (prefixes keep the names unambiguous).
PREFIXED_RULES = _index(
    VLLM_RULES, VLLM_LORA_RULES, TAILWATCH_RULES, SGLANG_RULES, TGI_RULES, LLAMACPP_RULES,
    TRTLLM_RULES, DYNAMO_RULES, TRITON_RULES,
)  # fmt: skip
UNPREFIXED_RULES = _index(TRTLLM_UNPREFIXED_RULES)
