"""``loadgen.lab_sweep``: a sweep stores each point as it finishes and its end; Ctrl-C keeps
the points so far; a failing point fails the run with its error; a running engine's knob is
set per value and put back afterwards (also on Ctrl-C). Simulated sweeps run in virtual time
(well under a second each); the one real-time sweep is a few short points on ``tiny``."""

from __future__ import annotations

import asyncio
import math

import httpx
import pytest

from collectors.store.fake_lab import FakeLab
from collectors.store.lab_records import LabRunStatus
from loadgen.lab_knee import knee_curves
from loadgen.lab_sweep import SweepPlan, run_lab_sweep, samples
from loadgen.record import RequestResult
from loadgen.summary import parse_slo
from loadgen.workload import parse_workload
from tests.loadgen.conftest import ADMIN_TOKEN, ENGINE

SIM = "sim:llama-3.1-8b@h100"


def sim_plan(**changes) -> SweepPlan:
    workload = parse_workload(
        {"rate": 1, "duration": 1, "prompt_tokens": 2048, "output_tokens": 8, "seed": 3}
    )
    plan = {
        "knob": "max_num_batched_tokens",
        "values": (512, 4096),
        "rates": (4.0, 100.0),
        "workload": workload,
        "objectives": parse_slo("ttft=200"),
        "engine": SIM,
        "repeats": 2,
        "engine_knobs": {"max_model_len": 4096},
        "workload_options": {"duration": 2},
    }
    return SweepPlan(**{**plan, **changes})


def test_a_simulated_sweep_stores_each_point_as_it_finishes_and_the_knee() -> None:
    lab = FakeLab()
    seen = []

    def on_point(point, done: int, planned: int) -> None:
        # the point is in the store before the callback, and the run still runs
        assert len(lab.lab_points(point.run_id)) == done
        assert lab.lab_run(point.run_id).status is LabRunStatus.RUNNING
        seen.append((point.knob_value, point.rate, point.repeat, done, planned))

    outcome = run_lab_sweep(sim_plan(), lab, on_point, clock=lambda: 1_000.0)
    assert outcome.status is LabRunStatus.FINISHED
    assert seen == [
        (v, r, k, i + 1, 8)
        for i, (v, r, k) in enumerate(
            (v, r, k) for v in (512, 4096) for r in (4.0, 100.0) for k in range(2)
        )
    ]
    run = lab.lab_run(outcome.run_id)
    assert (run.status, run.num_planned_points, run.sweep_knob) == (
        LabRunStatus.FINISHED,
        8,
        "max_num_batched_tokens",
    )
    assert run.simulated and run.target == SIM and run.knob_values == (512, 4096)
    assert run.knobs["max_model_len"] == 4096 and "max_num_batched_tokens" not in run.knobs
    assert run.workload["slo_ms"] == {"ttft": 200.0} and run.workload["target_attainment"] == 0.9
    points = lab.lab_points(outcome.run_id)
    for point in points:
        assert point.summary["num_scheduled"] == point.summary["num_succeeded"] > 0
        assert len(point.samples["ttft_ms"]) == point.summary["num_succeeded"]
        assert point.samples["ttft_ms"] and point.samples["itl_ms"]
    # repeats are re-seeded: a different schedule, not a copy
    assert points[0].summary["num_scheduled"] != points[1].summary["num_scheduled"] or (
        points[0].samples != points[1].samples
    )
    curves = knee_curves(points)
    assert [c.knob_value for c in curves] == [512, 4096]
    for curve in curves:
        low, high = curve.points
        assert (low.rate, high.rate, low.num_repeats) == (4.0, 100.0, 2)
        mean = sum(p.summary["slo_attainment"] for p in points
                   if p.knob_value == curve.knob_value and p.rate == 4.0) / 2  # fmt: skip
        assert low.slo_attainment == pytest.approx(mean)
        # 100 req/s of 2048-token prompts (~55 ms of prefill each) overload one H100
        assert low.passes(0.9) and not high.passes(0.9)
        assert (curve.knee_rate, curve.first_failing_rate) == (4.0, 100.0)


