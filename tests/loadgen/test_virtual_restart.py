"""A phase's ``restart:`` on the virtual fleet: the replica comes back as a fresh engine
(counters from zero in the store's raw readings, a new instance id, the scenario's knobs),
the requests it held fail, and the fleet keeps serving. The real-time drill refuses it."""

from __future__ import annotations

import asyncio

import pytest

from collectors import canonical as c
from engine.sim.offline import VIRTUAL_EPOCH
from loadgen.drill import run_drill
from loadgen.errors import WorkloadError
from loadgen.scenario import parse_scenario
from loadgen.virtual.collect import VirtualStore
from loadgen.virtual.drill import run_virtual_drill
from loadgen.virtual.fleet import RESTART_ERROR
from loadgen.virtual.replica import instance_id

RESTART_AT = 12.0


def _raw(**phase_changes) -> dict:
    return {
        "name": "restart",
        "description": "replica 1 restarts",
        "teaches": "t",
        "replicas": 3,
        "engine": {
            "model": "sim:llama-3.1-8b@a100",
            "max_num_seqs": 8,
            "max_model_len": 512,
            "num_gpu_blocks": 512,
        },
        "workloads": [
            {
                "name": "chat",
                "rate": 9,
                "prompt_tokens": 160,
                "output_tokens": 48,
                "tenants": {"acme": 1},
                "prefix": {"groups": 2, "tokens": 128},
            }
        ],
        "phases": [
            {"name": "baseline", "duration": RESTART_AT},
            {"name": "perturbation", "duration": 10, **phase_changes},
            {"name": "recovery", "duration": 6},
        ],
        "expects": {"signal": "prefix_hit_rate", "change": "fall", "alert": None},
    }


@pytest.fixture(scope="module")
def drilled():
    # the slowed replica's patch must not survive its restart
    admin = [{"replica": 1, "patch": {"step_delay_seconds": 0.02}}]
    raw = _raw(restart=[1])
    raw["phases"][0]["admin"] = admin
    scenario = parse_scenario(raw, "restart")
    store = VirtualStore.memory()
    return run_virtual_drill(scenario, store=store, seed=3), store


def _restarted_at(drill) -> float:
    """Seconds into the run when replica 1 restarted: the perturbation's start, which the
    drill's timing may have stretched from the scenario's ``RESTART_AT``."""
    run = drill.report.drill
    return run.phase_start("perturbation") - run.state.started_at


def test_the_restarted_replicas_counters_start_again_from_zero(drilled):
    drill, store = drilled
    restart_at = _restarted_at(drill)
    readings = store.metrics.samples(
        c.PREFIX_CACHE_QUERIES_TOTAL, {c.LABEL_TARGET: "replica-1"}, 0, VIRTUAL_EPOCH + 1e4
    )
    (series,) = readings.values()
    before = [s.value for s in series if s.timestamp_seconds < VIRTUAL_EPOCH + restart_at]
    after = [s.value for s in series if s.timestamp_seconds > VIRTUAL_EPOCH + restart_at]
    assert before[-1] > 0 and after[0] < before[-1]  # the reset the store sees
    assert after[-1] > after[0]  # and it counts again: the fleet kept serving on it
    (other,) = store.metrics.samples(
        c.PREFIX_CACHE_QUERIES_TOTAL, {c.LABEL_TARGET: "replica-0"}, 0, VIRTUAL_EPOCH + 1e4
    ).values()
    values = [s.value for s in other]
    assert values == sorted(values)  # the others never reset


def test_the_restarted_replica_has_a_new_instance_id_and_the_scenarios_knobs(drilled):
    drill, store = drilled
    ids = {
        dict(s.labels)[c.LABEL_INSTANCE_ID]
        for s in store.metrics.series(c.ENGINE_INFO, {c.LABEL_TARGET: "replica-1"})
    }
    assert ids == {instance_id(3, 1), instance_id(3, 1, 1)}
    assert instance_id(3, 1, 1) != instance_id(3, 1, 2)
    served = [
        r
        for r in drill.report.drill.state.results
        if r.replica == "replica-1" and r.scheduled_seconds > _restarted_at(drill) and r.succeeded
    ]
    assert served
    # the 20 ms step delay went with the old engine: gaps are a GPU's again
    gaps = sorted(g for r in served for g in r.itl_seconds)
    assert gaps[len(gaps) // 2] < 0.02


def test_the_requests_it_held_fail_and_the_phases_count_from_zero(drilled):
    drill, _ = drilled
    lost = [r for r in drill.report.drill.state.results if r.error == RESTART_ERROR]
    assert lost and all(r.replica == "replica-1" and r.status == 0 for r in lost)
    assert all(r.scheduled_seconds <= _restarted_at(drill) for r in lost)
    verdict = drill.report.drill.verdict()
    assert verdict["requests"]["baseline"]["num_errors"] == len(lost)
    assert verdict["requests"]["perturbation"]["num_errors"] == 0
    # the perturbation's own counts (the new engine's from zero), not new minus old
    for phase in ("baseline", "perturbation", "recovery"):
        assert 0 < verdict["phases"][phase] <= 1


@pytest.mark.parametrize(
    ("restart", "message"),
    [
        ([3], r"phases\[1\]\.restart: must be a list of replica indexes 0\.\.2"),
        ([1, 1], r"phases\[1\]\.restart: names a replica twice"),
        ([True], r"phases\[1\]\.restart"),
        (1, r"phases\[1\]\.restart"),
    ],
)
def test_a_bad_restart_is_refused_naming_the_phase(restart, message):
    with pytest.raises(WorkloadError, match=message):
        parse_scenario(_raw(restart=restart), "x")


def test_the_real_time_drill_refuses_a_restart_before_sending_anything():
    scenario = parse_scenario(_raw(restart=[0, 2]), "x")
    # NOTE: an address nothing listens on: the refusal comes before any request
    with pytest.raises(WorkloadError) as raised:
        asyncio.run(run_drill(scenario, ["http://127.0.0.1:9"] * 3))
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("phases[1] (perturbation).restart: replicas [0, 2]")
    assert "tailwatch scenario drill --virtual" in message


def test_the_drill_command_runs_it_virtual_and_refuses_it_in_real_time(tmp_path):
    import yaml
    from typer.testing import CliRunner

    from tailwatch.cli import app

    path = tmp_path / "restart.yaml"
    path.write_text(yaml.safe_dump(_raw(restart=[1])), encoding="utf-8")
    runner = CliRunner()
    virtual = runner.invoke(app, ["scenario", "drill", str(path), "--virtual", "--seed", "2"])
    assert virtual.exit_code == 0, virtual.output
    assert virtual.stdout.startswith("restart")
    real = runner.invoke(app, ["scenario", "drill", str(path), "--workdir", str(tmp_path / "w")])
    assert real.exit_code == 2 and real.stdout == ""
    assert real.stderr.startswith("error: drill 'restart': phases[1] (perturbation).restart")
    assert len(real.stderr.splitlines()) == 1 and not (tmp_path / "w").exists()
    seeded = runner.invoke(app, ["scenario", "drill", str(path), "--seed", "2"])
    assert seeded.exit_code == 2 and seeded.stderr.startswith("error: --seed: applies to")
