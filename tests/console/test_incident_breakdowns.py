"""The per-tenant and per-adapter breakdowns of an incident (console/incidents/breakdowns.py):
three scrapes of the bundled engine's per-tenant and per-adapter series, through the dialect
table into the fake reader (what the store and Prometheus both answer, by the reader
contract), read back as the incident window against its baseline."""

from __future__ import annotations

import math

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from alerts.triage import TimeWindow
from collectors.dialects import normalise
from collectors.scrape import parse_exposition
from collectors.store.fake import FakeMetricsReader
from collectors.store.records import ScrapeRecord
from console.incidents.breakdowns import (
    ADAPTER,
    TENANT,
    adapter_names,
    breakdown_frame,
    columns,
    points_here,
)

T0, T1, T2 = 1000.0, 1600.0, 1900.0
BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Engine:
    """The bundled engine's per-tenant and per-adapter families, driven by hand."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        tenant, lora = ["model_name", "tenant"], ["model_name", "lora_name"]
        self.requests = Counter(
            "tailwatch:tenant_requests", "", [*tenant, "finished_reason"], registry=self.registry
        )
        self.prompt = Counter("tailwatch:tenant_prompt_tokens", "", tenant, registry=self.registry)
        self.ttft = Histogram(
            "tailwatch:tenant_time_to_first_token_seconds", "", tenant, buckets=BUCKETS,
            registry=self.registry,
        )  # fmt: skip
        self.lora_requests = Counter(
            "tailwatch:lora_requests", "", [*lora, "finished_reason"], registry=self.registry
        )
        self.loads = Counter("tailwatch:lora_loads", "", lora, registry=self.registry)
        self.load_seconds = Counter("tailwatch:lora_load_seconds", "", lora, registry=self.registry)
        self.e2e = Histogram(
            "tailwatch:lora_e2e_request_latency_seconds", "", lora, buckets=BUCKETS,
            registry=self.registry,
        )  # fmt: skip

    def tenant(self, name: str, n: int, ttft: float, prompt: int) -> None:
        self.requests.labels("m", name, "stop")
        self.prompt.labels("m", name)
        self.ttft.labels("m", name)
        for _ in range(n):
            self.requests.labels("m", name, "stop").inc()
            self.prompt.labels("m", name).inc(prompt)
            self.ttft.labels("m", name).observe(ttft)

    def adapter(self, name: str, n: int, e2e: float, loads: int = 0) -> None:
        self.lora_requests.labels("m", name, "stop")
        self.e2e.labels("m", name)
        for _ in range(n):
            self.lora_requests.labels("m", name, "stop").inc()
            self.e2e.labels("m", name).observe(e2e)
        self.loads.labels("m", name).inc(loads)
        self.load_seconds.labels("m", name).inc(2.0 * loads)

    def scrape(self, at: float) -> ScrapeRecord:
        text = generate_latest(self.registry).decode()
        normalised = normalise(parse_exposition(text, "text/plain"), target="r0")
        return ScrapeRecord.from_normalised("r0", at, normalised)


def scrapes() -> list[ScrapeRecord]:
    """The three scrapes at T0, T1 and T2 (the baseline, then the incident)."""
    engine = Engine()
    # NOTE: the series exist from the first scrape (a series first seen has no increase yet)
    for name in ("chat", "batch"):
        engine.tenant(name, 0, 0.0, 0)
    for name in ("", "support", "legal"):
        engine.adapter(name, 0, 0.0)
    records = [engine.scrape(T0)]
    # the baseline: "chat" 90 requests at 80 ms, "batch" 10 at 80 ms; adapters warm
    engine.tenant("chat", 90, 0.08, 100)
    engine.tenant("batch", 10, 0.08, 100)
    engine.adapter("", 50, 0.4)
    engine.adapter("support", 40, 0.4)
    engine.adapter("legal", 2, 0.4)
    records.append(engine.scrape(T1))
    # the incident: "batch" takes most of the prompt tokens; everyone's first tokens wait
    engine.tenant("chat", 60, 0.7, 100)
    engine.tenant("batch", 40, 0.3, 4000)
    engine.adapter("support", 40, 0.4)
    engine.adapter("legal", 5, 3.0, loads=5)
    records.append(engine.scrape(T2))
    return records


def reader() -> FakeMetricsReader:
    return FakeMetricsReader(scrapes())


WINDOW, BASELINE = TimeWindow(T1, T2), TimeWindow(T0, T1)


def test_per_tenant_the_starved_tenant_first_with_shares_before_and_during():
    frame = breakdown_frame(reader(), TENANT, ["batch", "chat", "absent"], WINDOW, BASELINE)
    assert list(frame.columns) == columns(TENANT)
    assert list(frame["tenant"]) == ["chat", "batch"]  # the absent tenant has no row
    chat, batch = frame.iloc[0], frame.iloc[1]
    assert (chat["requests"], batch["requests"]) == (60.0, 40.0)
    assert math.isclose(batch["share"], 0.4) and math.isclose(batch["share before"], 0.1)
    assert math.isclose(batch["prompt tokens"], 160_000.0)
    assert chat["TTFT p95 (ms)"] > 500 and chat["TTFT p95 before (ms)"] < 100
    assert chat["change"] > batch["change"] > 1


def test_per_adapter_the_rare_adapter_that_loads_cold_first_and_the_base_model_left_out():
    metrics = reader()
    assert adapter_names(metrics) == ["legal", "support"]
    frame = breakdown_frame(metrics, ADAPTER, adapter_names(metrics), WINDOW, BASELINE)
    assert list(frame["adapter"]) == ["legal", "support"]
    legal, support = frame.iloc[0], frame.iloc[1]
    assert (legal["cold loads"], legal["load seconds"]) == (5.0, 10.0)
    assert (support["cold loads"], support["change"]) == (0.0, 1.0)
    assert legal["e2e p95 (ms)"] > 2000 and legal["change"] > 5


def test_the_breakdowns_follow_the_causes_that_point_at_them():
    assert points_here(TENANT, ["noisy-tenant"]) and points_here(TENANT, ["overload"])
    assert points_here(ADAPTER, ["kv-exhaustion", "adapter-thrash"])
    assert not points_here(ADAPTER, ["overload"]) and not points_here(TENANT, [])
