"""Replays on several replicas (``loadgen.replay_fleet``), in virtual time: a window a fleet
of two simulated replicas served — each tenant's requests, and so its shared system prompt,
on one replica — replays as recorded with production's per-replica split (requests and
prefix-cache hits), round-robin scatters the prompt groups, and every replica or route
option that cannot be met is refused, naming the option, before anything is stored."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.request_records import RequestRecord
from collectors.store.fake_lab import FakeLab
from collectors.store.fake_requests import FakeRequestReader
from engine.config import EngineConfig
from engine.sim.offline import VIRTUAL_EPOCH, Arrival
from engine.sim.replicas import run_assigned
from loadgen.errors import WorkloadError
from loadgen.replay import ReplayPlan, load_trace, replay_window
from loadgen.replay_fleet import MAX_REPLICAS
from tests.loadgen.test_replay_sim import SIM

KNOBS = {"max_model_len": 4096}
NAMES = ("engine-a:8000", "engine-b:8000")


class _Cached:
    def __init__(self) -> None:
        self.by_id: dict[str, int] = {}

    def on_step(self, engine, outputs, handles) -> None:
        self.by_id.update({o.request_id: o.num_cached_tokens for o in outputs if o.finished})


def fleet_records(num_requests: int = 60, rate: float = 60.0, seed: int = 7):
    """Records of a window two sim replicas served: tenant ``t0`` (half its prompts behind
    system prompt 0) on replica ``engine-a``, ``t1`` (system prompt 1) on ``engine-b``."""
    rng = random.Random(seed)
    systems = [tuple(rng.randrange(256) for _ in range(512)) for _ in range(2)]
    arrivals, tenants, replicas, t = [], {}, [], 0.0
    for i in range(num_requests):
        t += rng.expovariate(rate)
        tenant = rng.randrange(2)
        head = systems[tenant] if rng.random() < 0.6 else ()
        prompt = head + tuple(rng.randrange(256) for _ in range(rng.randrange(50, 400)))
        arrivals.append(Arrival(t, prompt, 32, f"sim-{i}"))
        tenants[f"sim-{i}"] = f"t{tenant}"
        replicas.append(tenant)
    config = EngineConfig(model=SIM, **KNOBS)
    observers = [_Cached(), _Cached()]
    runs = run_assigned(config, arrivals, replicas, 2, [[o] for o in observers])
    cached = {**observers[0].by_id, **observers[1].by_id}
    done = sorted((r for run in runs for r in run.results), key=lambda r: r.arrival_time)
    where = {a.request_id: NAMES[r] for a, r in zip(arrivals, replicas, strict=True)}
    records = [
        RequestRecord(
            request_id=r.request_id,
            trace_id=f"{i + 1:032x}",
            span_id=f"{i + 1:016x}",
            service="tailwatch-engine",
            tenant=tenants[r.request_id],
            model=SIM,
            replica=where[r.request_id],
            arrival=VIRTUAL_EPOCH + r.arrival_time,
            queue_seconds=None,
            ttft_seconds=r.ttft_seconds,
            prefill_seconds=None,
            decode_seconds=None,
            tpot_seconds=None,
            e2e_seconds=r.e2e_seconds,
            input_tokens=r.num_prompt_tokens,
            output_tokens=r.num_output_tokens,
            cached_tokens=cached[r.request_id],
            preemptions=r.num_preemptions,
            finish_reason=r.finish_reason,
            is_error=False,
        )
        for i, r in enumerate(done)
    ]
    return records, (VIRTUAL_EPOCH - 1, VIRTUAL_EPOCH + t + 1)


@pytest.fixture(scope="module")
def fleet():
    records, window = fleet_records()
    return FakeRequestReader(records), records, window


def _replay(fleet, **plan):
    reader, _, window = fleet
    lab = FakeLab()
    report = replay_window(reader, lab, *window, ReplayPlan(engine=SIM, knobs=KNOBS, **plan))
    return report, lab


def test_as_recorded_reproduces_the_per_replica_split(fleet):
    _, records, _ = fleet
    report, lab = _replay(fleet)  # the defaults: as many replicas as recorded, as recorded
    production = Counter(r.replica for r in records)
    hits = {name: sum(r.cached_tokens for r in records if r.replica == name) for name in NAMES}
    assert all(hits.values())
    per_replica = report.per_replica
    assert [e["recorded"] for e in per_replica] == list(NAMES)  # sorted names
    assert [e["num_requests"] for e in per_replica] == [production[n] for n in NAMES]
    assert [e["production"]["num_requests"] for e in per_replica] == [production[n] for n in NAMES]
    assert [e["production"]["cached_tokens"] for e in per_replica] == [hits[n] for n in NAMES]
    # each replica's engine sees its prompt groups as production's did: the same hits
    assert [e["cached_tokens"] for e in per_replica] == [hits[n] for n in NAMES]
    assert report.replay["total_cached_tokens"] == sum(hits.values())
    pair = report.difference["ttft_ms.p50"]
    assert pair["replay"] == pytest.approx(pair["production"], rel=0.05)
    (run,) = lab.lab_runs()
    assert (run.workload["replicas"], run.workload["route"]) == (2, "as-recorded")
    assert run.workload["recorded_replicas"] == {n: production[n] for n in NAMES}
    assert run.workload["num_records_without_replica"] == 0
    (point,) = lab.lab_points(run.id)
    assert point.summary["replay"]["replicas"] == 2
    assert point.summary["replay"]["route"] == "as-recorded"
    assert point.summary["replay"]["per_replica"] == per_replica


def test_round_robin_scatters_the_prompt_groups(fleet):
    _, records, _ = fleet
    recorded, _ = _replay(fleet)
    spread, lab = _replay(fleet, route="round-robin")
    n = len(records)
    assert [e["num_requests"] for e in spread.per_replica] == [(n + 1) // 2, n // 2]
    assert all(e["production"] is None and e["recorded"] is None for e in spread.per_replica)
    # a group's requests now land on both replicas: each has to prefill its prefix once
    assert spread.replay["total_cached_tokens"] < recorded.replay["total_cached_tokens"]
    assert spread.production == recorded.production
    (run,) = lab.lab_runs()
    assert (run.workload["replicas"], run.workload["route"]) == (2, "round-robin")


def test_one_replica_takes_the_whole_fleets_load(fleet):
    two, _ = _replay(fleet)
    one, _ = _replay(fleet, route="round-robin", replicas=1)
    assert [e["num_requests"] for e in one.per_replica] == [len(two.trace.requests)]
    # the fleet's window on one engine: twice a replica's load (virtual time: exact)
    assert one.replay["e2el_ms"]["p99"] > 1.05 * two.replay["e2el_ms"]["p99"]


def test_a_window_without_replica_names_is_one_replica(fleet):
    _, records, window = fleet
    reader = FakeRequestReader([replace(r, replica=None) for r in records])
    report = replay_window(reader, FakeLab(), *window, ReplayPlan(engine=SIM, knobs=KNOBS))
    assert report.fleet.num_replicas == 1 and report.per_replica[0]["recorded"] is None
    spread = replay_window(
        reader, FakeLab(), *window, ReplayPlan(engine=SIM, knobs=KNOBS, replicas=3,
                                               route="round-robin"),
    )  # fmt: skip
    assert [e["num_requests"] for e in spread.per_replica] == [20, 20, 20]


def _refused(reader, window, plan) -> WorkloadError:
    lab = FakeLab()
    with pytest.raises(WorkloadError) as caught:
        replay_window(reader, lab, *window, plan)
    assert lab.lab_runs() == []
    return caught.value


def test_what_the_fleet_cannot_replay_is_refused_and_nothing_is_stored(fleet):
    reader, records, window = fleet
    error = _refused(reader, window, ReplayPlan(engine=SIM, replicas=3))
    assert error.field == "replicas"
    assert "name 2 replicas (engine-a:8000, engine-b:8000)" in str(error)
    assert "--route round-robin" in str(error)
    mixed = FakeRequestReader([replace(records[0], replica=None), *records[1:]])
    error = _refused(mixed, window, ReplayPlan(engine=SIM))
    assert error.field == "route" and "1 of 60 replayed records name no replica" in str(error)
    error = _refused(reader, window, ReplayPlan(engine=None, url="http://127.0.0.1:9"))
    assert error.field == "url" and "give --url once per replica" in str(error)
    cases = [
        (ReplayPlan(engine=SIM, replicas=0), "replicas"),
        (ReplayPlan(engine=SIM, replicas=True), "replicas"),
        (ReplayPlan(engine=SIM, replicas=2.0), "replicas"),  # type: ignore[arg-type]
        (ReplayPlan(engine=SIM, replicas=MAX_REPLICAS + 1), "replicas"),
        (ReplayPlan(engine="tiny", replicas=17), "replicas"),
        (ReplayPlan(engine=SIM, route="least-outstanding"), "route"),
        (ReplayPlan(engine=None, url="http://127.0.0.1:9", replicas=2), "replicas"),
        (ReplayPlan(engine=None, url=("http://127.0.0.1:9",) * 2), "url"),
        (ReplayPlan(engine=None, url=()), "url"),
    ]
    for plan, field in cases:
        assert _refused(reader, window, plan).field == field, plan


def test_a_fleet_bigger_than_the_bundled_limit_is_refused_by_default(fleet):
    _, records, window = fleet
    many = FakeRequestReader([replace(r, replica=f"e{i}") for i, r in enumerate(records)])
    error = _refused(many, window, ReplayPlan(engine="tiny"))
    assert error.field == "replicas" and "60 replicas: at most 16 bundled" in str(error)


@settings(max_examples=60, deadline=None)
@given(
    st.one_of(
        st.integers(-(10**30), 10**30),
        st.sampled_from([0, 1, 2, 3, MAX_REPLICAS, MAX_REPLICAS + 1, -1, 2**63]),
    ),
    st.sampled_from(["as-recorded", "round-robin"]),
)
def test_any_replica_count_is_a_fleet_or_one_error(fleet, count, route):
    reader, _, window = fleet
    plan = ReplayPlan(engine=SIM, knobs=KNOBS, replicas=count, route=route)
    try:
        plan.check()
        fleet_of = plan.fleet(load_trace(reader, *window, seed=plan.seed))
    except WorkloadError as error:
        assert error.field == "replicas" and "\n" not in str(error)
        assert not (route == "round-robin" and 1 <= count <= MAX_REPLICAS)
        assert not (route == "as-recorded" and count == 2)
    else:
        assert fleet_of.num_replicas == count and 1 <= count <= MAX_REPLICAS
        assert set(fleet_of.assignment) <= set(range(count))


def test_the_assigned_route_sends_each_request_to_its_replica():
    from loadgen.routing import ASSIGNED, POLICIES, Router
    from loadgen.workload import ScheduledRequest

    router = Router(["http://a", "http://b"], ASSIGNED)
    request = ScheduledRequest(0, 0.0, (1, 2), 4, None, None, None, "replay", replica=1)
    assert [router.pick(request) for _ in range(3)] == [1, 1, 1]
    for bad in (None, 2, -1):
        with pytest.raises(WorkloadError, match=f"assigned replica {bad!r}, not one of"):
            router.pick(replace(request, replica=bad))
    assert ASSIGNED not in POLICIES  # the load generator's own options name no replica
