"""Request records join the metrics' ``target``: the engine's instance id is on its
``/metrics`` (``tailwatch:engine_info``) and on its spans (``service.instance.id``), and
``collectors.replica_targets`` pairs them. Table-tested as plain data, then end to end: two
bundled engines, traced into a loopback receiver and scraped under names of the collector's
own, every stored request record maps to exactly the target that scraped its engine."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import canonical as c
from collectors.collector import Collector
from collectors.replica_targets import replica_targets, replica_targets_from_series
from collectors.scrape import Scraper, Target
from collectors.store import Store, sqlite_url
from collectors.store.records import SeriesInfo
from tests.collectors.test_traces import receiver


def info(**labels: str) -> SeriesInfo:
    return SeriesInfo(c.ENGINE_INFO, c.labels_key(labels), "gauge", frozenset())


@pytest.mark.parametrize(
    ("series", "replica", "target"),
    [
        ([info(target="a", instance_id="u1"), info(target="b", instance_id="u2")], "u2", "b"),
        ([info(target="a", instance_id="u1")], "u9", None),  # an engine never scraped
        ([info(target="a", instance_id="u1")], None, None),  # a record without a replica
        # one engine scraped under two names: no single answer, and it is reported
        ([info(target="a", instance_id="u1"), info(target="b", instance_id="u1")], "u1", None),
        # a restarted engine: a new id on the same target; both ids map to it
        ([info(target="a", instance_id="u1"), info(target="a", instance_id="u2")], "u1", "a"),
        ([info(instance_id="u1"), info(target="a")], "u1", None),  # half a pair names nothing
        # vLLM: no instance id, the record's replica is host:port, the default target name
        ([info(target="10.0.0.7:8000", instance_id="u1")], "10.0.0.7:8000", "10.0.0.7:8000"),
    ],
)
def test_the_join_as_plain_data(series, replica, target):
    assert replica_targets_from_series(series).target(replica) == target


def test_ambiguous_ids_are_reported():
    join = replica_targets_from_series(
        [info(target="a", instance_id="u"), info(target="b", instance_id="u")]
    )
    assert join.ambiguous() == {"u": frozenset({"a", "b"})}


@settings(max_examples=50, deadline=None)
@given(
    st.lists(st.tuples(st.text(max_size=8), st.text(max_size=8)), max_size=8), st.text(max_size=8)
)
def test_a_target_answer_is_always_one_that_showed_the_id(pairs, replica):
    series = [info(target=t, instance_id=i) for t, i in pairs]
    target = replica_targets_from_series(series).target(replica)
    if target is not None:
        assert (target, replica) in pairs or (
            replica == target and any(t == target for t, _ in pairs)
        )


def test_every_stored_request_record_maps_to_the_target_that_scraped_its_engine(tmp_path):
    from loadgen import build_schedule, parse_workload, run_schedule
    from loadgen.replicas import bundled_replicas

    store = Store(sqlite_url(tmp_path / "tw.db"))
    workload = parse_workload(
        {"rate": 8, "duration": 1.5, "arrivals": "constant", "prompt_tokens": 16,
         "output_tokens": 4, "seed": 3}
    )  # fmt: skip
    engine = {"model": "tiny", "max_model_len": 256, "num_gpu_blocks": 128}
    with receiver(store) as (collector_url, _writer):
        endpoint = collector_url + "/v1/traces"
        with bundled_replicas(2, engine, otlp_endpoint=endpoint) as urls:
            # NOTE: names of the collector's own, unrelated to host:port, so only the
            # instance id can join them
            targets = [
                Target(f"replica-{n}", f"{u}/metrics") for n, u in zip("ab", urls, strict=True)
            ]

            async def scrape_and_load():
                async with Scraper(timeout_seconds=10) as scraper:
                    collector = Collector(targets, store, scraper)
                    await collector.run_once()
                    state = await run_schedule(urls, build_schedule([workload]))
                    await collector.run_once()
                    return state

            state = asyncio.run(scrape_and_load())
            served = {urls.index(r.replica): r.response_id for r in state.results}
            assert set(served) == {0, 1}, "round-robin sends both replicas requests"
        # the replicas have stopped and flushed their spans; the receiver flushes on exit
    records = store.requests(0, math.inf)
    assert all(r.succeeded for r in state.results)
    assert sorted(r.request_id for r in records) == sorted(r.response_id for r in state.results)
    join = replica_targets(store)
    assert join.ambiguous() == {}
    target_of_url = {t.url.removesuffix("/metrics"): t.name for t in targets}
    sent_to = {r.response_id: target_of_url[r.replica] for r in state.results}
    for record in records:
        assert record.replica is not None and record.replica not in target_of_url.values()
        assert join.target(record.replica) == sent_to[record.request_id], record
    # two engines, two ids, one per target
    assert set(join.targets_by_replica.values()) == {
        frozenset({"replica-a"}),
        frozenset({"replica-b"}),
    }
    store.close()
