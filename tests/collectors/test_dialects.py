"""Dialect detection and mapping onto canonical families, one exposition per engine
(``expositions.py``, written from ``shared/reference/engine-metrics.md``)."""

from __future__ import annotations

import math

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families as parse_text

from collectors import Dialect, Flag, Kind, detect_dialects, normalise, primary_dialect
from collectors import canonical as c
from collectors.canonical import CanonicalHistogram, CanonicalSample, Normalised
from tests.collectors import expositions as ex

TARGET = "replica-a:8000"


def _norm(text: str, **kw: object) -> Normalised:
    return normalise(parse_text(text), TARGET, **kw)  # type: ignore[arg-type]


def _one(items: tuple, family: str, **labels: str) -> CanonicalSample | CanonicalHistogram:
    found = [
        s for s in items if s.family == family and all(dict(s.labels).get(k) == v for k, v in labels.items())
    ]  # fmt: skip
    assert len(found) == 1, f"{family} {labels}: {found}"
    return found[0]


@pytest.mark.parametrize(
    ("text", "dialects", "primary"),
    [
        (ex.VLLM_033, {Dialect.VLLM}, Dialect.VLLM),
        (ex.VLLM_OLD, {Dialect.VLLM}, Dialect.VLLM),
        (ex.BUNDLED, {Dialect.VLLM, Dialect.TAILWATCH}, Dialect.TAILWATCH),
        (ex.SGLANG, {Dialect.SGLANG}, Dialect.SGLANG),
        (ex.TGI, {Dialect.TGI}, Dialect.TGI),
        (ex.LLAMACPP, {Dialect.LLAMACPP}, Dialect.LLAMACPP),
        (ex.TRTLLM, {Dialect.TRTLLM}, Dialect.TRTLLM),
        (ex.TRTLLM_UNPREFIXED, {Dialect.TRTLLM}, Dialect.TRTLLM),
        (ex.DYNAMO, {Dialect.DYNAMO, Dialect.TRTLLM}, Dialect.DYNAMO),
        (ex.TRITON, {Dialect.TRITON}, Dialect.TRITON),
        (ex.VLLM_ESCAPED, {Dialect.VLLM}, Dialect.VLLM),
        ("# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 1\n", set(), None),
    ],
)
def test_detects_dialects(text: str, dialects: set[Dialect], primary: Dialect | None) -> None:
    found = detect_dialects(parse_text(text))
    assert found == dialects
    assert primary_dialect(found) is primary
    assert _norm(text).dialects == {d.value for d in dialects}


