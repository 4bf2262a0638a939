"""The measurements the adapter-thrash and cold-start causes read, through the
``MetricsReader`` protocol: adapter loads and their seconds (counter increases over the
window, summed over adapters), the engine process's start time (a gauge) and the seconds spent
compiling grammars (a histogram's sum)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from alerts.triage.data import Source, TimeWindow
from alerts.triage.measure_scope import Scope, measure_scope
from collectors import normalise
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader

TARGET = "replica-a:8000"


def _compiles(count: float, seconds: float) -> list[str]:
    name = "tailwatch:structured_output_compile_seconds"
    return [
        f"# TYPE {name} histogram",
        f'{name}_bucket{{le="0.1",model="m"}} {count}',
        f'{name}_bucket{{le="+Inf",model="m"}} {count}',
        f'{name}_sum{{model="m"}} {seconds}',
        f'{name}_count{{model="m"}} {count}',
    ]


def _exposition(
    loads: dict[str, float], seconds: dict[str, float], started: float, compiles=(0.0, 0.0)
) -> str:
    lines = ["# TYPE tailwatch:lora_loads_total counter"]
    lines += [
        f'tailwatch:lora_loads_total{{lora_name="{n}",model="m"}} {v}' for n, v in loads.items()
    ]
    lines += ["# TYPE tailwatch:lora_load_seconds_total counter"]
    lines += [
        f'tailwatch:lora_load_seconds_total{{lora_name="{n}",model="m"}} {v}'
        for n, v in seconds.items()
    ]
    lines += ["# TYPE tailwatch:engine_start_time_seconds gauge"]
    lines += [f'tailwatch:engine_start_time_seconds{{model="m"}} {started}']
    lines += _compiles(*compiles)
    return "\n".join(lines) + "\n"


def _reader() -> FakeMetricsReader:
    reader = FakeMetricsReader()
    scrapes = [
        (100.0, {"a": 1.0, "b": 0.0}, {"a": 0.2, "b": 0.0}, (1.0, 0.05)),
        (200.0, {"a": 4.0, "b": 2.0}, {"a": 0.8, "b": 0.5}, (3.0, 0.25)),
    ]
    for at, loads, seconds, compiles in scrapes:
        text = _exposition(loads, seconds, started=42.0, compiles=compiles)
        scrape = normalise(text_string_to_metric_families(text), TARGET)
        assert reader.write_scrape(ScrapeRecord.from_normalised(TARGET, at, scrape))
    return reader


def test_adapter_loads_and_their_seconds_are_summed_over_adapters():
    m = measure_scope(_reader(), Scope(None, ()), TimeWindow(100.0, 200.0))
    assert (m.lora_loads.value, m.lora_loads.source) == (5.0, Source.COUNTER)
    assert m.lora_load_seconds.value == pytest.approx(1.1)
    assert (m.start_time_seconds.value, m.start_time_seconds.source) == (42.0, Source.GAUGE)
    assert m.grammar_compile_seconds.value == pytest.approx(0.2)


def test_a_scope_without_the_families_leaves_them_unknown():
    m = measure_scope(FakeMetricsReader(), Scope(None, ()), TimeWindow(100.0, 200.0))
    assert not (m.lora_loads.is_known or m.lora_load_seconds.is_known)
    assert not (m.start_time_seconds.is_known or m.grammar_compile_seconds.is_known)
