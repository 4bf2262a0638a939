"""Conformance: each engine version's exposition, written from its upstream definitions
(``fixtures/conformance/``, sources in ``docs/collectors.md``, "Engine versions"), fills every
canonical family its dialect promises, through the real normalisation path. A rename upstream
that the tables miss fails here, not on a dashboard."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families as parse_text

from collectors import Dialect, Flag, normalise
from collectors import canonical as c
from collectors.dialect_rules import (
    DYNAMO_RULES,
    GAPS,
    LLAMACPP_RULES,
    SGLANG_RULES,
    TGI_RULES,
    TRITON_RULES,
    TRTLLM_RULES,
    TRTLLM_UNPREFIXED_RULES,
    VLLM_RULES,
)
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader
from engine import metric_names as engine_names
from slo import ClassicHistogram, LayoutMismatchError, merge_histograms

FIXTURES = Path(__file__).parent / "fixtures" / "conformance"
TARGET = "replica-a:8000"

_LATENCY = {c.E2E_SECONDS, c.QUEUE_SECONDS, c.PREFILL_SECONDS, c.DECODE_SECONDS}
_TOKENS = {c.PROMPT_TOKENS_TOTAL, c.GENERATION_TOKENS_TOTAL}
_VLLM_V1 = {
    c.TTFT_SECONDS, c.ITL_SECONDS, *_LATENCY, c.PROMPT_TOKENS, c.GENERATION_TOKENS, *_TOKENS,
    c.PREEMPTIONS_TOTAL, c.PREFIX_CACHE_QUERIES_TOTAL, c.PREFIX_CACHE_HITS_TOTAL,
    c.REQUESTS_TOTAL, c.REQUESTS_RUNNING, c.REQUESTS_WAITING, c.KV_CACHE_USAGE,
}  # fmt: skip
_LLAMACPP = {*_TOKENS, c.REQUESTS_RUNNING, c.REQUESTS_WAITING}

#: fixture → (dialect, every canonical family the dialect promises for that version).
PROMISES: dict[str, tuple[Dialect, set[str]]] = {
    "vllm-0.33.txt": (Dialect.VLLM, _VLLM_V1),
    "vllm-buckets-3168f587.txt": (Dialect.VLLM, _VLLM_V1),
    # a speculating server's extra families (registered only with --speculative-config)
    "vllm-spec-decode-016a8587.txt": (Dialect.VLLM, {
        c.SPEC_DECODE_DRAFTS_TOTAL, c.SPEC_DECODE_DRAFT_TOKENS_TOTAL,
        c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL, c.SPEC_DECODE_ACCEPTED_TOKENS_PER_POS_TOTAL,
    }),
    "vllm-0.8-v1.txt": (Dialect.VLLM, _VLLM_V1),
    "vllm-0.5-v0.txt": (Dialect.VLLM, {
        c.TTFT_SECONDS, c.ITL_SECONDS, c.E2E_SECONDS, c.PROMPT_TOKENS, c.GENERATION_TOKENS,
        *_TOKENS, c.PREEMPTIONS_TOTAL, c.REQUESTS_TOTAL, c.REQUESTS_RUNNING, c.REQUESTS_WAITING,
        c.KV_CACHE_USAGE,
    }),
    "vllm-0.8.5-v0.txt": (Dialect.VLLM, {c.KV_CACHE_USAGE, c.ITL_SECONDS, c.QUEUE_SECONDS}),
    # a speculating SGLang server's acceptance gauges
    "sglang-spec-00ae9c15.txt": (Dialect.SGLANG, {c.SPEC_ACCEPT_RATE, c.SPEC_ACCEPT_LENGTH}),
    "sglang-44cedc2b.txt": (Dialect.SGLANG, {
        c.TTFT_SECONDS, c.ITL_SECONDS, c.E2E_SECONDS, c.QUEUE_SECONDS, c.PROMPT_TOKENS,
        c.GENERATION_TOKENS, *_TOKENS, c.PREEMPTIONS_TOTAL, c.PREFIX_CACHE_HITS_TOTAL,
        c.REQUESTS_TOTAL, c.REQUESTS_RUNNING, c.REQUESTS_WAITING, c.KV_CACHE_USAGE,
        c.HTTP_RESPONSES_TOTAL,
    }),
    # a server with --enable-lora: its adapter pool's slots, used and in all
    "sglang-lora-00ae9c15.txt": (Dialect.SGLANG, {c.LORA_RESIDENT_ADAPTERS, c.LORA_POOL_SLOTS}),
    "tgi-3.3.7.txt": (Dialect.TGI, {
        c.E2E_SECONDS, c.QUEUE_SECONDS, c.PREFILL_SECONDS, c.DECODE_SECONDS, c.PROMPT_TOKENS,
        c.GENERATION_TOKENS, *_TOKENS, c.REQUESTS_TOTAL, c.REQUESTS_RUNNING, c.REQUESTS_WAITING,
    }),
    # Current builds: a cached-token counter, no KV-usage gauge; older builds the reverse.
    "llamacpp-current.txt": (Dialect.LLAMACPP, {*_LLAMACPP, c.PREFIX_CACHE_HITS_TOTAL}),
    "llamacpp-older.txt": (Dialect.LLAMACPP, {*_LLAMACPP, c.KV_CACHE_USAGE}),
    "dynamo-frontend-79a21ca4.txt": (Dialect.DYNAMO, {
        c.CLIENT_TTFT_SECONDS, c.ITL_SECONDS, c.E2E_SECONDS, c.PROMPT_TOKENS, c.GENERATION_TOKENS,
        *_TOKENS, c.REQUESTS_TOTAL, c.REQUESTS_RUNNING, c.REQUESTS_WAITING,
    }),
    "dynamo-worker-04070c75.txt": (Dialect.DYNAMO, {c.KV_CACHE_USAGE}),
    "dynamo-worker-c013c046.txt": (Dialect.DYNAMO, {c.KV_CACHE_USAGE}),
    "trtllm-050f80de.txt": (Dialect.TRTLLM, {
        c.TTFT_SECONDS, *_LATENCY, *_TOKENS, c.PREFIX_CACHE_HITS_TOTAL, c.REQUESTS_TOTAL,
        c.REQUESTS_RUNNING, c.REQUESTS_WAITING, c.KV_CACHE_USAGE,
    }),
    "trtllm-89fd9b74.txt": (Dialect.TRTLLM, {
        c.TTFT_SECONDS, c.E2E_SECONDS, c.QUEUE_SECONDS, c.REQUESTS_TOTAL,
    }),
    # Older backends: no engine waiting queue and no KV fraction; the core's pending count only.
    "triton-trtllm-27e4bfbd.txt": (Dialect.TRITON, {c.REQUESTS_RUNNING, c.REQUESTS_WAITING}),
    "triton-trtllm-newer.txt": (Dialect.TRITON, {
        c.TTFT_SECONDS, c.REQUESTS_RUNNING, c.REQUESTS_WAITING, c.KV_CACHE_USAGE,
    }),
}  # fmt: skip

#: Every dialect's table but the bundled engine's (its own exposition is tested in engine/).
COVERED_TABLES = {
    Dialect.VLLM: VLLM_RULES,
    Dialect.SGLANG: SGLANG_RULES,
    Dialect.TGI: TGI_RULES,
    Dialect.LLAMACPP: LLAMACPP_RULES,
    Dialect.DYNAMO: DYNAMO_RULES,
    Dialect.TRTLLM: TRTLLM_RULES + TRTLLM_UNPREFIXED_RULES,
    Dialect.TRITON: TRITON_RULES,
}


def _text(name: str) -> str:
    return (FIXTURES / name).read_text()


def _norm(name: str) -> c.Normalised:
    return normalise(parse_text(_text(name)), TARGET)


def _family_names(name: str) -> set[str]:
    return {f.name for f in parse_text(_text(name))}


def _produced(normalised: c.Normalised) -> set[str]:
    return {s.family for s in normalised.samples} | {h.family for h in normalised.histograms}


def test_every_fixture_is_listed() -> None:
    assert {p.name for p in FIXTURES.glob("*.txt")} == set(PROMISES)


@pytest.mark.parametrize("name", sorted(PROMISES))
def test_fixture_fills_exactly_the_promised_families(name: str) -> None:
    dialect, promised = PROMISES[name]
    normalised = _norm(name)
    assert dialect.value in normalised.dialects
    assert _produced(normalised) == promised, name
    for histogram in normalised.histograms:
        assert histogram.count > 0, (name, histogram.family)
    # No rule met a family of the wrong type or an unusable histogram (a dialect's standing
    # gaps may say "kept raw" too; they are not about this exposition).
    gaps = {note for notes in GAPS.values() for note in notes}
    assert not [n for n in normalised.notes if "kept raw" in n and n not in gaps], normalised.notes


@pytest.mark.parametrize("dialect", sorted(COVERED_TABLES, key=lambda d: d.value))
def test_every_rule_reads_a_name_some_engine_version_exports(dialect: Dialect) -> None:
    """A rule whose source no version exports (a typo, a name from documentation only) would
    read empty forever; every source name must appear in one of the dialect's fixtures."""
    exported = set().union(*(_family_names(n) for n, (d, _) in PROMISES.items() if d is dialect))
    missing = {rule.source for rule in COVERED_TABLES[dialect]} - exported
    assert not missing, f"{dialect.value}: no fixture exports {sorted(missing)}"


