"""/metrics in vLLM 0.33's dialect, driven by a real engine on the tiny preset.

Expected names, types, labels and buckets are copied from
shared/reference/engine-metrics.md (§2, §3, §6); expected counts follow its §5 and are
computed from what the engine handed the client, never from the metrics themselves.
"""

from __future__ import annotations

import asyncio
import math

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families as parse_om
from prometheus_client.parser import text_string_to_metric_families

from engine import metric_names
from engine.async_engine import AsyncEngine, QueueFullError
from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.metrics import EngineMetrics, wants_openmetrics
from engine.sampling_params import SamplingParams

MODEL = "tiny-test"
N, MAX_TOKENS = 4, 10
PARAMS = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True)

TTFT = [0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0]  # fmt: skip
ITL = [0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0]  # fmt: skip
LATENCY = [0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0]  # fmt: skip
ITERATION = [1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384]
TOKENS_256 = [1, 2, 5, 10, 20, 50, 100, 200]  # build_1_2_5_buckets(max_model_len=256)
E = ("model_name", "engine")
HISTOGRAMS = {
    "vllm:time_to_first_token_seconds": TTFT,
    "vllm:inter_token_latency_seconds": ITL,
    "vllm:request_time_per_output_token_seconds": ITL,
    "vllm:e2e_request_latency_seconds": LATENCY,
    "vllm:request_queue_time_seconds": LATENCY,
    "vllm:request_inference_time_seconds": LATENCY,
    "vllm:request_prefill_time_seconds": LATENCY,
    "vllm:request_decode_time_seconds": LATENCY,
    "vllm:iteration_tokens_total": ITERATION,
    "vllm:request_prompt_tokens": TOKENS_256,
    "vllm:request_generation_tokens": TOKENS_256,
    "vllm:request_max_num_generation_tokens": TOKENS_256,
    "vllm:request_params_max_tokens": TOKENS_256,
    "vllm:request_prefill_kv_computed_tokens": TOKENS_256,
    "vllm:request_params_n": [1, 2, 5, 10, 20],
    "vllm:request_num_preemptions": [1, 2, 3, 4, 5, 10, 20],
    "tailwatch:tenant_time_to_first_token_seconds": TTFT,
}
FAMILIES = {  # parsed family name → (type, label names)
    **{name: ("histogram", E) for name in HISTOGRAMS},
    "tailwatch:tenant_time_to_first_token_seconds": ("histogram", (*E, "tenant")),
    **{
        f"vllm:{name}": ("gauge", E)
        for name in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc")
    },
    **{
        f"vllm:{name}": ("counter", E)
        for name in (
            *("prefix_cache_queries", "prefix_cache_hits", "num_preemptions"),
            *("prompt_tokens", "generation_tokens", "prompt_tokens_cached"),
        )
    },
    "vllm:prompt_tokens_by_source": ("counter", (*E, "source")),
    "vllm:request_success": ("counter", (*E, "finished_reason")),
    "vllm:admission_rejections": ("counter", ("model_name", "reason")),
    "tailwatch:tenant_requests": ("counter", (*E, "tenant", "finished_reason")),
    "tailwatch:tenant_prompt_tokens": ("counter", (*E, "tenant")),
    "tailwatch:tenant_generation_tokens": ("counter", (*E, "tenant")),
}


def _start(front_kwargs=None, **config) -> tuple[AsyncEngine, EngineMetrics]:
    config = {"max_model_len": 256, "num_gpu_blocks": 64, "max_num_seqs": 8, **config}
    front = AsyncEngine(LLMEngine(EngineConfig(**config)), **(front_kwargs or {}))
    metrics = EngineMetrics(MODEL, front.knobs(), max_model_len=256)
    front.observers.append(metrics)
    front.start()
    return front, metrics


def _scrape(metrics: EngineMetrics, accept: str | None = None) -> dict:
    body, _ = metrics.render(accept)
    return {f.name: f for f in text_string_to_metric_families(body.decode())}


def _value(families: dict, sample: str, **labels: str) -> float:
    found = [
        s.value
        for f in families.values()
        for s in f.samples
        if s.name == sample and labels.items() <= s.labels.items()
    ]
    assert len(found) == 1, f"{sample}{labels}: {len(found)} samples"
    return found[0]


async def _until(condition, timeout: float = 20.0) -> None:
    for _ in range(int(timeout / 0.01)):
        if condition():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("condition not reached")


