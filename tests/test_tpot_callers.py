"""The three TPOT users (goodput records, the benchmark driver, trace request records) all
call ``slo.tpot_seconds`` and agree, including the one-token and unknown-input cases."""

from __future__ import annotations

import pytest

from bench._driver import RequestRecord as BenchRecord
from collectors.request_records import SpanRecord, request_record
from slo import RequestRecord


def _span(attributes: dict) -> SpanRecord:
    return SpanRecord(
        trace_id="0" * 32,
        span_id="0" * 16,
        parent_span_id=None,
        name="chat",
        kind=2,
        start=100.0,
        end=103.4,
        attributes={"gen_ai.operation.name": "chat", "gen_ai.response.id": "r1", **attributes},
        events=(),
        status_code=0,
        status_message="",
        resource={"service.name": "tailwatch-engine"},
        scope="test",
    )


@pytest.mark.parametrize(("tokens", "expected"), [(5, 0.8), (1, 0.0), (0, 0.0)])
def test_goodput_bench_and_traces_agree(tokens: int, expected: float) -> None:
    goodput = RequestRecord(True, ttft_seconds=0.2, e2e_seconds=3.4, output_tokens=tokens)
    bench = BenchRecord(
        arrival_time=10.0,
        num_prompt_tokens=8,
        first_token_time=10.2,
        finished_time=13.4,
        num_output_tokens=tokens,
    )
    traced = request_record(
        _span({"gen_ai.latency.time_to_first_token": 0.2, "gen_ai.usage.output_tokens": tokens})
    )
    assert traced is not None
    for value in (goodput.tpot_seconds, bench.tpot_seconds, traced.tpot_seconds):
        assert value == pytest.approx(expected)


def test_unknown_inputs_stay_unknown_where_each_caller_needs_it() -> None:
    # An unfinished benchmark request has no TPOT, even with one token so far.
    unfinished = BenchRecord(arrival_time=0.0, num_prompt_tokens=8, first_token_time=0.2)
    unfinished.num_output_tokens = 1
    assert unfinished.tpot_seconds is None
    # A span without a token count has none; a malformed negative count has none either.
    assert request_record(_span({"gen_ai.latency.time_to_first_token": 0.2})).tpot_seconds is None
    negative = _span({"gen_ai.latency.time_to_first_token": 0.2, "gen_ai.usage.output_tokens": -3})
    assert request_record(negative).tpot_seconds is None