def _one(items: tuple, family: str) -> c.CanonicalSample | c.CanonicalHistogram:
    found = [i for i in items if i.family == family]
    assert len(found) == 1, (family, found)
    return found[0]


# (fixture, canonical family, source family, flags) for the mappings issue 16 fixed.
FLAG_CASES = [
    ("llamacpp-current.txt", c.PROMPT_TOKENS_TOTAL, "llamacpp:prompt_tokens", {Flag.EXCLUDES_CACHED}),
    ("llamacpp-older.txt", c.PROMPT_TOKENS_TOTAL, "llamacpp:prompt_tokens", {Flag.EXCLUDES_CACHED}),
    ("llamacpp-current.txt", c.PREFIX_CACHE_HITS_TOTAL, "llamacpp:prompt_tokens_cached", set()),
    ("sglang-44cedc2b.txt", c.PROMPT_TOKENS_TOTAL, "sglang:prompt_tokens", {Flag.PER_FINISHED_REQUEST}),
    ("sglang-44cedc2b.txt", c.GENERATION_TOKENS_TOTAL, "sglang:generation_tokens", {Flag.PER_FINISHED_REQUEST}),
    ("sglang-44cedc2b.txt", c.PREFIX_CACHE_HITS_TOTAL, "sglang:cached_tokens", {Flag.PER_FINISHED_REQUEST}),
    ("tgi-3.3.7.txt", c.PROMPT_TOKENS_TOTAL, "tgi_request_input_length", {Flag.FROM_HISTOGRAM_SUM, Flag.PER_VALIDATED_REQUEST}),
    ("tgi-3.3.7.txt", c.GENERATION_TOKENS_TOTAL, "tgi_request_generated_tokens", {Flag.FROM_HISTOGRAM_SUM, Flag.PER_FINISHED_REQUEST}),
    ("dynamo-worker-04070c75.txt", c.KV_CACHE_USAGE, "dynamo_component_gpu_cache_usage_percent", set()),
    ("dynamo-worker-c013c046.txt", c.KV_CACHE_USAGE, "dynamo_component_kvstats_gpu_cache_usage_percent", {Flag.RENAMED}),
    ("vllm-0.33.txt", c.PROMPT_TOKENS_TOTAL, "vllm:prompt_tokens", set()),
    ("trtllm-050f80de.txt", c.PROMPT_TOKENS_TOTAL, "trtllm_prompt_tokens", {Flag.PER_FINISHED_REQUEST}),
    ("trtllm-050f80de.txt", c.GENERATION_TOKENS_TOTAL, "trtllm_generation_tokens", {Flag.PER_FINISHED_REQUEST}),
    ("trtllm-050f80de.txt", c.PREFIX_CACHE_HITS_TOTAL, "trtllm_prompt_cached_tokens", {Flag.PER_FINISHED_REQUEST}),
    ("triton-trtllm-newer.txt", c.KV_CACHE_USAGE, "nv_trt_llm_kv_cache_block_metrics", set()),
    ("triton-trtllm-27e4bfbd.txt", c.REQUESTS_WAITING, "nv_inference_pending_request_count", {Flag.BEFORE_BACKEND}),
]  # fmt: skip