@pytest.fixture(scope="module")
def served():
    """N requests one after another, as vLLM's own test sends them; half for a tenant."""

    async def scenario():
        front, metrics = _start()
        finals, trace_ids = [], set()
        try:
            for i in range(N):

                def admitted(handle, trace_id=f"{i + 1:032x}"):
                    handle.trace_id = trace_id  # what RequestTracer sets when sampled
                    trace_ids.add(trace_id)

                tenant = "acme" if i % 2 else None
                stream = front.generate(
                    f"request {i}: a story", PARAMS, tenant=tenant, on_admitted=admitted
                )
                finals.append([out async for out in stream][-1])
        finally:
            front.shutdown()
        return metrics, finals, trace_ids, front.engine.stats()

    return asyncio.run(scenario())


def test_every_family_has_vllm_name_type_and_labels(served):
    families = _scrape(served[0])
    for name, (kind, labels) in FAMILIES.items():
        assert name in families, name
        assert families[name].type == kind, name
        for sample in families[name].samples:
            assert set(sample.labels) - {"le"} == set(labels), sample
    info = families["vllm:cache_config_info"]
    assert info.type == "gauge" and [s.value for s in info.samples] == [1.0]
    for label in ("block_size", "num_gpu_blocks", "enable_prefix_caching", "max_num_seqs"):
        assert label in info.samples[0].labels
    assert "model_name" not in info.samples[0].labels  # as vLLM: knobs plus engine only
    documented = {
        "vllm:num_requests_running": "Number of requests in model execution batches.",
        "vllm:generation_tokens": "Number of generation tokens processed.",
        "vllm:request_success": "Count of successfully processed requests.",
        "vllm:time_to_first_token_seconds": "Histogram of time to first token in seconds.",
    }
    assert {name: families[name].documentation for name in documented} == documented


def test_histogram_buckets_are_the_reference_lists(served):
    families = _scrape(served[0])
    for name, bounds in HISTOGRAMS.items():
        series: dict[tuple, list[str]] = {}
        for s in families[name].samples:
            if s.name == f"{name}_bucket":
                key = tuple(sorted((k, v) for k, v in s.labels.items() if k != "le"))
                series.setdefault(key, []).append(s.labels["le"])
        assert series, name
        for les in series.values():
            assert les[-1] == "+Inf", name
            assert [float(le) for le in les[:-1]] == [float(b) for b in bounds], name
    assert metric_names.build_1_2_5_buckets(4096)[-3:] == (500, 1000, 2000)
    assert metric_names.build_1_2_5_buckets(32768)[-3:] == (5000, 10000, 20000)
    assert metric_names.build_1_2_5_buckets(131072)[-2:] == (50000, 100000)


def test_counts_agree_with_the_requests_served(served):
    metrics, finals, _, stats = served
    f = _scrape(metrics)
    prompt = sum(out.num_prompt_tokens for out in finals)
    timings = [out.timings for out in finals]
    assert all(out.num_output_tokens == MAX_TOKENS for out in finals)
    for name in (
        *("time_to_first_token", "e2e_request_latency", "request_queue_time"),
        *("request_prefill_time", "request_decode_time", "request_inference_time"),
        "request_time_per_output_token",
    ):
        assert _value(f, f"vllm:{name}_seconds_count") == N, name
    assert _value(f, "vllm:inter_token_latency_seconds_count") == N * (MAX_TOKENS - 1)
    assert _value(f, "vllm:request_prompt_tokens_sum") == prompt
    assert _value(f, "vllm:request_generation_tokens_sum") == N * MAX_TOKENS
    assert _value(f, "vllm:request_params_max_tokens_sum") == N * MAX_TOKENS
    assert _value(f, "vllm:request_params_n_count") == N
    assert _value(f, "vllm:iteration_tokens_total_sum") == prompt + N * MAX_TOKENS
    assert _value(f, "vllm:iteration_tokens_total_count") == N * MAX_TOKENS  # one per step
    assert _value(f, "vllm:prompt_tokens_total") == prompt
    assert _value(f, "vllm:generation_tokens_total") == N * MAX_TOKENS
    assert _value(f, "vllm:request_success_total", finished_reason="length") == N
    for reason in ("stop", "abort", "error", "repetition"):  # pre-created at 0
        assert _value(f, "vllm:request_success_total", finished_reason=reason) == 0
    assert _value(f, "vllm:prefix_cache_queries_total") == stats.prefix_cache_queries_tokens > 0
    assert _value(f, "vllm:prefix_cache_hits_total") == stats.prefix_cache_hits_tokens
    # The latencies are the engine's own timestamps, not re-measured ones.
    for name, per_request in (
        ("time_to_first_token", [t.ttft_seconds for t in timings]),
        ("e2e_request_latency", [t.e2e_seconds for t in timings]),
        ("request_queue_time", [t.queue_seconds for t in timings]),
        ("inter_token_latency", [sum(t.inter_token_seconds) for t in timings]),
    ):
        assert math.isclose(_value(f, f"vllm:{name}_seconds_sum"), sum(per_request)), name
    tenant = {"tenant": "acme", "finished_reason": "length"}
    assert _value(f, "tailwatch:tenant_requests_total", **tenant) == N // 2
    no_tenant = {"tenant": "", "finished_reason": "length"}
    assert _value(f, "tailwatch:tenant_requests_total", **no_tenant) == N - N // 2
    acme_tokens = _value(f, "tailwatch:tenant_generation_tokens_total", tenant="acme")
    assert acme_tokens == N // 2 * MAX_TOKENS
    assert _value(f, "tailwatch:tenant_time_to_first_token_seconds_count", tenant="") == N - N // 2
    for gauge in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        assert _value(f, f"vllm:{gauge}") == 0, gauge


