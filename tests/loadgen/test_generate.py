"""Generated scenarios (``loadgen.generate``): deterministic for a seed, every one a scenario
the loader accepts, drawn inside its kind's ranges, long enough for its rule, benign ones
naming no alert, and overloads really over the capacity the estimate gives."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from loadgen.errors import WorkloadError
from loadgen.generate import GPU_CHOICES, KINDS, MAX_COUNT, generate, write_scenarios
from loadgen.generate.benign import PEAK_LOAD
from loadgen.generate.capacity import decode_step_seconds, replica_capacity_rps
from loadgen.generate.kinds import incident_of
from loadgen.generate.timing import rule_clock
from loadgen.scenario import SIGNALS, load_scenario_file, parse_scenario
from loadgen.virtual.drill import VirtualTiming
from loadgen.virtual.fleet import VirtualFleet
from loadgen.virtual.replica import VirtualReplica, engine_settings
from loadgen.workload import build_schedule, parse_workload

TIMING = VirtualTiming()
SEEDS = st.integers(min_value=-(10**30), max_value=10**30)


def _check(mapping: dict, timing: VirtualTiming = TIMING) -> None:
    """Every invariant one generated scenario holds."""
    scenario = parse_scenario(mapping, mapping["name"])
    g = scenario.generated
    assert g is not None and g == mapping["generated"]
    kind = KINDS[g["kind"]]
    ranges = kind.ranges
    assert mapping["name"] == f"gen-{g['seed']}-{g['index']:02d}-{kind.name}"
    assert ranges.magnitude[0] <= g["drawn"]["magnitude"] <= ranges.magnitude[1]
    assert ranges.share[0] <= g["drawn"]["share"] <= ranges.share[1]
    assert ranges.replicas[0] <= g["replicas"] == scenario.replicas <= ranges.replicas[1]
    assert ranges.load[0] <= g["load"] <= ranges.load[1]
    assert ranges.max_num_seqs[0] <= g["max_num_seqs"] <= ranges.max_num_seqs[1]
    assert (g["model"], g["tensor_parallel_size"]) in {
        (c.model, c.tensor_parallel_size) for c in GPU_CHOICES
    }
    assert g["magnitude"] > 0 and 0 < g["share"] <= 1
    assert g["onset"] in kind.onsets
    # durations: the kind's rule (its own, or the incident's it resembles) can see it
    clock = rule_clock(incident_of(kind).alert, timing)
    phases = {p.name: p.duration_seconds for p in scenario.phases}
    assert phases["perturbation"] >= clock.min_perturbation_seconds - 1e-6
    assert phases["baseline"] >= 2 * clock.window_seconds - 1e-6
    assert phases["recovery"] >= clock.window_seconds - 1e-6
    assert g["long_enough"] is True
    ramps = [p for p in scenario.phases if p.name.startswith("ramp-")]
    assert len(ramps) == g["ramp_phases"] and (g["onset"] == "ramp") == bool(ramps)
    assert [p.name for p in scenario.phases][:2] == ["warmup", "baseline"]
    assert scenario.phases[-1].name == "recovery"
    e = scenario.expects
    assert e.signal in SIGNALS and e.factor > 0
    if kind.is_benign:
        assert e.alert is None and e.triage_cause is None and g["benign"] is True
        assert e.signal == KINDS[kind.resembles].signal
    else:
        assert e.alert == kind.alert and e.triage_cause == kind.cause
        assert e.signal == kind.signal and e.change == kind.change


def test_the_same_seed_writes_the_same_files_and_another_seed_others(tmp_path):
    first = write_scenarios(generate(11, 8), tmp_path / "a")
    second = write_scenarios(generate(11, 8), tmp_path / "b")
    other = write_scenarios(generate(12, 8), tmp_path / "c")
    assert [p.name for p in first] == [p.name for p in second]
    assert [p.read_bytes() for p in first] == [p.read_bytes() for p in second]
    assert {p.read_bytes() for p in first}.isdisjoint(p.read_bytes() for p in other)
    # scenario i does not depend on how many were asked for
    assert generate(11, 3) == generate(11, 8)[:3]
    for path in first:
        _check_loaded(path)
    assert not list((tmp_path / "a").glob(".generating-*"))


def _check_loaded(path):
    scenario = load_scenario_file(path)
    assert scenario.name == path.stem and scenario.generated is not None


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=SEEDS)
def test_every_generated_scenario_parses_and_holds_its_ranges(seed):
    for mapping in generate(seed, 6):
        _check(mapping)


def test_every_kind_is_generated_and_holds_its_invariants():
    for name in KINDS:
        for mapping in generate(5, 4, [name]):
            assert mapping["generated"]["kind"] == name
            _check(mapping)


def test_durations_follow_the_timing_the_rules_are_scaled_by():
    timing = VirtualTiming(window_scale=0.05, evaluation_interval_seconds=0.5)
    for mapping in generate(3, 24, timing=timing):
        _check(mapping, timing)
        assert mapping["generated"]["rule"]["window_seconds"] == pytest.approx(15.0)
    # windows too long for the run's cap: cut, and recorded as not long enough
    huge = VirtualTiming(window_scale=2.0)
    mapping = generate(3, 1, ["overload"], timing=huge)[0]
    assert mapping["generated"]["long_enough"] is False
    assert sum(p["duration"] for p in mapping["phases"]) <= 600.0 + 1.0


def test_the_benign_share_and_the_kinds_choose_what_is_drawn():
    incidents = generate(1, 30, benign_share=0.0)
    assert not any(m["generated"]["benign"] for m in incidents)
    benign = generate(1, 30, benign_share=1.0)
    assert all(m["generated"]["benign"] for m in benign)
    assert all(m["expects"]["alert"] is None for m in benign)
    only = generate(1, 10, ["overload", "diurnal"], benign_share=0.0)
    assert {m["generated"]["kind"] for m in only} == {"overload"}


@pytest.mark.parametrize(
    ("call", "field"),
    [
        (lambda: generate(1, 0), "count"),
        (lambda: generate(1, MAX_COUNT + 1), "count"),
        (lambda: generate(1, True), "count"),
        (lambda: generate(1, 2, ["overload", "meltdown"]), "kinds"),
        (lambda: generate(1, 2, [" ", ""]), "kinds"),
        (lambda: generate(1, 2, benign_share=1.5), "benign_share"),
        (lambda: generate(1.5, 2), "seed"),  # type: ignore[arg-type]
    ],
)
def test_a_bad_argument_is_one_error_naming_it(call, field):
    with pytest.raises(WorkloadError) as raised:
        call()
    assert raised.value.field == field


def test_overload_is_over_the_estimated_capacity_and_benign_traffic_well_under_it():
    for mapping in generate(9, 40, ["overload"]):
        g = mapping["generated"]
        assert g["details"]["peak_rate_rps"] >= 1.5 * g["capacity_rps"] - 0.01
        assert g["rate_rps"] <= 0.6 * g["capacity_rps"] + 0.01
    for mapping in generate(9, 40, ["traffic-rise", "diurnal", "new-tenant", "tenant-growth"]):
        g = mapping["generated"]
        peak = max(
            sum(w.arrivals.rate_per_second for w in p.workloads)
            for p in parse_scenario(mapping, "x").phases
        )
        assert peak <= PEAK_LOAD * g["capacity_rps"] * 1.02, (g["kind"], peak)
    for mapping in generate(9, 40, ["noisy-tenant"]):
        g = mapping["generated"]
        assert g["details"]["peak_rate_rps"] >= 1.5 * g["capacity_rps"] - 0.01
        assert g["details"]["tenant_peak_share"] - g["share"] >= 0.35, g["details"]


def test_the_specs_decode_steps_are_gpu_like():
    # NOTE: 10-25 ms: faster costs the simulation more steps a virtual second
    for choice in GPU_CHOICES:
        assert 0.010 <= decode_step_seconds(choice) <= 0.025, choice


def test_incident_factors_are_conservative_moves():
    for mapping in generate(2, 60, benign_share=0.0):
        e, g = mapping["expects"], mapping["generated"]
        if e["change"] == "rise":
            assert 1.0 <= e["factor"] <= max(1.0, 1 + g["magnitude"])
        else:
            assert 1 / g["magnitude"] <= e["factor"] < 1.0
    assert math.isclose(KINDS["prefix-break"].factor(2.0), 0.75)


@pytest.mark.parametrize("choice", [GPU_CHOICES[0], GPU_CHOICES[3]], ids=lambda c: c.model)
def test_the_capacity_estimate_is_what_a_replica_serves_or_a_little_under(choice):
    """Half the estimate is served without a queue; twice it, the queue grows and the
    replica serves its capacity: the estimate or somewhat more (never much less, or an
    overload at 1.5x it would not be one)."""
    shape = {"prompt_tokens": 240, "output_tokens": 64}
    capacity = replica_capacity_rps(choice, **shape, cached_prompt_tokens=0, max_num_seqs=16)
    for load, served_low, served_high in ((0.5, 0.4, 0.6), (2.0, 0.95, 1.4)):
        config, limits = engine_settings(
            {
                "model": choice.model,
                "tensor_parallel_size": choice.tensor_parallel_size,
                "max_num_seqs": 16,
                "max_model_len": 512,
                "num_gpu_blocks": 2048,
            }
        )
        fleet = VirtualFleet([VirtualReplica(0, config, limits)])
        workload = {"rate": load * capacity, "duration": 25, "seed": 1, **shape}
        fleet.add_arrivals(build_schedule([parse_workload(workload)]))
        fleet.advance_to(25.0)
        # served per second once the queue (if any) formed: finished in the last 15 s
        finished = [r for r in fleet.results if r.scheduled_seconds + r.e2e_seconds > 10]
        served = len(finished) / 15 / capacity
        assert served_low <= served <= served_high, (load, served)
        waiting = len(fleet.replicas[0].engine.scheduler.waiting)
        assert (waiting > 16) == (load > 1), (load, waiting)


def test_the_format_keeps_generated_verbatim_and_takes_a_benign_expects():
    mapping = generate(4, 1, benign_share=1.0)[0]
    scenario = parse_scenario(mapping, "s")
    assert scenario.expects.alert is None and scenario.expects.triage_cause is None
    assert scenario.generated == mapping["generated"]
    assert scenario.generated is not mapping["generated"]  # a copy: the file's, unchanged
    assert scenario.scaled(0.5).generated == scenario.generated
    with pytest.raises(WorkloadError, match=r"^s\.generated: must be a mapping"):
        parse_scenario({**mapping, "generated": [1]}, "s")
    hand_written = {k: v for k, v in mapping.items() if k != "generated"}
    assert parse_scenario(hand_written, "s").generated is None