@pytest.mark.parametrize(("name", "family", "source", "flags"), FLAG_CASES)
def test_mapping_carries_the_flags_of_its_meaning(
    name: str, family: str, source: str, flags: set[Flag]
) -> None:
    sample = _one(_norm(name).samples, family)
    assert (sample.source, sample.flags) == (source, flags)


_DIRECT = [case for case in FLAG_CASES if Flag.FROM_HISTOGRAM_SUM not in case[3]]


@settings(max_examples=25, deadline=None)
@given(
    case=st.sampled_from(_DIRECT),
    value=st.one_of(
        st.floats(min_value=0, max_value=1e300, allow_nan=False, allow_infinity=False),
        st.integers(min_value=0, max_value=2**63),
    ),
)
def test_any_value_passes_through_with_its_flags(
    case: tuple[str, str, str, set[Flag]], value: float
) -> None:
    """Whatever the engine reports (0, huge, fractional) comes out unchanged and flagged."""
    name, family, source, flags = case
    lines = []
    for line in _text(name).splitlines():
        head = line.split("{")[0].split(" ")[0]
        if not line.startswith("#") and head in (source, f"{source}_total"):
            line = f"{line.rsplit(' ', 1)[0]} {float(value)!r}"
        lines.append(line)
    sample = _one(normalise(parse_text("\n".join(lines) + "\n"), TARGET).samples, family)
    assert (sample.value, sample.flags) == (float(value), flags)