def test_ctrl_c_ends_the_run_as_interrupted_and_keeps_its_points() -> None:
    lab = FakeLab()

    def on_point(point, done: int, planned: int) -> None:
        if done == 3:
            raise KeyboardInterrupt

    outcome = run_lab_sweep(sim_plan(), lab, on_point)
    assert outcome.status is LabRunStatus.INTERRUPTED
    run = lab.lab_run(outcome.run_id)
    assert run.status is LabRunStatus.INTERRUPTED and run.finished_at is not None
    assert run.error == "interrupted after 3 of 8 points"
    assert len(lab.lab_points(outcome.run_id)) == 3 == len(outcome.points)


def test_a_point_that_fails_fails_the_run_with_its_error() -> None:
    lab = FakeLab()
    # NOTE: 2048-token prompts do not fit max_model_len 1024: the engine refuses them
    outcome = run_lab_sweep(sim_plan(engine_knobs={"max_model_len": 1024}), lab)
    assert outcome.status is LabRunStatus.FAILED and outcome.points == ()
    (run,) = lab.lab_runs()
    assert run.status is LabRunStatus.FAILED and lab.lab_points(run.id) == []
    assert run.error == outcome.error
    assert run.error == "RequestError: prompt has 2048 tokens, more than max_model_len=1024"


def test_samples_are_capped_by_a_seeded_sample_in_request_order() -> None:
    results = [
        RequestResult(
            i, 0.0, 0.0, ttft_seconds=i / 1000, e2e_seconds=1.0, itl_seconds=[0.001] * 3, status=200
        )
        for i in range(50)
    ]
    results.append(RequestResult(50, 0.0, dropped=True))
    kept = samples(results, 10, "seed")
    assert [len(kept[k]) for k in ("ttft_ms", "e2e_ms", "itl_ms")] == [10, 10, 10]
    assert kept["ttft_ms"] == sorted(kept["ttft_ms"]) and kept["ttft_ms"] != [
        float(i) for i in range(10)
    ]
    assert kept == samples(results, 10, "seed")
    assert samples(results, 1000, "s")["ttft_ms"] == [float(i) for i in range(50)]


async def _knob(client: httpx.AsyncClient, url: str) -> int:
    reply = await client.get(
        f"{url}/admin/config", headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}
    )
    return reply.json()["max_num_batched_tokens"]


def test_a_running_engine_has_its_knob_set_per_value_and_put_back_even_on_ctrl_c() -> None:
    from loadgen.replicas import bundled_replicas

    workload = parse_workload({"rate": 1, "duration": 0.5, "prompt_tokens": 8, "output_tokens": 4})
    with bundled_replicas(1, ENGINE, admin_token=ADMIN_TOKEN) as (url,):

        async def knob() -> int:
            async with httpx.AsyncClient() as client:
                return await _knob(client, url)

        original = asyncio.run(knob())
        assert original not in (256, 512)
        during = []

        def on_point(point, done: int, planned: int) -> None:
            during.append((point.knob_value, asyncio.run(knob())))
            if done == 2:
                raise KeyboardInterrupt

        plan = SweepPlan(
            knob="max_num_batched_tokens", values=(256, 512, 1024), rates=(4.0,),
            workload=workload, objectives=parse_slo(""), url=url, admin_token=ADMIN_TOKEN,
        )  # fmt: skip
        lab = FakeLab()
        outcome = run_lab_sweep(plan, lab, on_point)
        assert during == [(256, 256), (512, 512)]
        assert outcome.status is LabRunStatus.INTERRUPTED and len(outcome.points) == 2
        assert asyncio.run(knob()) == original
        run = lab.lab_run(outcome.run_id)
        assert run.target == url and not run.simulated
        assert run.knobs["max_model_len"] == ENGINE["max_model_len"]
        for point in outcome.points:
            assert point.summary["num_succeeded"] == point.summary["num_scheduled"] > 0
            assert math.isfinite(point.summary["ttft_ms"]["p95"])