# (exposition, canonical family, labels to pick one series, expected value, expected flags)
VALUE_CASES = [
    (ex.VLLM_033, "requests_running", {"engine": "1"}, 3.0, set()),
    (ex.VLLM_033, "requests_waiting", {}, 5.0, set()),
    (ex.VLLM_033, "kv_cache_usage", {}, 0.25, set()),
    (ex.VLLM_033, "generation_tokens_total", {}, 42.0, set()),
    (ex.VLLM_033, "prompt_tokens_total", {}, 100.0, set()),
    (ex.VLLM_033, "preemptions_total", {}, 1.0, set()),
    (ex.VLLM_033, "prefix_cache_queries_total", {}, 64.0, set()),
    (ex.VLLM_033, "prefix_cache_hits_total", {}, 16.0, set()),
    (ex.VLLM_033, "requests_total", {"finished_reason": "length"}, 1.0, set()),
    (ex.VLLM_OLD, "kv_cache_usage", {}, 0.5, {Flag.RENAMED}),
    (ex.VLLM_OLD, "prefix_cache_queries_total", {}, 10.0, {Flag.RENAMED, Flag.BLOCKS_OR_TOKENS}),
    (ex.VLLM_OLD, "prefix_cache_hits_total", {}, 4.0, {Flag.RENAMED, Flag.BLOCKS_OR_TOKENS}),
    (ex.BUNDLED, "requests_running", {}, 1.0, set()),
    (ex.BUNDLED, "requests_total", {"tenant": "acme", "finished_reason": "rejected"}, 1.0, set()),
    (ex.BUNDLED, "prompt_tokens_total", {"tenant": "acme"}, 77.0, set()),
    (ex.BUNDLED, "http_responses_total", {"code": "429"}, 2.0, set()),
    (ex.SGLANG, "requests_running", {}, 6.0, set()),
    (ex.SGLANG, "requests_waiting", {}, 2.0, set()),
    (ex.SGLANG, "kv_cache_usage", {}, 0.75, set()),
    (ex.SGLANG, "prompt_tokens_total", {}, 500.0, {Flag.PER_FINISHED_REQUEST}),
    (ex.SGLANG, "generation_tokens_total", {}, 300.0, {Flag.PER_FINISHED_REQUEST}),
    (ex.SGLANG, "preemptions_total", {}, 2.0, set()),
    (ex.SGLANG, "prefix_cache_hits_total", {"cache_source": "device"}, 120.0, {Flag.PER_FINISHED_REQUEST}),
    (ex.SGLANG, "requests_total", {}, 11.0, {Flag.NO_REASON}),
    (ex.SGLANG, "http_responses_total", {"code": "200"}, 10.0, set()),
    (ex.TGI, "requests_total", {"finished_reason": "success"}, 12.0, {Flag.COARSE_REASON}),
    (ex.TGI, "requests_total", {"finished_reason": "error", "err": "overloaded"}, 3.0, {Flag.COARSE_REASON}),
    (ex.TGI, "requests_waiting", {}, 4.0, set()),
    (ex.TGI, "requests_running", {}, 7.0, set()),
    (ex.TGI, "prompt_tokens_total", {}, 900.0, {Flag.FROM_HISTOGRAM_SUM, Flag.PER_VALIDATED_REQUEST}),
    (ex.LLAMACPP, "prompt_tokens_total", {}, 1024.0, {Flag.EXCLUDES_CACHED}),
    (ex.LLAMACPP, "generation_tokens_total", {}, 256.0, set()),
    (ex.LLAMACPP, "requests_running", {}, 1.0, set()),
    (ex.LLAMACPP, "requests_waiting", {}, 3.0, set()),
    (ex.LLAMACPP, "kv_cache_usage", {}, 0.125, set()),
    (ex.TRTLLM, "requests_total", {"finished_reason": "stop"}, 2.0, set()),
    (ex.TRTLLM, "kv_cache_usage", {}, 0.6, set()),
    (ex.TRTLLM_UNPREFIXED, "requests_total", {"finished_reason": "length"}, 5.0, set()),
    (ex.DYNAMO, "requests_total", {"finished_reason": "error"}, 1.0, {Flag.COARSE_REASON}),
    (ex.DYNAMO, "requests_running", {"model": "qwen", "target": TARGET}, 3.0, set()),
    (ex.DYNAMO, "requests_waiting", {}, 2.0, {Flag.INCLUDES_PREFILL}),
    (ex.DYNAMO, "prompt_tokens_total", {}, 700.0, {Flag.FROM_HISTOGRAM_SUM}),
    (ex.TRITON, "requests_running", {"model": "tensorrt_llm"}, 5.0, set()),
    (ex.TRITON, "requests_waiting", {"model": "tensorrt_llm"}, 1.0, set()),
    (ex.VLLM_ESCAPED, "prompt_tokens_total", {}, 31.0, set()),
]  # fmt: skip


