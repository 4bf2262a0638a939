"""The incident's clients-against-engines table (console/incidents/client_gap.py): scrapes of
a gateway's client TTFT family (``loadgen.client_metrics``, as the virtual gateway exports it)
and an engine's vLLM TTFT, through the dialect table into the fake reader, read back as the
incident window against its baseline."""

from __future__ import annotations

import math

import pytest
from prometheus_client import CollectorRegistry, Histogram, generate_latest

from alerts.triage import TimeWindow
from collectors.dialects import normalise
from collectors.scrape import parse_exposition
from collectors.store.fake import FakeMetricsReader
from collectors.store.records import ScrapeRecord
from console.incidents.client_gap import CLIENTS, COLUMNS, ENGINES, GAP, gap_frame
from engine.metric_names import BUCKETS
from loadgen.client_metrics import ClientMetrics

T0, T1, T2 = 1000.0, 1600.0, 1900.0
WINDOW, BASELINE = TimeWindow(T1, T2), TimeWindow(T0, T1)


class Fleet:
    """One engine's TTFT and the gateway in front of it, driven by hand."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.ttft = Histogram(
            "vllm:time_to_first_token_seconds", "", ["model_name"],
            buckets=BUCKETS["time_to_first_token"], registry=self.registry,
        )  # fmt: skip
        self.gateway = ClientMetrics()

    def serve(self, n: int, engine_ttft: float, delay: float, *, gateway: bool = True) -> None:
        for _ in range(n):
            self.ttft.labels("m").observe(engine_ttft)
            if gateway:
                self.gateway.observe_ttft("m", engine_ttft + delay)

    def scrapes(self, at: float, *, gateway: bool = True) -> list[ScrapeRecord]:
        out = []
        targets = [("r0", generate_latest(self.registry).decode(), "text/plain")]
        if gateway:
            targets.append(("gateway", *self.gateway.render()))
        for target, text, content_type in targets:
            normalised = normalise(parse_exposition(text, content_type), target=target)
            out.append(ScrapeRecord.from_normalised(target, at, normalised))
        return out


def _reader(before: float, during: float, *, gateway: bool = True) -> FakeMetricsReader:
    fleet, reader = Fleet(), FakeMetricsReader()
    # NOTE: a series is scraped once it has an observation: some before the baseline starts
    fleet.serve(10, 0.03, before, gateway=gateway)
    reader.write_scrapes(fleet.scrapes(T0, gateway=gateway))
    fleet.serve(200, 0.03, before, gateway=gateway)
    reader.write_scrapes(fleet.scrapes(T1, gateway=gateway))
    fleet.serve(200, 0.03, during, gateway=gateway)
    reader.write_scrapes(fleet.scrapes(T2, gateway=gateway))
    return reader


def test_a_grown_gap_shows_the_clients_the_engines_and_the_gap():
    frame = gap_frame(_reader(0.02, 0.3), WINDOW, BASELINE)
    assert list(frame.columns) == COLUMNS
    assert list(frame["first token seen by"]) == [CLIENTS, ENGINES, GAP]
    rows = frame.set_index("first token seen by")
    # the engines' first tokens held (30 ms, in the 20-40 ms bucket) ...
    assert rows.loc[ENGINES, "change (ms)"] == pytest.approx(0.0)
    # ... while the clients' moved from the 40-60 ms bucket to the 250-500 ms one
    assert 40 < rows.loc[CLIENTS, "p95 before (ms)"] <= 60
    assert 250 < rows.loc[CLIENTS, "p95 (ms)"] <= 500
    gap = rows.loc[GAP]
    assert gap["p95 (ms)"] == pytest.approx(
        rows.loc[CLIENTS, "p95 (ms)"] - rows.loc[ENGINES, "p95 (ms)"]
    )
    assert gap["change (ms)"] > 200


def test_a_constant_overhead_is_a_gap_that_did_not_change():
    rows = gap_frame(_reader(0.3, 0.3), WINDOW, BASELINE).set_index("first token seen by")
    assert rows.loc[GAP, "p95 (ms)"] > 200
    assert rows.loc[GAP, "change (ms)"] == pytest.approx(0.0)


def test_no_client_timings_give_an_empty_frame():
    frame = gap_frame(_reader(0.0, 0.0, gateway=False), WINDOW, BASELINE)
    assert frame.empty and list(frame.columns) == COLUMNS


def test_a_window_without_client_observations_is_nan_not_zero():
    reader = _reader(0.01, 0.3)
    later = TimeWindow(T2, T2 + 300.0)
    rows = gap_frame(reader, later, WINDOW).set_index("first token seen by")
    assert math.isnan(rows.loc[CLIENTS, "p95 (ms)"]) and math.isnan(rows.loc[GAP, "p95 (ms)"])