def test_openmetrics_carries_trace_id_exemplars_and_keeps_the_colon(served):
    metrics, _, trace_ids, _ = served
    body, content_type = metrics.render("application/openmetrics-text; version=1.0.0")
    assert content_type.startswith("application/openmetrics-text; version=1.0.0")
    families = {f.name: f for f in parse_om(body.decode())}
    for kind in ("time_to_first_token", "inter_token_latency", "e2e_request_latency"):
        name = f"vllm:{kind}_seconds"
        samples = families[name].samples
        assert all(s.name.startswith("vllm:") for s in samples), name
        found = {s.exemplar.labels["trace_id"] for s in samples if s.exemplar}
        assert found and found <= trace_ids, name
    plain, plain_type = metrics.render("text/plain;version=0.0.4")
    assert plain_type == "text/plain; version=0.0.4; charset=utf-8"
    assert b"trace_id" not in plain


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (None, False),
        ("", False),
        ("text/plain;version=0.0.4", False),
        ("application/openmetrics-text", True),
        ("application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5", True),
        ("text/plain;q=0.9, application/openmetrics-text; version=0.0.1; q=0.75", True),
        ("application/openmetrics-text;q=0", False),
        ("application/json, */*;q=0.1", False),
    ],
)
def test_accept_header_negotiation(accept, expected):
    assert wants_openmetrics(accept) is expected


def test_gauges_return_to_zero_after_aborting_in_flight_requests():
    async def scenario():
        front, metrics = _start({"max_concurrency_per_tenant": 1}, max_num_seqs=2)
        long = SamplingParams(max_tokens=200, ignore_eos=True)

        async def consume(i):
            tenant = "acme" if i == 0 else None
            async for _ in front.generate(f"long request {i}", long, tenant=tenant):
                pass

        try:
            tasks = [asyncio.create_task(consume(i)) for i in range(4)]
            scraped = {}

            def busy() -> bool:
                scraped.update(_scrape(metrics))
                running = _value(scraped, "vllm:num_requests_running")
                return running == 2 and _value(scraped, "vllm:num_requests_waiting") == 2

            await _until(busy)
            assert _value(scraped, "vllm:kv_cache_usage_perc") > 0
            with pytest.raises(QueueFullError):
                async for _ in front.generate("one too many", long, tenant="acme"):
                    pass
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await _until(lambda: front.num_in_flight == 0)
        finally:
            front.shutdown()
        return _scrape(metrics)

    f = asyncio.run(scenario())
    for gauge in ("num_requests_running", "num_requests_waiting", "kv_cache_usage_perc"):
        assert _value(f, f"vllm:{gauge}") == 0, gauge
    assert _value(f, "vllm:request_success_total", finished_reason="abort") == 4
    assert _value(f, "vllm:e2e_request_latency_seconds_count") == 0  # aborts stay out
    # Aborts deliver outputs without a step: no iteration is observed for them.
    computed = _value(f, "vllm:prompt_tokens_total") + _value(f, "vllm:generation_tokens_total")
    assert _value(f, "vllm:iteration_tokens_total_sum") == computed
    assert _value(f, "vllm:admission_rejections_total", reason="tenant_concurrency") == 1
    acme = {"tenant": "acme"}
    assert _value(f, "tailwatch:tenant_requests_total", **acme, finished_reason="rejected") == 1
    assert _value(f, "tailwatch:tenant_requests_total", **acme, finished_reason="abort") == 1