@pytest.mark.parametrize(("text", "family", "labels", "value", "flags"), VALUE_CASES)
def test_maps_counters_and_gauges(
    text: str, family: str, labels: dict[str, str], value: float, flags: set[Flag]
) -> None:
    normalised = _norm(text)
    if family == "requests_running" and text is ex.DYNAMO:
        # The HTTP-level frontend gauge and the passed-through TensorRT-LLM one differ.
        found = [s for s in normalised.samples if s.family == family]
        by_flags = {s.flags: s.value for s in found}
        assert by_flags == {frozenset({Flag.HTTP_LEVEL}): 3.0, frozenset(): 3.0}
        return
    sample = _one(normalised.samples, family, **labels)
    assert sample.value == pytest.approx(value)
    assert sample.flags == flags
    assert sample.kind is Kind(sample.kind.value)
    assert dict(sample.labels)["target"] == TARGET


def test_model_label_is_canonical_and_other_labels_are_kept() -> None:
    running = [s for s in _norm(ex.VLLM_033).samples if s.family == "requests_running"]
    assert sorted(s.labels for s in running) == [
        (("engine", "0"), ("model", "Qwen/Qwen3-0.6B"), ("target", TARGET)),
        (("engine", "1"), ("model", "Qwen/Qwen3-0.6B"), ("target", TARGET)),
    ]
    # Triton's discriminator label is consumed by the rule; request_type="max" stays raw.
    triton = _norm(ex.TRITON)
    assert all("request_type" not in dict(s.labels) for s in triton.samples)
    assert [r.labels for r in triton.raw if r.name == "nv_trt_llm_request_metrics"] == [
        (("model", "tensorrt_llm"), ("request_type", "max"), ("target", TARGET), ("version", "1"))
    ]


def test_default_labels_fill_what_the_source_lacks() -> None:
    normalised = _norm(ex.TGI, default_labels={"model": "bigcode"})
    assert dict(_one(normalised.samples, "requests_waiting").labels)["model"] == "bigcode"
    vllm = _norm(ex.VLLM_033, default_labels={"model": "ignored"})
    assert dict(_one(vllm.samples, "requests_waiting").labels)["model"] == "Qwen/Qwen3-0.6B"


def test_vllm_histograms_keep_buckets_sum_and_count() -> None:
    ttft = _one(_norm(ex.VLLM_033).histograms, "ttft_seconds")
    assert ttft.upper_bounds == (0.001, 0.04, 1.0, math.inf)
    assert ttft.cumulative_counts == (0.0, 1.0, 2.0, 3.0)
    assert (ttft.sum_value, ttft.count) == (0.28, 3.0)
    assert ttft.source == "vllm:time_to_first_token_seconds"
    itl = _one(_norm(ex.VLLM_033).histograms, "itl_seconds")
    assert (itl.count, itl.flags) == (90.0, frozenset())


def test_old_vllm_itl_name_maps_to_itl_with_renamed_flag() -> None:
    itl = _one(_norm(ex.VLLM_OLD).histograms, "itl_seconds")
    assert itl.flags == {Flag.RENAMED}
    assert itl.upper_bounds == (0.01, 2.5, math.inf)
    assert itl.cumulative_counts == (2.0, 7.0, 8.0)
    assert dict(itl.labels) == {"model": "m", "target": TARGET}


def test_sglang_itl_is_flagged_token_weighted_and_ttft_split_by_streaming() -> None:
    normalised = _norm(ex.SGLANG)
    itl = _one(normalised.histograms, "itl_seconds")
    assert itl.flags == {Flag.TOKEN_WEIGHTED}
    assert (itl.count, itl.sum_value) == (300.0, 4.2)
    ttft = [h for h in normalised.histograms if h.family == "ttft_seconds"]
    assert sorted((dict(h.labels)["is_streaming"], h.count) for h in ttft) == [
        ("false", 3.0),
        ("true", 8.0),
    ]
    assert any("token" in note for note in normalised.notes)


