"""Replays on a simulated engine in virtual time, stored through the LabStore protocol: a
sim-recorded window replays exactly (deterministic), candidate knobs change the figures,
vLLM's spans replay like ours, and a failing or refused replay is stored as such."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from collectors.otlp import JSON, decode_request
from collectors.request_records import RequestRecord, request_records, span_records
from collectors.store.fake_lab import FakeLab
from collectors.store.fake_requests import FakeRequestReader
from collectors.store.lab_records import LabRunKind, LabRunStatus
from engine.config import EngineConfig
from engine.sim.offline import VIRTUAL_EPOCH, run_open_loop
from engine.sim.workload import RequestShape, poisson_schedule
from loadgen import replay as replay_module
from loadgen import replay_compare
from loadgen.errors import WorkloadError
from loadgen.replay import ReplayPlan, replay_window

SIM = "sim:llama-3.1-8b@h100"
WINDOW = (VIRTUAL_EPOCH - 1, VIRTUAL_EPOCH + 6)


def sim_records(arrivals, config: EngineConfig) -> list[RequestRecord]:
    """A sim run's requests as the records its spans would give (virtual epoch times)."""
    run = run_open_loop(config, arrivals)
    return [
        RequestRecord(
            request_id=r.request_id,
            trace_id=f"{i + 1:032x}",
            span_id=f"{i + 1:016x}",
            service="tailwatch-engine",
            tenant=("a", "b")[i % 2],
            model=config.model,
            replica=None,
            arrival=VIRTUAL_EPOCH + r.arrival_time,
            queue_seconds=None,
            ttft_seconds=r.ttft_seconds,
            prefill_seconds=None,
            decode_seconds=None,
            tpot_seconds=None,
            e2e_seconds=r.e2e_seconds,
            input_tokens=r.num_prompt_tokens,
            output_tokens=r.num_output_tokens,
            cached_tokens=0,
            preemptions=r.num_preemptions,
            finish_reason=r.finish_reason,
            is_error=False,
        )
        for i, r in enumerate(sorted(run.results, key=lambda r: r.arrival_time))
    ]


@pytest.fixture(scope="module")
def recorded():
    arrivals = poisson_schedule(
        8, 5, [RequestShape(1500, 32, 0.3), RequestShape(200, 64, 0.7)], seed=4
    )
    records = sim_records(arrivals, EngineConfig(model=SIM, max_model_len=4096))
    return FakeRequestReader(records), records


def test_sim_recorded_window_replays_exactly_and_is_stored(recorded, monkeypatch):
    reader, records = recorded
    monkeypatch.setattr(replay_compare, "MAX_SAMPLES", 100)
    lab = FakeLab()
    plan = ReplayPlan(engine=SIM, knobs={"max_model_len": 4096}, slo="ttft=100,tpot=20")
    report = replay_window(reader, lab, *WINDOW, plan, clock=lambda: 42.0)
    # the same engine, knobs and arrivals: every figure as production recorded it. NOTE: to
    # 1 µs (1e-3 ms), since epoch seconds near 1.8e9 resolve arrivals to 2.4e-7 s only.
    for key, pair in report.difference.items():
        if pair["production"] is None:
            assert key.startswith("itl_ms"), key  # records have no per-token times
            continue
        assert pair["replay"] == pytest.approx(pair["production"], rel=0, abs=1e-3), key
    assert report.production["num_succeeded"] == report.replay["num_succeeded"] == len(records)
    (run,) = lab.lab_runs(LabRunKind.REPLAY)
    assert (run.id, run.status, run.target, run.simulated) == (
        report.run_id,
        LabRunStatus.FINISHED,
        SIM,
        True,
    )
    assert run.window == WINDOW and run.knobs == {"max_model_len": 4096}
    assert run.workload["num_replayed"] == len(records)
    assert run.workload["tenants"] == {
        "a": sum(r.tenant == "a" for r in records),
        "b": sum(r.tenant == "b" for r in records),
    }
    (point,) = lab.lab_points(run.id)
    assert point.rate == pytest.approx(len(records) / (WINDOW[1] - WINDOW[0]))
    summary = point.summary
    assert summary["ttft_ms"] == report.replay["ttft_ms"]  # the replay, at the top level
    assert summary["production"]["ttft_ms"]["p50"] == report.production["ttft_ms"]["p50"]
    assert summary["replay"]["virtual_time"] is True
    assert summary["replay"]["timed_at"] == "server"
    assert summary["replay"]["knobs_in_force"]["max_model_len"] == 4096
    assert summary["slo_ms"] == {"ttft": 100.0, "tpot": 20.0}
    assert len(point.samples["ttft_ms"]) == len(point.samples["production_ttft_ms"])
    assert len(point.samples["itl_ms"]) == 100  # thinned past the bound
    assert len(point.samples["ttft_ms"]) == min(100, len(records))
    assert json.loads(json.dumps(summary)) == summary


