"""The virtual fleet: simulated replicas on one virtual clock, scraped and traced through the
collector's own code paths. Deterministic for a seed; admin patches act as on a served
replica; the router sees completions when they happen."""

from __future__ import annotations

import dataclasses

import pytest

from collectors import canonical as c
from collectors.replica_targets import replica_targets
from engine.sim.offline import VIRTUAL_EPOCH
from loadgen.errors import WorkloadError
from loadgen.virtual.collect import VirtualCollector, VirtualStore
from loadgen.virtual.fleet import VirtualFleet
from loadgen.virtual.replica import DEFAULT_SIM_MODEL, VirtualReplica, engine_settings
from loadgen.workload import build_schedule, parse_workload


def _fleet(count=2, routing="round-robin", knobs=None, seed=0, fast=True, **workload):
    config, limits = engine_settings(
        {"model": "tiny", "max_model_len": 512, "num_gpu_blocks": 512, **(knobs or {})}
    )
    replicas = [VirtualReplica(i, config, limits, seed=seed, fast=fast) for i in range(count)]
    fleet = VirtualFleet(replicas, routing)
    spec = {"rate": 8, "duration": 10, "prompt_tokens": 96, "output_tokens": 24, "seed": seed}
    fleet.add_arrivals(build_schedule([parse_workload({**spec, **workload})]))
    return fleet


def _run(fleet, seconds=12.0, store=None):
    collector = VirtualCollector(store or VirtualStore.memory(), fleet.replicas)
    t = 0.0
    while t <= seconds:
        fleet.advance_to(t)
        collector.receive(fleet.take_log().finished)
        collector.scrape(t)
        t += 1.0
    return collector


def _figures(fleet):
    return [
        (
            r.index,
            r.replica,
            r.status,
            round(r.ttft_seconds or -1, 9),
            round(r.e2e_seconds or -1, 9),
        )
        for r in sorted(fleet.results, key=lambda r: r.index)
    ]


def test_a_bundled_model_runs_as_its_simulated_counterpart():
    config, limits = engine_settings({"model": "tiny", "max_waiting_requests": 4})
    assert config.model == DEFAULT_SIM_MODEL
    assert limits == {"max_waiting_requests": 4, "max_concurrency_per_tenant": None}
    assert engine_settings({"model": "tiny"}, "sim:qwen2.5-14b@a100")[0].model == (
        "sim:qwen2.5-14b@a100"
    )
    with pytest.raises(WorkloadError, match=r"engine\.flux_capacitor"):
        engine_settings({"flux_capacitor": 1})
    with pytest.raises(WorkloadError, match="max_waiting_requests"):
        engine_settings({"max_waiting_requests": 0})