def test_tgi_has_no_ttft_and_per_batch_prefill_decode() -> None:
    normalised = _norm(ex.TGI)
    families = {h.family for h in normalised.histograms}
    assert "ttft_seconds" not in families
    assert any("no TTFT" in note for note in normalised.notes)
    prefill = _one(normalised.histograms, "prefill_seconds")
    decode = _one(normalised.histograms, "decode_seconds")
    assert (prefill.count, decode.count) == (10.0, 200.0)
    assert prefill.flags == decode.flags == {Flag.PER_BATCH}
    assert "method" not in dict(prefill.labels)
    e2e = _one(normalised.histograms, "e2e_seconds")
    assert (e2e.upper_bounds, e2e.sum_value) == ((0.5, math.inf), 30.5)
    assert _one(normalised.histograms, "prompt_tokens").count == 12.0
    assert {r.name for r in normalised.raw} >= {"tgi_batch_next_size_bucket"}


def test_triton_ms_histogram_is_converted_to_seconds() -> None:
    normalised = _norm(ex.TRITON)
    ttft = _one(normalised.histograms, "ttft_seconds")
    assert ttft.upper_bounds == (0.1, 0.5, math.inf)
    assert ttft.cumulative_counts == (4.0, 9.0, 10.0)
    assert ttft.sum_value == pytest.approx(2.5)
    assert ttft.flags == {Flag.UNIT_CONVERTED, Flag.FIRST_RESPONSE}
    # µs counters are cumulative durations, not distributions: kept raw.
    assert [r.value for r in normalised.raw if r.name.startswith("nv_inference_queue")] == [
        123456.0
    ]


def test_trtllm_per_request_tpot_stays_raw_not_itl() -> None:
    normalised = _norm(ex.TRTLLM)
    assert all(h.family != "itl_seconds" for h in normalised.histograms)
    assert {r.name for r in normalised.raw} == {
        "trtllm_time_per_output_token_seconds_bucket",
        "trtllm_time_per_output_token_seconds_sum",
        "trtllm_time_per_output_token_seconds_count",
    }
    assert _one(normalised.histograms, "ttft_seconds").count == 2.0


def test_unprefixed_trtllm_needs_several_of_its_names() -> None:
    lone = "# TYPE request_success_total counter\nrequest_success_total 5\n"
    normalised = _norm(lone)
    assert normalised.samples == ()
    assert [r.name for r in normalised.raw] == ["request_success_total"]
    both = _norm(ex.TRTLLM_UNPREFIXED)
    assert {h.family for h in both.histograms} == {"ttft_seconds", "e2e_seconds"}


def test_unknown_families_and_unmapped_series_are_kept_raw() -> None:
    normalised = _norm(ex.VLLM_033)
    raw_names = {r.name for r in normalised.raw}
    assert raw_names == {
        "vllm:iteration_tokens_total_bucket",
        "vllm:iteration_tokens_total_sum",
        "vllm:iteration_tokens_total_count",
        "vllm:cache_config_info",
        "vllm:generation_tokens_created",
        "vllm:time_to_first_token_seconds_created",
    }
    old_raw = {r.name: r for r in _norm(ex.VLLM_OLD).raw}
    assert old_raw["vllm:gpu_prefix_cache_hit_rate"].value == 0.4
    assert old_raw["vllm:gpu_prefix_cache_hit_rate"].family_type == "gauge"
    assert dict(old_raw["vllm:gpu_prefix_cache_hit_rate"].labels)["target"] == TARGET
    # prometheus_client's parser gives a counter sample lacking _total the suffix.
    assert {r.name for r in _norm(ex.LLAMACPP).raw} == {"llamacpp:n_tokens_max_total"}
    dynamo_raw = {r.name for r in _norm(ex.DYNAMO).raw}
    assert "dynamo_frontend_tokenizer_latency_ms_bucket" in dynamo_raw
    assert "tailwatch:knob_changes_total" in {r.name for r in _norm(ex.BUNDLED).raw}