def test_knob_change_relabels_cache_config_info():
    async def scenario():
        front, metrics = _start()
        try:
            before = _scrape(metrics)
            await front.update_knobs({"max_num_seqs": 4, "enable_prefix_caching": False})
            return before, _scrape(metrics)
        finally:
            front.shutdown()

    before, after = asyncio.run(scenario())
    (old,) = before["vllm:cache_config_info"].samples
    (new,) = after["vllm:cache_config_info"].samples  # the old label set is gone
    assert old.labels["max_num_seqs"] == "8" and old.labels["enable_prefix_caching"] == "True"
    assert new.labels["max_num_seqs"] == "4" and new.labels["enable_prefix_caching"] == "False"
    assert new.labels["num_gpu_blocks"] == "64" and new.labels["engine"] == "0"
    assert new.value == 1
    for knob in ("max_num_seqs", "enable_prefix_caching"):
        assert _value(after, "tailwatch:knob_changes_total", knob=knob) == 1


def test_preemptions_and_prefix_hits_follow_the_scheduler():
    engine = LLMEngine(EngineConfig(max_model_len=128, num_gpu_blocks=12, max_num_seqs=6))
    metrics = EngineMetrics(MODEL, engine.knobs(), max_model_len=128)
    prefix = "a shared system prompt, two blocks long. "
    aborted = engine.add_request("gone before the first step", SamplingParams())
    metrics.on_step(engine, engine.abort([aborted]), {})  # outputs, but no step
    for i in range(6):
        engine.add_request(f"{prefix}{i}", SamplingParams(max_tokens=40, ignore_eos=True))
    finals, iteration_tokens, num_steps = [], 0, 0
    while engine.has_unfinished_requests():
        outputs = engine.step()
        num_steps += 1
        iteration_tokens += engine.last_step.num_prompt_tokens + len(outputs)
        metrics.on_step(engine, outputs, {})  # no front end: no handles
        finals += [out for out in outputs if out.finished]
    f, stats = _scrape(metrics), engine.stats()
    assert _value(f, "vllm:num_preemptions_total") == stats.num_preemptions_total > 0
    assert _value(f, "vllm:request_num_preemptions_sum") == sum(o.num_preemptions for o in finals)
    assert _value(f, "vllm:prefix_cache_hits_total") == stats.prefix_cache_hits_tokens > 0
    cached = sum(out.num_cached_tokens for out in finals)
    prompt = sum(out.num_prompt_tokens for out in finals)
    assert _value(f, "vllm:prompt_tokens_total") == prompt  # cached included
    assert _value(f, "vllm:prompt_tokens_cached_total") == cached > 0
    assert _value(f, "vllm:request_prefill_kv_computed_tokens_sum") == prompt - cached
    assert _value(f, "vllm:iteration_tokens_total_sum") == iteration_tokens  # recompute too
    assert _value(f, "vllm:iteration_tokens_total_count") == num_steps
    assert _value(f, "vllm:request_success_total", finished_reason="abort") == 1
    assert _value(f, "vllm:request_params_max_tokens_count") == 0  # unknown without handles


def test_front_end_series_and_bounded_tenants(monkeypatch):
    monkeypatch.setattr(metric_names, "MAX_TENANTS", 2)
    metrics = EngineMetrics(MODEL, {"block_size": 16})
    for code in (200, 200, 429):
        metrics.observe_http_response(code)
    for tenant in ("a", "b", "c", "d"):
        metrics.on_rejected("max_num_queued_reqs", tenant)
    f = _scrape(metrics)
    assert _value(f, "tailwatch:http_responses_total", code="200") == 2
    assert _value(f, "tailwatch:http_responses_total", code="429") == 1
    assert _value(f, "vllm:admission_rejections_total", reason="max_num_queued_reqs") == 4
    rejected = {"finished_reason": "rejected"}
    assert _value(f, "tailwatch:tenant_requests_total", tenant="a", **rejected) == 1
    assert _value(f, "tailwatch:tenant_requests_total", tenant="_other", **rejected) == 2
    with pytest.raises(ConfigError, match="not usable as vllm:cache_config_info label"):
        EngineMetrics(MODEL, {"block-size": 16})
