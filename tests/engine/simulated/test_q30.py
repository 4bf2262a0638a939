"""The seed's Q30, "TP=2 vs two replicas" of Llama 3.1 8B on two H100s, in virtual time:
TP=2 answers sooner at light load, two replicas hold a higher rate (docs/knob-lab.md)."""

from __future__ import annotations

import pytest

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.sim.replicas import merged_results, run_round_robin
from engine.sim.workload import RequestShape, poisson_schedule


def _config(tp: int) -> EngineConfig:
    return EngineConfig(model="sim:llama-3.1-8b@h100", max_model_len=4096, tensor_parallel_size=tp)


def _quantile(values, q):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _tp2_and_two_replicas(rate, seconds, max_tokens=128):
    arrivals = poisson_schedule(rate, seconds, [RequestShape(1024, max_tokens)], seed=2)
    tp2 = merged_results(run_round_robin(_config(2), arrivals, 1))
    replicas = merged_results(run_round_robin(_config(1), arrivals, 2))
    assert len(tp2) == len(replicas) == len(arrivals)
    return tp2, replicas


def test_round_robin_splits_the_arrivals_in_time_order():
    arrivals = poisson_schedule(20, 1, [RequestShape(64, 4)], seed=1)
    runs = run_round_robin(_config(1), list(reversed(arrivals)), 3)
    assert [len(run.results) for run in runs] == [len(arrivals[i::3]) for i in range(3)]
    assert {r.request_id for r in runs[0].results} == {a.request_id for a in arrivals[0::3]}
    with pytest.raises(ConfigError, match="num_replicas=0"):
        run_round_robin(_config(1), arrivals, 0)


def test_tp2_answers_sooner_at_light_load():
    # each TP=2 step reads half the weights on each GPU: ~35% lower ITL and TTFT p50
    tp2, replicas = _tp2_and_two_replicas(10, 4)
    for measure in (
        lambda rs: [x for r in rs for x in r.itl_seconds],
        lambda rs: [r.ttft_seconds for r in rs],
    ):
        assert _quantile(measure(tp2), 0.5) < 0.75 * _quantile(measure(replicas), 0.5)


def test_two_replicas_hold_a_rate_that_queues_tp2():
    # NOTE: past TP=2's knee (46 req/s for 1024/256 requests, docs/knob-lab.md) its
    # compute-bound prefill chunks pay 64 all-reduces each that the replicas never pay, so
    # its queue grows while the replicas' does not (measured 491 vs 218 ms TTFT p99).
    tp2, replicas = _tp2_and_two_replicas(70, 3, max_tokens=64)
    tp2_p99 = _quantile([r.ttft_seconds for r in tp2], 0.99)
    replicas_p99 = _quantile([r.ttft_seconds for r in replicas], 0.99)
    assert tp2_p99 > 1.5 * replicas_p99