def test_every_sample_is_accounted_for() -> None:
    """Nothing is dropped: each non-_created wire sample of a mapped family feeds a canonical
    sample or histogram, or comes back raw."""
    for text in (ex.VLLM_033, ex.SGLANG, ex.TGI, ex.DYNAMO, ex.TRITON, ex.BUNDLED):
        wire = [s for f in parse_text(text) for s in f.samples]
        normalised = _norm(text)
        histogram_samples = sum(len(h.upper_bounds) + 2 for h in normalised.histograms)
        from_sum = sum(1 for s in normalised.samples if Flag.FROM_HISTOGRAM_SUM in s.flags)
        accounted = len(normalised.samples) - from_sum + histogram_samples + len(normalised.raw)
        assert accounted == len(wire), text[:40]


def test_type_mismatch_is_kept_raw_with_a_note() -> None:
    text = "# TYPE vllm:num_requests_running counter\nvllm:num_requests_running_total 2\n"
    normalised = _norm(text)
    assert normalised.samples == ()
    assert [r.name for r in normalised.raw] == ["vllm:num_requests_running_total"]
    assert any("expected a gauge" in note for note in normalised.notes)
    untyped = _norm('vllm:num_requests_waiting{model_name="m"} 4\n')
    sample = _one(untyped.samples, "requests_waiting")
    assert (sample.value, sample.flags) == (4.0, {Flag.TYPE_ASSUMED})


def test_histogram_without_inf_bucket_is_kept_raw_with_a_note() -> None:
    text = (
        "# TYPE vllm:e2e_request_latency_seconds histogram\n"
        'vllm:e2e_request_latency_seconds_bucket{le="1.0"} 1\n'
        "vllm:e2e_request_latency_seconds_count 1\n"
    )
    normalised = _norm(text)
    assert normalised.histograms == ()
    assert len(normalised.raw) == 2
    assert any("+Inf" in note for note in normalised.notes)


def test_escaped_colon_samples_are_reattached_to_their_family() -> None:
    normalised = _norm(ex.VLLM_ESCAPED)
    ttft = _one(normalised.histograms, "ttft_seconds")
    assert ttft.cumulative_counts == (2.0, 3.0)
    assert normalised.raw == ()


def test_openmetrics_exemplars_are_carried() -> None:
    text = (
        "# TYPE vllm:time_to_first_token_seconds histogram\n"
        'vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="m"} 1 # {trace_id="abc"} 0.05 123.5\n'
        'vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="m"} 2\n'
        'vllm:time_to_first_token_seconds_count{model_name="m"} 2\n'
        'vllm:time_to_first_token_seconds_sum{model_name="m"} 0.5\n'
        "# EOF\n"
    )
    ttft = _one(normalise(parse_om(text), TARGET).histograms, "ttft_seconds")
    (exemplar,) = ttft.exemplars
    assert (exemplar.upper_bound, exemplar.value, exemplar.labels) == (
        0.1,
        0.05,
        (("trace_id", "abc"),),
    )
    assert exemplar.timestamp_seconds == pytest.approx(123.5)


@pytest.mark.parametrize("accept", [None, "application/openmetrics-text; version=1.0.0"])
def test_bundled_engine_exposition_covers_every_canonical_family(accept: str | None) -> None:
    from engine.metrics import EngineMetrics

    # NOTE: an engine that speculates: vllm:spec_decode_* exist only then (as in vLLM)
    metrics = EngineMetrics("tiny", {"block_size": 16}, num_speculative_tokens=2)
    metrics.observe_http_response(200, "/v1/completions")
    metrics.set_start_time(1_800_000_000.0)
    metrics.set_startup_phase("model_load", 2.0)
    body, content_type = metrics.render(accept)
    parse = parse_om if "openmetrics" in content_type else parse_text
    normalised = normalise(parse(body.decode()), TARGET)
    assert normalised.dialects == {"vllm", "tailwatch"}
    mapped = {s.family for s in normalised.samples} | {h.family for h in normalised.histograms}
    # NOTE: the LoRA families exist only with LoRA on and requests served
    # (tests/collectors/test_lora_startup_families.py maps them)
    lora = {f for f in c.FAMILIES if f.startswith("lora_")}
    # NOTE: SGLang's acceptance gauges: vLLM (and the bundled engine) count tokens instead
    sglang_only = {c.SPEC_ACCEPT_RATE, c.SPEC_ACCEPT_LENGTH}
    # NOTE: the clients' first tokens are a gateway's or the load generator's, not an engine's
    client = {c.CLIENT_TTFT_SECONDS}
    assert mapped == set(c.FAMILIES) - lora - sglang_only - client
    assert all(dict(s.labels)["model"] == "tiny" for s in normalised.samples)
    assert not any(s.flags for s in normalised.samples)


