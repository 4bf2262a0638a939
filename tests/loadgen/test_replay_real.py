"""A real run recorded and replayed on the same engine with the same knobs: the bundled
``tiny`` engine serves a short open-loop load with its request spans captured (decoded as
the collector decodes them), then ``replay_window`` replays that window on a fresh replica (and, relabelled as two
replicas' by tenant, on two bundled replicas).

The reconstruction is asserted exactly (offsets, lengths, tenants); timing only with a wide
margin a busy machine cannot break (the acceptance figure, within 15%, is measured in
docs/knob-lab.md, "Replay")."""

from __future__ import annotations

import asyncio
import statistics

import pytest

from collectors.store.fake_lab import FakeLab
from collectors.store.fake_requests import FakeRequestReader
from loadgen.arrivals import Arrivals
from loadgen.distributions import Uniform
from loadgen.errors import WorkloadError
from loadgen.replay import ReplayPlan, replay_window
from loadgen.replay_spans import SpanCapture
from loadgen.replicas import bundled_replicas
from loadgen.runner import run_schedule
from loadgen.workload import SharedPrefix, Workload, build_schedule
from tests.loadgen.conftest import ENGINE

KNOBS = {k: v for k, v in ENGINE.items() if k != "model"}


@pytest.fixture(scope="module")
def recorded():
    workload = Workload(
        arrivals=Arrivals("poisson", 8.0),
        duration_seconds=1.5,
        prompt_tokens=Uniform(24, 120),
        output_tokens=Uniform(4, 12),
        prefix=SharedPrefix(num_groups=1, share=0.5, tokens=48),
        tenants=(("a", 1.0), ("b", 1.0)),
        seed=5,
    )
    schedule = build_schedule([workload])
    capture = SpanCapture("tiny")
    with bundled_replicas(1, ENGINE, tracers=[capture.tracer]) as urls:
        state = asyncio.run(run_schedule(urls, schedule))
        assert all(r.succeeded for r in state.results), [r.error for r in state.results]
        records = capture.records()
        assert len(records) == len(schedule) > 3
        # the same window replayed on the running replica (--url): timed by the client
        at_url = replay_window(
            FakeRequestReader(records),
            FakeLab(),
            *_window(records),
            ReplayPlan(engine=None, url=urls[0]),
        )
    return records, schedule, at_url


def _window(records) -> tuple[float, float]:
    return min(r.arrival for r in records) - 0.5, max(r.arrival for r in records) + 0.5


def test_recorded_window_replays_on_the_same_engine(recorded):
    records, schedule, _ = recorded
    start, end = _window(records)
    lab = FakeLab()
    report = replay_window(
        FakeRequestReader(records), lab, start, end, ReplayPlan(engine="tiny", knobs=KNOBS)
    )
    trace = report.trace
    # the reconstruction, exactly: the engine's own counts and arrivals, in order
    ordered = sorted(records, key=lambda r: r.arrival)
    assert [len(r.prompt_token_ids) for r in trace.requests] == [r.input_tokens for r in ordered]
    assert sorted(len(s.prompt_token_ids) for s in schedule) == sorted(
        len(r.prompt_token_ids) for r in trace.requests
    )
    assert [r.max_tokens for r in trace.requests] == [r.output_tokens for r in ordered]
    assert [r.tenant for r in trace.requests] == [r.tenant for r in ordered]
    offsets = [r.arrival - ordered[0].arrival for r in ordered]
    assert [r.offset_seconds for r in trace.requests] == pytest.approx(offsets, abs=1e-9)
    assert trace.num_prefix_groups >= 1
    # the replay ran every request on the engine and was timed by its spans
    assert report.replay["num_succeeded"] == len(records)
    (point,) = lab.lab_points(report.run_id)
    assert point.summary["replay"]["timed_at"] == "server"
    assert point.summary["client"]["num_succeeded"] == len(records)
    # timing: same engine, same knobs; a wide margin, as the machine is shared
    ratio = report.difference["ttft_ms.p50"]["ratio"]
    assert 1 / 4 < ratio < 4, report.difference["ttft_ms.p50"]
    production_ttft = statistics.median(r.ttft_seconds for r in records) * 1000
    assert report.production["ttft_ms"]["p50"] == pytest.approx(production_ttft)


def test_a_running_server_replays_timed_by_the_client(recorded):
    records, _, report = recorded
    assert report.replay["num_succeeded"] == len(records)
    assert report.replay["total_cached_tokens"] is None  # no spans of its own to read
    assert report.trace.num_records == len(records)
    assert 1 / 4 < report.difference["ttft_ms.p50"]["ratio"] < 4


def test_a_two_replica_window_replays_on_two_bundled_replicas(recorded, monkeypatch):
    """The recorded window relabelled as two replicas' (by tenant) replays on two bundled
    replicas, each request sent to the replica its record names, every replica's spans
    captured."""
    from dataclasses import replace

    from loadgen import replay as replay_module

    records, _, _ = recorded
    fleet = [replace(r, replica=f"engine-{r.tenant}") for r in records]
    runs, original = [], replay_module.run_bundled

    def run_bundled(*args):
        runs.append(original(*args))
        return runs[-1]

    monkeypatch.setattr(replay_module, "run_bundled", run_bundled)
    lab = FakeLab()
    plan = ReplayPlan(engine="tiny", knobs=KNOBS)
    report = replay_window(FakeRequestReader(fleet), lab, *_window(records), plan)
    assert report.fleet.num_replicas == 2 and report.fleet.route == "as-recorded"
    assert [e["recorded"] for e in report.per_replica] == ["engine-a", "engine-b"]
    by_tenant = [sum(r.tenant == t for r in records) for t in ("a", "b")]
    assert [e["num_requests"] for e in report.per_replica] == by_tenant
    assert report.replay["num_succeeded"] == len(records)
    (run,) = runs
    assert run.server_records is not None and len(run.server_records) == len(records)
    assert run.replica_cached_tokens is not None and len(run.replica_cached_tokens) == 2
    # each request went to its record's replica: one URL per replica, two in all
    urls = {}
    for request, result in zip(report.trace.requests, run.results, strict=True):
        urls.setdefault(request.record.replica, set()).add(result.replica)
    assert sorted(urls) == ["engine-a", "engine-b"]
    assert all(len(u) == 1 for u in urls.values()) and len(set.union(*urls.values())) == 2
    (point,) = lab.lab_points(report.run_id)
    assert (point.summary["replay"]["replicas"], point.summary["replay"]["timed_at"]) == (
        2,
        "server",
    )


def test_a_two_replica_window_replays_on_two_running_servers(recorded):
    """The same relabelled window against two running servers (``--url`` twice), as
    recorded: each server gets its replica's requests, timed by the client."""
    from dataclasses import replace

    records, _, _ = recorded
    fleet = FakeRequestReader([replace(r, replica=f"engine-{r.tenant}") for r in records])
    with bundled_replicas(2, ENGINE) as urls:
        plan = ReplayPlan(engine=None, url=tuple(urls))
        report = replay_window(fleet, FakeLab(), *_window(records), plan)
        with pytest.raises(WorkloadError, match="give --url once per replica"):
            replay_window(fleet, FakeLab(), *_window(records), ReplayPlan(engine=None, url=urls[0]))
    assert report.fleet.num_replicas == 2
    by_tenant = [sum(r.tenant == t for r in records) for t in ("a", "b")]
    assert [e["num_requests"] for e in report.per_replica] == by_tenant
    assert all(e["cached_tokens"] is None for e in report.per_replica)  # a URL cannot say
    assert report.replay["num_succeeded"] == len(records)