def test_the_same_seed_gives_the_same_run_and_another_seed_another():
    first, second, other = _fleet(seed=1), _fleet(seed=1), _fleet(seed=2)
    for fleet in (first, second, other):
        _run(fleet)
    assert _figures(first) == _figures(second)
    assert _figures(first) != _figures(other)
    assert len(first.results) > 50 and all(r.status == 200 for r in first.results)
    # a GPU's step times, not this CPU's: tens of milliseconds at most per token
    gaps = sorted(g for r in first.results for g in r.itl_seconds)
    assert 0.001 < gaps[len(gaps) // 2] < 0.05


def test_the_fast_path_gives_what_every_engine_step_gives():
    fast, slow = _fleet(seed=3), _fleet(seed=3, fast=False)
    fast_store, slow_store = VirtualStore.memory(), VirtualStore.memory()
    _run(fast, store=fast_store)
    _run(slow, store=slow_store)
    assert _figures(fast) == _figures(slow)
    assert _readings(fast.replicas[0]) == _readings(slow.replicas[0])


def _readings(replica):
    """The replica's /metrics in Prometheus text without ``_created`` lines: those (and
    exemplars' timestamps) are prometheus_client's wall-clock reads, the rest is virtual."""
    body, _ = replica.metrics.render(None)
    return [line for line in body.decode().splitlines() if "_created" not in line]


def test_scrapes_and_spans_reach_the_store_through_the_collectors_code():
    fleet = _fleet(count=3, routing="round-robin")
    store = VirtualStore.memory()
    _run(fleet, store=store)
    targets = {dict(s.labels)[c.LABEL_TARGET] for s in store.metrics.series(c.TTFT_SECONDS)}
    assert targets == {"replica-0", "replica-1", "replica-2"}
    window = store.metrics.histogram_window(c.TTFT_SECONDS, {}, VIRTUAL_EPOCH, VIRTUAL_EPOCH + 13)
    served = [r for r in fleet.results if r.status == 200]
    assert window is not None and window.cumulative_counts[-1] == len(served)
    records = store.requests.requests(VIRTUAL_EPOCH, VIRTUAL_EPOCH + 20)
    assert len(records) == len(served)
    # each record names the engine instance, which the scrapes join to its target
    mapping = replica_targets(store.metrics).unique()
    by_target = {t: sum(mapping[r.replica] == t for r in records) for t in targets}
    assert by_target == {t: sum(r.replica == t for r in served) for t in targets}
    assert all(r.ttft_seconds is not None and r.trace_id for r in records)


def test_the_sqlite_store_holds_what_the_memory_one_holds(tmp_path):
    memory, sql = VirtualStore.memory(), VirtualStore.at(f"sqlite:///{tmp_path / 's.db'}")
    try:
        _run(_fleet(seed=4), store=memory)
        _run(_fleet(seed=4), store=sql)
        for store in (memory, sql):
            window = store.metrics.histogram_window(
                c.ITL_SECONDS, {}, VIRTUAL_EPOCH, VIRTUAL_EPOCH + 12
            )
            assert window is not None
        a = memory.metrics.histogram_window(c.ITL_SECONDS, {}, VIRTUAL_EPOCH, VIRTUAL_EPOCH + 12)
        b = sql.metrics.histogram_window(c.ITL_SECONDS, {}, VIRTUAL_EPOCH, VIRTUAL_EPOCH + 12)
        assert a.cumulative_counts == b.cumulative_counts
        assert len(memory.requests.requests(0, 1e12)) == len(sql.requests.requests(0, 1e12))
    finally:
        sql.close()


def test_admin_patches_act_as_on_a_served_replica():
    knobs = {"num_gpu_blocks": 256, "max_model_len": 256}
    fleet = _fleet(count=1, rate=6, prompt_tokens=64, output_tokens=120, knobs=knobs)
    replica = fleet.replicas[0]
    fleet.advance_to(3.0)
    # a squeezed KV pool preempts; a step delay spaces the tokens out
    applied = replica.patch({"num_usable_gpu_blocks": 24, "step_delay_seconds": 0.05})
    assert {a.knob for a in applied} == {"num_usable_gpu_blocks", "step_delay_seconds"}
    assert replica.knobs()["step_delay_seconds"] == 0.05
    fleet.advance_to(120.0)
    assert replica.engine.stats().num_preemptions_total > 0
    late = [g for r in fleet.results if r.scheduled_seconds > 4 for g in r.itl_seconds]
    assert late and min(late) >= 0.05
    with pytest.raises(Exception, match="step_delay_seconds"):
        replica.patch({"step_delay_seconds": -1})
    assert replica.knobs()["step_delay_seconds"] == 0.05  # all or nothing
    body, _ = replica.exposition()
    assert 'tailwatch:knob_changes_total{engine="0",knob="step_delay_seconds"' in body


def test_a_bounded_queue_refuses_with_429_and_retry_after():
    fleet = _fleet(
        count=1,
        rate=60,
        duration=4,
        output_tokens=64,
        knobs={"max_waiting_requests": 4, "max_num_seqs": 2},
    )
    fleet.replicas[0].patch({"step_delay_seconds": 0.05})
    fleet.advance_to(30.0)
    refused = [r for r in fleet.results if r.status == 429]
    assert refused and all(r.retry_after_seconds and r.retry_after_seconds >= 1 for r in refused)
    assert all(r.error == "max_num_queued_reqs" for r in refused)
    body, _ = fleet.replicas[0].exposition()
    line = next(
        x for x in body.splitlines() if x.startswith('tailwatch:http_responses_total{code="429"')
    )
    assert float(line.split()[-1]) == len(refused)


def test_least_outstanding_routes_around_a_slow_replica_and_active_replicas_hold():
    fleet = _fleet(count=2, routing="least-outstanding", rate=20, duration=10)
    fleet.replicas[1].patch({"step_delay_seconds": 0.2})
    fleet.advance_to(30.0)
    counts = [sum(r.replica == f"replica-{i}" for r in fleet.results) for i in range(2)]
    assert counts[0] > 2 * counts[1], counts
    only = _fleet(count=3, rate=10, duration=5)
    only.set_active([2])
    only.advance_to(20.0)
    assert {r.replica for r in only.results} == {"replica-2"}


def test_arrivals_cannot_be_added_in_the_past():
    fleet = _fleet(count=1)
    fleet.advance_to(5.0)
    late = dataclasses.replace(build_schedule([parse_workload({"rate": 1, "duration": 2})])[0])
    with pytest.raises(ValueError, match="before now"):
        fleet.add_arrivals([dataclasses.replace(late, at_seconds=1.0)])