def test_sglang_speculative_decoding_gauges_map_to_the_acceptance_families() -> None:
    labels = 'engine_type="unified",model_name="llama",tp_rank="0"'
    text = (
        "# TYPE sglang:spec_accept_rate gauge\n"
        f"sglang:spec_accept_rate{{{labels}}} 0.6\n"
        "# TYPE sglang:spec_accept_length gauge\n"
        f"sglang:spec_accept_length{{{labels}}} 2.8\n"
    )
    normalised = normalise(parse_text(text), TARGET)
    got = {s.family: (s.value, s.kind) for s in normalised.samples}
    assert got == {
        c.SPEC_ACCEPT_RATE: (0.6, c.Kind.GAUGE),
        c.SPEC_ACCEPT_LENGTH: (2.8, c.Kind.GAUGE),
    }
    assert normalised.dialects == {"sglang"}


def test_deprecated_and_current_vllm_names_in_one_exposition_give_one_series() -> None:
    text = (
        "# TYPE vllm:kv_cache_usage_perc gauge\n"
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.3\n'
        "# TYPE vllm:gpu_cache_usage_perc gauge\n"
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.3\n'
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 8\n'
        "# TYPE vllm:gpu_prefix_cache_hits_total counter\n"
        'vllm:gpu_prefix_cache_hits_total{engine="0",model_name="m"} 8\n'
    )
    normalised = _norm(text)
    assert sorted((s.family, s.source) for s in normalised.samples) == [
        ("kv_cache_usage", "vllm:kv_cache_usage_perc"),
        ("prefix_cache_hits_total", "vllm:prefix_cache_hits"),
    ]
    assert sum("current name wins" in note for note in normalised.notes) == 2


def test_http_responses_count_the_api_routes_only_and_old_expositions_still_map() -> None:
    """Probes and scrapes (``/metrics``, ``/ready``, ``none``) are kept raw, so they never
    dilute an error or 429 rate; a series without ``handler`` (an engine before the label)
    is the API's, as it always was."""
    text = (
        "# TYPE tailwatch:http_responses_total counter\n"
        'tailwatch:http_responses_total{code="200",handler="/v1/completions",model_name="m"} 7\n'
        'tailwatch:http_responses_total{code="429",handler="/v1/chat/completions",model_name="m"} 1\n'
        'tailwatch:http_responses_total{code="200",handler="/metrics",model_name="m"} 90\n'
        'tailwatch:http_responses_total{code="503",handler="/ready",model_name="m"} 4\n'
        'tailwatch:http_responses_total{code="404",handler="none",model_name="m"} 2\n'
        'tailwatch:http_responses_total{code="500",model_name="m"} 3\n'
    )
    normalised = normalise(parse_text(text), TARGET)
    mapped = {
        (dict(s.labels)["code"], dict(s.labels).get("handler")): s.value
        for s in normalised.samples
        if s.family == c.HTTP_RESPONSES_TOTAL
    }
    assert mapped == {
        ("200", "/v1/completions"): 7.0,
        ("429", "/v1/chat/completions"): 1.0,
        ("500", None): 3.0,
    }
    raw = {dict(r.labels)["handler"] for r in normalised.raw if "http_responses" in r.name}
    assert raw == {"/metrics", "/ready", "none"}
