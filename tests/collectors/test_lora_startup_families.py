"""The LoRA and start-up families of the bundled engine reach the store as canonical families,
and ``tailwatch rules check`` knows them: a ``metric-absent`` rule over them is accepted and
finds their series in a scrape of an engine serving adapters."""

from __future__ import annotations

import dataclasses

import pytest
from prometheus_client.parser import text_string_to_metric_families

from alerts import RuleError
from alerts.rules import builtin_rule_set, check_rules
from collectors import canonical as c
from collectors import normalise
from collectors.store import Store
from collectors.store.records import ScrapeRecord
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.lora.source import parse_lora_source
from engine.metrics import EngineMetrics
from engine.sampling_params import SamplingParams
from engine.startup import StartupPhases

NEW_FAMILIES = (
    c.LORA_REQUESTS_TOTAL,
    c.LORA_LOADS_TOTAL,
    c.LORA_LOAD_SECONDS_TOTAL,
    c.LORA_RESIDENT_ADAPTERS,
    c.LORA_TTFT_SECONDS,
    c.LORA_E2E_SECONDS,
    c.LORA_REQUESTS_INFO,
    c.STARTUP_PHASE_SECONDS,
    c.ENGINE_START_TIME_SECONDS,
)


@pytest.fixture(scope="module")
def exposition() -> str:
    """A simulated engine serving two adapters and the base model, started and warmed up."""
    engine = LLMEngine(EngineConfig(model="sim:llama-3.1-8b@h100", enable_lora=True))
    adapters = [
        engine.add_lora(n, parse_lora_source(f"random:rank=8,seed={i}")) for i, n in enumerate("ab")
    ]
    metrics = EngineMetrics("llama", {"block_size": 16})
    metrics.enable_lora()
    startup = StartupPhases(metrics, started=1_800_000_000.0, wall_clock=lambda: 1_800_000_042.0)
    startup.model_loaded()
    startup.warmed_up(1.5)
    for lora in (None, *adapters):
        engine.add_request([65] * 40, SamplingParams(max_tokens=3), lora_request=lora)
    while engine.has_unfinished_requests():
        metrics.on_step(engine, engine.step(), {})
    body, _ = metrics.render(None)
    return body.decode()


def test_every_new_family_is_mapped_with_its_labels(exposition):
    scrape = normalise(text_string_to_metric_families(exposition), "replica-a")
    samples = {s.family: s for s in scrape.samples}
    histograms = {h.family: h for h in scrape.histograms}
    assert set(NEW_FAMILIES) <= set(samples) | set(histograms)
    names = {
        dict(s.labels).get(c.LABEL_LORA_NAME)
        for s in scrape.samples
        if s.family == c.LORA_REQUESTS_TOTAL
    }
    assert names == {"", "a", "b"}
    phases = {
        dict(s.labels)[c.LABEL_PHASE]: s.value
        for s in scrape.samples
        if s.family == c.STARTUP_PHASE_SECONDS
    }
    assert phases == {"model_load": 42.0, "warm_up": 1.5, "ready": 42.0}
    info = dict(samples[c.LORA_REQUESTS_INFO].labels)
    assert {"max_lora", "running_lora_adapters", "waiting_lora_adapters"} <= set(info)
    assert histograms[c.LORA_TTFT_SECONDS].count >= 1


def test_rules_check_accepts_a_rule_over_the_new_families_and_finds_their_series(
    exposition, tmp_path
):
    rule = _metric_absent_over(NEW_FAMILIES)  # checked on construction: known families
    store = Store(f"sqlite:///{tmp_path / 'store.db'}")
    try:
        scrape = normalise(text_string_to_metric_families(exposition), "replica-a")
        store.write_scrapes([ScrapeRecord.from_normalised("replica-a", 1_800_000_100.0, scrape)])
        (absent,) = check_rules([rule], store)
    finally:
        store.close()
    assert absent.missing_families == ()


def test_rules_check_refuses_a_family_it_does_not_know():
    with pytest.raises(RuleError, match="unknown family 'lora_thrash_total'"):
        _metric_absent_over(("lora_thrash_total",))


def _metric_absent_over(families: tuple[str, ...]):
    rules, _ = builtin_rule_set()
    return dataclasses.replace(rules.get("metric-absent"), checked_families=families)