@pytest.mark.parametrize("name", sorted(PROMISES))
def test_every_fixture_is_one_storable_scrape(name: str) -> None:
    """No two source series land on one stored series (the store would refuse the scrape)."""
    record = ScrapeRecord.from_normalised(TARGET, 1.0, _norm(name))
    assert FakeMetricsReader().write_scrape(record)


def test_tritons_two_waiting_queues_stay_apart() -> None:
    """Newer TensorRT-LLM backends report their own waiting queue next to Triton core's pending
    count; both were unflagged requests_waiting with the same labels, one series twice."""
    waiting = [
        s for s in _norm("triton-trtllm-newer.txt").samples if s.family == c.REQUESTS_WAITING
    ]
    assert sorted((s.source, s.flags) for s in waiting) == [
        ("nv_inference_pending_request_count", {Flag.BEFORE_BACKEND}),
        ("nv_trt_llm_request_metrics", set()),
    ]


def test_tgi_prompt_token_histogram_is_per_validated_request() -> None:
    histogram = _one(_norm("tgi-3.3.7.txt").histograms, c.PROMPT_TOKENS)
    assert histogram.flags == {Flag.PER_VALIDATED_REQUEST}
    assert histogram.upper_bounds[:2] == (10.0, 20.0) and len(histogram.upper_bounds) == 101


def test_llamacpp_prompt_tokens_never_merge_with_vllms() -> None:
    """Excluding cached tokens is a different quantity: the flags keep the series apart."""
    llama = _one(_norm("llamacpp-current.txt").samples, c.PROMPT_TOKENS_TOTAL)
    vllm = _one(_norm("vllm-0.33.txt").samples, c.PROMPT_TOKENS_TOTAL)
    assert (llama.flags & c.SEMANTIC_FLAGS) != (vllm.flags & c.SEMANTIC_FLAGS)


def test_current_llamacpp_notes_that_nothing_reports_kv_usage() -> None:
    assert any("no KV-cache usage gauge" in n for n in _norm("llamacpp-current.txt").notes)


def _classic(h: c.CanonicalHistogram) -> ClassicHistogram:
    return ClassicHistogram(h.upper_bounds, h.cumulative_counts, h.sum_value)


def test_mixed_vllm_layouts_are_reported_not_merged() -> None:
    """A fleet of a 0.33-layout and a 3168f587-layout server: TTFT (same layout) adds up,
    e2e (0.1, 0.2 added at the start) is refused with both layouts named."""
    old, new = _norm("vllm-0.33.txt"), _norm("vllm-buckets-3168f587.txt")
    ttft = merge_histograms([_classic(_one(x.histograms, c.TTFT_SECONDS)) for x in (old, new)])
    assert ttft.total_count == 4
    with pytest.raises(LayoutMismatchError, match=r"22 vs 24 bounds.*le=0\.3 vs le=0\.1"):
        merge_histograms([_classic(_one(x.histograms, c.E2E_SECONDS)) for x in (old, new)])


def _bounds(name: str, family: str) -> tuple[float, ...]:
    return _one(_norm(name).histograms, family).upper_bounds[:-1]


@pytest.mark.parametrize(
    ("family", "bucket_family"),
    [
        (c.TTFT_SECONDS, "time_to_first_token"),
        (c.ITL_SECONDS, "inter_token_latency"),
        (c.E2E_SECONDS, "request_latency"),
        (c.QUEUE_SECONDS, "request_latency"),
        (c.PREFILL_SECONDS, "request_latency"),
        (c.DECODE_SECONDS, "request_latency"),
        (c.PROMPT_TOKENS, engine_names.REQUEST_TOKENS),
    ],
)
def test_bundled_engine_follows_the_vllm_033_layouts(family: str, bucket_family: str) -> None:
    engine = engine_names.buckets_for(bucket_family, 4096)
    assert tuple(map(float, engine)) == _bounds("vllm-0.33.txt", family)
    if family in _LATENCY:
        assert tuple(map(float, engine)) != _bounds("vllm-buckets-3168f587.txt", family)


def test_bundled_iteration_buckets_are_the_033_powers_of_two_not_1_2_5() -> None:
    wire = [
        float(s.labels["le"])
        for f in parse_text(_text("vllm-0.33.txt"))
        if f.name == "vllm:iteration_tokens_total"
        for s in f.samples
        if s.name.endswith("_bucket") and not math.isinf(float(s.labels["le"]))
    ]
    assert tuple(map(float, engine_names.BUCKETS["iteration_tokens"])) == tuple(wire)