def test_candidate_knobs_change_the_replay(recorded):
    reader, _ = recorded
    base = replay_window(
        reader, FakeLab(), *WINDOW, ReplayPlan(engine=SIM, knobs={"max_model_len": 4096})
    )
    small = replay_window(
        reader,
        FakeLab(),
        *WINDOW,
        ReplayPlan(engine=SIM, knobs={"max_model_len": 4096, "max_num_batched_tokens": 256}),
    )
    # Q13 on the replayed window (virtual time, deterministic): a small step budget spreads
    # the long prompts over more steps (TTFT p99 rises) and keeps decodes from waiting
    # behind them (ITL p99 falls)
    assert small.replay["ttft_ms"]["p99"] > 1.05 * base.replay["ttft_ms"]["p99"]
    assert small.replay["itl_ms"]["p99"] < 0.8 * base.replay["itl_ms"]["p99"]
    assert small.production == base.production
    fast = replay_window(
        reader, FakeLab(), *WINDOW, ReplayPlan(engine=SIM, knobs={"max_model_len": 4096}, speed=4)
    )
    assert fast.replay["ttft_ms"]["p99"] > base.replay["ttft_ms"]["p99"]  # 4x the load
    assert fast.replay["duration_seconds"] == pytest.approx((WINDOW[1] - WINDOW[0]) / 4)


def test_a_request_too_long_for_the_candidate_fails_like_a_400(recorded):
    reader, records = recorded
    plan = ReplayPlan(engine=SIM, knobs={"max_model_len": 1500})
    report = replay_window(reader, FakeLab(), *WINDOW, plan)
    too_long = sum(r.input_tokens + r.output_tokens > 1500 for r in records)
    assert too_long > 0
    assert report.replay["errors"] == {"too_long": too_long}
    assert report.replay["num_succeeded"] == len(records) - too_long


def test_refused_plans_store_nothing(recorded):
    reader, _ = recorded
    lab = FakeLab()
    cases = [
        (
            ReplayPlan(engine=SIM, knobs={"max_num_batched_token": 512}),
            "knob.max_num_batched_token",
        ),
        (ReplayPlan(engine=SIM, knobs={"max_waiting_requests": 4}), "knob.max_waiting_requests"),
        (ReplayPlan(engine=SIM, knobs={"max_num_seqs": 0}), "knob.max_num_seqs"),
        (ReplayPlan(engine=SIM, knobs={"model": "tiny"}), "knob.model"),
        (ReplayPlan(engine="sim:gpt-5@h100"), "engine"),
        (ReplayPlan(engine=SIM, speed=0.0), "speed"),
        (ReplayPlan(engine=SIM, speed=float("inf")), "speed"),
        (ReplayPlan(engine=SIM, slo="itl=50"), "slo.itl"),
        (ReplayPlan(engine=None, url="http://127.0.0.1:9", knobs={"max_num_seqs": 2}), "knob"),
        (ReplayPlan(engine=SIM, url="http://127.0.0.1:9"), "engine"),
    ]
    for plan, field in cases:
        with pytest.raises(WorkloadError) as caught:
            replay_window(reader, lab, *WINDOW, plan)
        assert caught.value.field == field, (plan, caught.value)
    assert lab.lab_runs() == []


def test_a_failing_replay_is_stored_as_failed(recorded, monkeypatch):
    reader, _ = recorded
    lab = FakeLab()

    def broken(plan, trace, progress, fleet=None):
        raise RuntimeError("the engine fell over\nsecond line")

    monkeypatch.setattr(replay_module, "run_trace", broken)
    with pytest.raises(RuntimeError):
        replay_window(reader, lab, *WINDOW, ReplayPlan(engine=SIM))
    (run,) = lab.lab_runs()
    assert (run.status, run.error) == (LabRunStatus.FAILED, "the engine fell over")
    assert lab.lab_points(run.id) == []


def _vllm_span(i: int, start_ns: int, prompt: int, output: int, reasons: str) -> dict:
    def attr(key, kind, value):
        return {"key": key, "value": {kind: value}}

    return {
        "traceId": f"{i + 1:032x}",
        "spanId": f"{i + 1:016x}",
        "name": "llm_request",
        "kind": 2,
        "startTimeUnixNano": str(start_ns),
        "endTimeUnixNano": str(start_ns + 900_000_000),
        "attributes": [
            attr("gen_ai.request.id", "stringValue", f"cmpl-{i}"),
            attr("gen_ai.response.model", "stringValue", "meta-llama/Llama-3.1-8B"),
            attr("gen_ai.usage.prompt_tokens", "intValue", str(prompt)),
            attr("gen_ai.usage.completion_tokens", "intValue", str(output)),
            attr("gen_ai.latency.time_in_queue", "doubleValue", 0.01),
            attr("gen_ai.latency.time_to_first_token", "doubleValue", 0.08),
            attr("gen_ai.latency.e2e", "doubleValue", 0.9),
            attr("gen_ai.response.finish_reasons", "stringValue", reasons),
        ],
    }


