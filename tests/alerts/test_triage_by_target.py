"""Triage measures every replica from one read of every replica per family and window
(``alerts/triage/by_target.py``): the same measurements as reading each replica alone, a
number of reads that does not grow with the fleet, and each replica read alone where the
read of every replica is refused."""

from __future__ import annotations

from collections import Counter

from alerts.triage.by_target import ByTargetReads
from alerts.triage.data import TimeWindow
from alerts.triage.gather import gather
from alerts.triage.measure_scope import Scope, measure_scope
from collectors import canonical as c
from slo import LayoutMismatchError
from tests.alerts.eval_data import START, Conditions, build, target

SLOW = START + 1800.0


def _slow_third(t: float, replica: int) -> Conditions:
    """Replica 2 decodes 5x slower and queues after half an hour; replica 0 prefills 2x."""
    if t > SLOW and replica == 2:
        return Conditions(itl=((0.1, 1.0),), waiting=6.0, kv_usage=0.9, preemptions=3)
    if replica == 0:
        return Conditions(ttft=((0.16, 1.0),), requests=130)
    return Conditions()


INCIDENT = TimeWindow(SLOW + 300.0, SLOW + 900.0)
BASELINE = TimeWindow(SLOW - 900.0, SLOW - 300.0)


class Counting:
    """A reader that counts the reads triage sends it."""

    def __init__(self, reader) -> None:
        self.reader, self.calls = reader, Counter()

    def __getattr__(self, name: str):
        method = getattr(self.reader, name)
        if not callable(method):
            return method

        def counted(*args, **kwargs):
            self.calls[name] += 1
            return method(*args, **kwargs)

        return counted


def test_every_replica_measures_as_read_alone() -> None:
    fake = build(_slow_third, replicas=4, hours=1.0)
    each = ByTargetReads(fake)
    for window in (INCIDENT, BASELINE):
        for i in range(4):
            scope = Scope({c.LABEL_TARGET: target(i)}, ())
            assert measure_scope(each, scope, window) == measure_scope(fake, scope, window)
    slow = measure_scope(each, Scope({c.LABEL_TARGET: target(2)}, ()), INCIDENT)
    fast = measure_scope(each, Scope({c.LABEL_TARGET: target(1)}, ()), INCIDENT)
    assert slow.itl_p99_seconds.value > 2 * fast.itl_p99_seconds.value  # not one fleet figure
    assert slow.kv_usage_max.value == 0.9 and fast.kv_usage_max.value == 0.4


def test_the_reads_do_not_grow_with_the_fleet() -> None:
    sent = {}
    for replicas in (3, 12):
        reader = Counting(build(_slow_third, replicas=replicas, hours=1.0))
        data = gather(reader, None, INCIDENT, BASELINE)
        assert len(data.replicas) == replicas
        # NOTE: the target list is read once (series); the fake's exemplars are read per
        # replica (a server answers them in one request: the last test)
        sent[replicas] = sum(
            n for name, n in reader.calls.items() if name not in ("series", "exemplars")
        )
    assert sent[12] == sent[3], sent


def test_a_refused_read_of_every_replica_reads_each_alone() -> None:
    """A layout change on one replica refuses the read of every replica: each is then read
    alone, so the refusal is that replica's note and the others are measured."""
    fake = build(_slow_third, replicas=3, hours=1.0)

    class Refusing(Counting):
        def histogram_windows_by_target(self, *args, **kwargs):
            raise LayoutMismatchError("bucket layouts differ (merge)", (0.1,), (0.2,))

    reader = Refusing(fake)
    each = ByTargetReads(reader)
    scope = Scope({c.LABEL_TARGET: target(2)}, ())
    assert measure_scope(each, scope, INCIDENT) == measure_scope(fake, scope, INCIDENT)
    assert reader.calls["histogram_window"] > 0


def test_a_servers_exemplars_of_every_replica_are_one_request() -> None:
    """Triage's slowest requests from exemplars: on a server, one ``query_exemplars`` request
    per family for every replica (grouped by the series' ``instance``), not one per replica."""
    import httpx

    from collectors.prometheus import PrometheusReader

    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        path = request.url.path.removeprefix("/api/v1/")
        asked.append(path)
        if path == "label/__name__/values":
            data: object = ["vllm:time_to_first_token_seconds_bucket"]
        elif path == "status/buildinfo":
            data = {"version": "2.42.0"}
        elif path == "query_exemplars":
            data = [
                {
                    "seriesLabels": {"instance": replica, "le": "2.5"},
                    "exemplars": [
                        {"labels": {"trace_id": f"{replica}-{k}"}, "value": str(v), "timestamp": 1}
                        for k, v in enumerate(values)
                    ],
                }
                for replica, values in (("a:8000", (0.4, 2.1)), ("b:8000", (1.7,)))
            ]
        else:
            return httpx.Response(404, json={"status": "error", "error": "not found"})
        return httpx.Response(200, json={"status": "success", "data": data})

    client = httpx.Client(transport=httpx.MockTransport(answer))
    reader = PrometheusReader("http://prometheus.test:9090", client=client)
    every = reader.exemplars_by_target(c.TTFT_SECONDS, None, 0.0, 60.0)
    assert asked.count("query_exemplars") == 1
    assert {t: [e.value for e in found] for t, found in every.items()} == {
        "a:8000": [0.4, 2.1], "b:8000": [1.7]
    }  # fmt: skip
    assert sorted(e.value for e in reader.exemplars(c.TTFT_SECONDS, None, 0.0, 60.0)) == [
        0.4, 1.7, 2.1
    ]  # fmt: skip
    from alerts.triage.gather import _exemplar_requests

    before = asked.count("query_exemplars")
    slow = _exemplar_requests(ByTargetReads(reader), ["a:8000", "b:8000", "c:8000"], INCIDENT, 1)
    assert asked.count("query_exemplars") - before == 1  # TTFT (no e2e held): every replica
    assert [(s.target, s.trace_id) for s in slow if s.ttft_seconds] == [
        ("a:8000", "a:8000-1"), ("b:8000", "b:8000-0")
    ]  # fmt: skip
