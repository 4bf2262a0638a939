"""`tailwatch up --demo`'s end-of-run check (``tailwatch.up_counts``): the engines' own
counters against what the store holds, by finish reason and TTFT observations. Moved with
the check from the retired `tailwatch demo` (its tests/test_demo.py)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tailwatch.up_counts import RunCounts, StoreReport, added, engine_counts, mismatches, summary

ENGINE_EXPOSITION = """\
# TYPE vllm:request_success_total counter
vllm:request_success_total{engine="0",finished_reason="stop",model_name="tiny"} 3.0
vllm:request_success_total{engine="0",finished_reason="length",model_name="tiny"} 5.0
vllm:request_success_total{engine="0",finished_reason="abort",model_name="tiny"} 1.0
vllm:request_success_total{engine="0",finished_reason="error",model_name="tiny"} 0.0
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="tiny"} 7.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="tiny"} 8.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="tiny"} 8.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="tiny"} 0.4
"""


def _engine() -> RunCounts:
    families = {f.name: f for f in text_string_to_metric_families(ENGINE_EXPOSITION)}
    return engine_counts(families)


@pytest.mark.parametrize(
    ("stored", "problems"),
    [
        (RunCounts({"stop": 3, "length": 5, "abort": 1}, 8), []),
        (
            RunCounts({"stop": 3, "length": 4, "abort": 1}, 8),
            ["length: engine 5, records 4"],
        ),
        (
            RunCounts({"stop": 3, "length": 5, "abort": 1, "": 1}, 7),
            ["no reason: engine 0, records 1", "TTFT observations: engine 8, stored 7"],
        ),
    ],
)
def test_the_summary_compares_records_by_finish_reason_with_the_engines_counters(stored, problems):
    engine = _engine()
    assert engine == RunCounts({"stop": 3, "length": 5, "abort": 1, "error": 0}, 8)
    assert engine.num_finished == 9
    assert engine.describe() == "9 (abort 1, length 5, stop 3)"
    assert mismatches(engine, stored) == problems


def test_replicas_counts_are_added() -> None:
    one = _engine()
    both = added([one, RunCounts({"stop": 2}, 2)])
    assert both == RunCounts({"stop": 5, "length": 5, "abort": 1, "error": 0}, 10)


def test_the_summary_says_whether_the_store_matches() -> None:
    engine = _engine()
    report = StoreReport(4, 3, RunCounts({"stop": 3, "length": 5, "abort": 1}, 8), 0.01, 0.09)
    lines, matches = summary(report, ["replica-0", "replica-1"], (engine, 0.0))
    assert matches, lines
    assert lines[0].startswith("The store holds 4 scrapes of replica-0, replica-1 (3 up)")
    assert lines[-1].endswith("the store matches.")
    short = StoreReport(4, 3, RunCounts({"stop": 3, "length": 4, "abort": 1}, 8), 0.01, 0.09)
    lines, matches = summary(short, ["replica-0"], (engine, 0.0))
    assert not matches and lines[-1].startswith("mismatch: ") and "length" in lines[-1]
    lines, matches = summary(report, ["replica-0"], None)  # the engines did not answer
    assert not matches and "could not be read" in lines[-1]
