"""The summary's goodput against a hand-computed value on a fixed JSONL of requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from loadgen import WorkloadError, parse_slo, read_jsonl, summarize
from slo import Objectives

REQUESTS = Path(__file__).with_name("goodput_requests.jsonl")
# SLO ttft=500 ms, tpot=50 ms, e2el=2000 ms; by hand, request by request:
#  0  ttft 0.5 = SLO, tpot (1.5-0.5)/20 = 0.05 = SLO       → good (SLO exactly met)
#  1  one token: tpot 0, ttft 0.4                          → good
#  2  one token, ttft 0.6 > 0.5                            → bad
#  3  HTTP 500                                             → bad (failed)
#  4  HTTP 429                                             → bad (failed)
#  5  tpot (1.1-0.1)/10 = 0.1 > 0.05                       → bad
#  6  e2e 2.0 = SLO, tpot 1.75/175 = 0.01                  → good (e2e exactly met)
#  7  e2e 2.5 > 2.0                                        → bad
#  8  dropped by the in-flight cap                         → bad (never sent)
#  9  ttft 0.25, tpot 0.04                                 → good
# 10  stream ended with an error event (status 200)        → bad (failed)
GOOD = {0, 1, 6, 9}
DURATION_SECONDS = 4.0


def test_goodput_matches_the_hand_computed_value():
    results = list(read_jsonl(REQUESTS))
    summary = summarize(results, DURATION_SECONDS, parse_slo("ttft=500,tpot=50,e2el=2000"))
    assert summary["num_good"] == len(GOOD) == 4
    assert summary["request_goodput"] == 4 / DURATION_SECONDS
    assert summary["slo_attainment"] == 4 / 11
    assert summary["num_succeeded"] == 7
    assert summary["num_dropped"] == 1
    assert summary["num_errors"] == 3
    assert summary["num_429"] == 1
    assert summary["errors"] == {
        "server_error": 1,
        "max_num_queued_reqs": 1,
        "dropped": 1,
        "abort": 1,
    }
    assert summary["request_throughput"] == 7 / DURATION_SECONDS
    assert summary["total_output_tokens"] == 21 + 1 + 1 + 11 + 176 + 226 + 11
    assert summary["slo_ms"] == {"ttft": 500.0, "tpot": 50.0, "e2el": 2000.0}


@pytest.mark.parametrize(
    ("slo", "good"),
    [
        ("", {0, 1, 2, 5, 6, 7, 9}),  # no SLO: every success is good
        ("ttft=500", {0, 1, 5, 6, 7, 9}),
        ("tpot=50", {0, 1, 2, 6, 7, 9}),
        ("e2el=2000", {0, 1, 2, 5, 6, 9}),
    ],
)
def test_each_objective_alone(slo, good):
    summary = summarize(list(read_jsonl(REQUESTS)), DURATION_SECONDS, parse_slo(slo))
    assert summary["num_good"] == len(good)


def test_slo_option_is_in_milliseconds_like_vllm_bench_serve():
    assert parse_slo("ttft=500, tpot=50,e2el=4000") == Objectives(
        ttft_seconds=0.5, tpot_seconds=0.05, e2e_seconds=4.0
    )
    with pytest.raises(WorkloadError, match="e2e"):
        parse_slo("e2e=4000")
    with pytest.raises(WorkloadError, match=r"slo\.ttft.*'fast'"):
        parse_slo("ttft=fast")
    with pytest.raises(WorkloadError, match=r"slo\.tpot.*-1"):
        parse_slo("tpot=-1")
