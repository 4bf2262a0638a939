"""The virtual fleet with cold starts (a scale-out whose replicas need time to be ready, a
scale from zero) and with LoRA adapters selected by the request's model."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from engine.errors import ConfigError
from engine.sim.offline import VIRTUAL_EPOCH
from engine.sim.startup import MAX_STARTUP_SECONDS, StartupTimes
from loadgen.errors import WorkloadError
from loadgen.virtual.fleet import VirtualFleet
from loadgen.virtual.replica import VirtualReplica, engine_settings, replica_extras
from loadgen.workload import build_schedule, parse_workload

KNOBS = {"model": "tiny", "max_model_len": 512, "num_gpu_blocks": 512}
STARTUP = {"model_load_seconds": 5.0, "warm_up_seconds": 1.0}


def _fleet(count, knobs, duration=12, models=None):
    knobs = {**KNOBS, **knobs}
    config, limits = engine_settings(knobs)
    extras = replica_extras(knobs)
    replicas = [VirtualReplica(i, config, limits, extras=extras) for i in range(count)]
    fleet = VirtualFleet(replicas, "round-robin")
    spec = {
        "rate": 10,
        "arrivals": "constant",
        "duration": duration,
        "prompt_tokens": 64,
        "output_tokens": 8,
    }
    schedule = build_schedule([parse_workload(spec)])
    if models is not None:
        schedule = [dataclasses.replace(r, model=models[r.index % len(models)]) for r in schedule]
    fleet.add_arrivals(schedule)
    return fleet


def _samples(replica) -> dict[tuple[str, frozenset], float]:
    text, _ = replica.exposition()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _phases(replica) -> dict[str, float]:
    return {
        dict(labels)["phase"]: value
        for (name, labels), value in _samples(replica).items()
        if name == "tailwatch:startup_phase_seconds"
    }


def test_a_scaled_out_replica_gets_traffic_only_once_ready():
    fleet = _fleet(2, STARTUP)
    fleet.set_active([0])
    fleet.advance_to(2.0)
    fleet.set_active([0, 1])  # replica 1 starts cold at 2 s: ready at 8 s
    fleet.advance_to(7.9)
    assert _phases(fleet.replicas[1]) == {}  # not ready: no start-up phases yet
    fleet.advance_to(20.0)
    on_new = [r for r in fleet.results if r.replica == "replica-1"]
    assert on_new and min(r.scheduled_seconds for r in on_new) >= 8.0
    assert any(r.replica == "replica-0" and r.scheduled_seconds > 8.0 for r in fleet.results)
    assert _phases(fleet.replicas[1]) == {"model_load": 5.0, "warm_up": 1.0, "ready": 6.0}
    (start,) = [
        v
        for (n, _), v in _samples(fleet.replicas[1]).items()
        if n == "tailwatch:engine_start_time_seconds"
    ]
    assert start == VIRTUAL_EPOCH + 2.0


def test_a_scale_from_zero_holds_requests_until_the_replica_is_ready():
    fleet = _fleet(1, STARTUP, duration=4)
    fleet.advance_to(0.0)
    fleet.restart(0)  # a cold process at 0 s, ready at 6 s
    fleet.run_until_idle(60.0)
    assert len(fleet.results) == 40 and all(r.status == 200 for r in fleet.results)
    for result in fleet.results:  # nothing was answered before the replica was ready
        assert result.scheduled_seconds + result.ttft_seconds >= 6.0


def _mean_gap(results) -> float:
    gaps = [g for r in results for g in r.itl_seconds]
    return sum(gaps) / len(gaps)


def test_a_replica_ready_but_cold_steps_slowly_for_its_cold_seconds():
    cold = {**STARTUP, "cold_seconds": 6.0, "cold_step_factor": 4.0}
    fleet = _fleet(2, cold, duration=30)
    fleet.set_active([0])
    fleet.advance_to(2.0)
    fleet.set_active([0, 1])  # ready at 8 s, cold until 14 s
    fleet.run_until_idle(120.0)
    on = {i: [r for r in fleet.results if r.replica == f"replica-{i}"] for i in (0, 1)}
    steady = _mean_gap([r for r in on[0] if 8.0 <= r.scheduled_seconds < 13.0])
    first = _mean_gap([r for r in on[1] if r.scheduled_seconds < 13.0])
    later = _mean_gap([r for r in on[1] if r.scheduled_seconds > 16.0])
    assert first > 3.0 * steady  # four times as long a step, less the arrival's wait
    assert later == pytest.approx(_mean_gap([r for r in on[0] if r.scheduled_seconds > 16.0]))


def test_a_cold_step_factor_under_one_is_refused():
    with pytest.raises(WorkloadError, match=r"cold_step_factor=0\.5: must be between 1 and 100"):
        replica_extras({"cold_step_factor": 0.5})


def test_bad_startup_and_lora_keys_are_workload_errors():
    with pytest.raises(WorkloadError, match="model_load_seconds=-1"):
        replica_extras({"model_load_seconds": -1})
    with pytest.raises(WorkloadError, match="warm_up_seconds=inf"):
        replica_extras({"warm_up_seconds": float("inf")})
    with pytest.raises(WorkloadError, match="needs enable_lora"):
        replica_extras({"lora_modules": ["a=random:rank=8"]})
    with pytest.raises(WorkloadError, match="list of name=path"):
        replica_extras({"enable_lora": True, "lora_modules": "a=random:rank=8"})


@settings(max_examples=100, deadline=None, derandomize=True, database=None)
@given(
    load=st.one_of(st.floats(allow_nan=True), st.integers(-(2**64), 2**64), st.none()),
    warm=st.one_of(st.floats(0, 4000), st.booleans()),
)
def test_startup_times_are_accepted_in_range_or_refused_naming_the_knob(load, warm):
    try:
        times = StartupTimes(load, warm)
    except ConfigError as error:
        assert str(error).startswith(("model_load_seconds=", "warm_up_seconds="))
        return
    assert 0 <= times.ready_seconds <= 2 * MAX_STARTUP_SECONDS


LORA = {
    "enable_lora": True,
    "max_loras": 1,
    "max_cpu_loras": 2,
    "lora_load_seconds": 0.5,
    "max_lora_rank": 64,
    "lora_modules": ["a=random:rank=8,seed=1", "b=random:rank=64,seed=2", "c=random:rank=8"],
}


def test_adapters_on_a_virtual_replica_are_selected_counted_and_loaded():
    fleet = _fleet(1, LORA, duration=6, models=[None, "a", "b", "c", "nope"])
    fleet.run_until_idle(120.0)
    refused = [r for r in fleet.results if r.status == 404]
    assert len(refused) == 12 and all("model_not_found" in r.error for r in refused)
    assert all(r.status == 200 for r in fleet.results if r.status != 404)
    samples = _samples(fleet.replicas[0])

    def value(name, **labels):
        return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= ls)

    for name in ("", "a", "b", "c"):
        assert value("tailwatch:lora_requests_total", lora_name=name) == 12
    # three adapters, two loaded at a time, one running at a time: adapters were reloaded
    loads = {n: value("tailwatch:lora_loads_total", lora_name=n) for n in "abc"}
    assert sum(loads.values()) > 3
    assert value("tailwatch:lora_load_seconds_total") == pytest.approx(0.5 * sum(loads.values()))
    assert value("tailwatch:lora_resident_adapters") == 2
    (info,) = [ls for (n, ls), _ in samples.items() if n == "vllm:lora_requests_info"]
    assert dict(info)["max_lora"] == "1"


def test_lora_adds_step_cost_in_the_simulator():
    from engine.config import EngineConfig
    from engine.llm_engine import LLMEngine
    from engine.lora.source import parse_lora_source
    from engine.sampling_params import SamplingParams
    from engine.sim.runner import VirtualClock

    def step_seconds(rank: int | None) -> float:
        clock = VirtualClock()
        config = EngineConfig(model="sim:llama-3.1-8b@h100", enable_lora=True, max_lora_rank=64)
        engine = LLMEngine(config, clock=clock)
        lora = None
        if rank is not None:
            lora = engine.add_lora("x", parse_lora_source(f"random:rank={rank}"))
        for _ in range(16):
            engine.add_request([65] * 512, SamplingParams(max_tokens=2), lora_request=lora)
        start = clock.now
        engine.step()
        return clock.now - start

    base, small, large = step_seconds(None), step_seconds(8), step_seconds(64)
    assert base < small < large