def test_vllm_spans_replay_like_ours():
    """vLLM's ``llm_request`` spans (deprecated usage names, no cache or tenant attributes)
    through the collector's decoding, then a trace and a sim replay."""
    start = int(VIRTUAL_EPOCH * 1e9)
    shapes = [
        (512, 64, '["length"]'),
        (1024, 16, '["stop"]'),
        (0, 0, '["abort"]'),
        (300, 40, "length"),
    ]
    spans = [_vllm_span(i, start + i * 250_000_000, *shape) for i, shape in enumerate(shapes)]
    document = {
        "resourceSpans": [
            {
                "resource": {
                    "attributes": [{"key": "service.name", "value": {"stringValue": "vllm"}}]
                },
                "scopeSpans": [{"scope": {"name": "vllm.llm_engine"}, "spans": spans}],
            }
        ]
    }
    records = request_records(span_records(decode_request(json.dumps(document).encode(), JSON)))
    assert len(records) == 4 and all(r.cached_tokens is None for r in records)
    reader = FakeRequestReader(records)
    lab = FakeLab()
    report = replay_window(reader, lab, VIRTUAL_EPOCH, VIRTUAL_EPOCH + 2, ReplayPlan(engine=SIM))
    trace = report.trace
    assert trace.unreplayable == {"no prompt length": 1}
    assert [(len(r.prompt_token_ids), r.max_tokens) for r in trace.requests] == [
        (512, 64),
        (1024, 16),
        (300, 40),
    ]
    assert [r.offset_seconds for r in trace.requests] == pytest.approx([0.0, 0.25, 0.75])
    assert trace.num_prefix_groups == 0  # vLLM's spans say nothing of prefix hits
    assert report.production["ttft_ms"]["p50"] == pytest.approx(80.0)
    assert report.replay["num_succeeded"] == 3
    assert lab.lab_runs()[0].workload["unreplayable"] == {"no prompt length": 1}


class _Cached:
    """Each finished request's prefix-cache hits, as the engine's span records them."""

    def __init__(self) -> None:
        self.by_id: dict[str, int] = {}

    def on_step(self, engine, outputs, handles) -> None:
        self.by_id.update({o.request_id: o.num_cached_tokens for o in outputs if o.finished})


def test_prefix_hits_replay_from_cached_tokens():
    """A sim window where half the prompts start with one of two system prompts: the replay
    rebuilds the groups from ``cached_tokens`` alone and its engine hits the cache as much."""
    import random

    from engine.sim.offline import Arrival

    rng = random.Random(7)
    systems = [tuple(rng.randrange(256) for _ in range(512)) for _ in range(2)]
    arrivals, tenants, t = [], {}, 0.0
    for i in range(40):
        t += rng.expovariate(8)
        group = rng.randrange(4)  # 0, 1: a system prompt; 2, 3: none
        head = systems[group] if group < 2 else ()
        prompt = head + tuple(rng.randrange(256) for _ in range(rng.randrange(50, 400)))
        arrivals.append(Arrival(t, prompt, 32, f"sim-{i}"))
        tenants[f"sim-{i}"] = f"t{group % 2}"  # each system prompt belongs to one tenant
    config = EngineConfig(model=SIM, max_model_len=4096)
    cached = _Cached()
    run_open_loop(config, arrivals, observers=[cached])
    records = [
        replace(r, cached_tokens=cached.by_id[r.request_id], tenant=tenants[r.request_id])
        for r in sim_records(arrivals, config)
    ]
    production_hits = sum(r.cached_tokens for r in records)
    assert production_hits > 0
    report = replay_window(
        FakeRequestReader(records),
        FakeLab(),
        VIRTUAL_EPOCH - 1,
        VIRTUAL_EPOCH + t + 1,
        ReplayPlan(engine=SIM, knobs={"max_model_len": 4096}),
    )
    assert report.trace.num_prefix_groups == 2 and report.trace.num_unseeded_groups == 0
    assert report.replay["total_cached_tokens"] == production_hits
    pair = report.difference["ttft_ms.p50"]
    assert pair["replay"] == pytest.approx(pair["production"], rel=0.02)
