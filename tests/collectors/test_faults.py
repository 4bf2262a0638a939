"""Faults against real processes: two bundled-engine replicas (``tailwatch engine serve``
subprocesses, tiny preset) under light load, one killed and restarted on the same port while
the collector runs; malformed and oversized targets in the same run; and a PostgreSQL server
stopped for a few cycles.

The load is a handful of sequential requests with 2 output tokens; the collector runs at
0.4 s intervals. No assertion is about wall-clock time: the test waits for cycles to happen
(bounded), and compares what was stored with what the engines report directly.
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest

from collectors import collector_metrics as cm
from collectors.collector import Collector
from collectors.scrape import Scraper, Target
from collectors.store import Store
from tests.collectors.test_collector import cycles
from tests.collectors.test_scrape import faulty_app, serve_app
from tests.services import PrivatePostgres, free_port

INTERVAL_SECONDS = 0.4
MAX_BODY_BYTES = 1024 * 1024
#: Bounds on every wait (never asserted as durations; only a hang becomes a failure).
READY_SECONDS = 120
CYCLE_WAIT_SECONDS = 60
REQUEST_SUCCESS = re.compile(r"^vllm:request_success_total\{[^}]*\} (\S+)$", re.MULTILINE)


class Replica:
    """``tailwatch engine serve`` (tiny preset) as a subprocess on a fixed loopback port."""

    def __init__(self, port: int):
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.process: subprocess.Popen | None = None

    def start(self) -> None:
        command = [sys.executable, "-m", "tailwatch.cli", "engine", "serve", "--port"]
        command += [str(self.port), "--max-model-len", "256", "--num-gpu-blocks", "64"]
        command += ["--no-access-log", "--drain-timeout", "0"]
        env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(
            command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
        )

    async def wait_ready(self) -> None:
        async with httpx.AsyncClient(timeout=5, trust_env=False) as client:
            for _ in range(READY_SECONDS * 10):
                assert self.process is not None and self.process.poll() is None, "exited"
                try:
                    if (await client.get(f"{self.url}/ready")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.1)
        raise AssertionError(f"replica on port {self.port} not ready")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(timeout=30)


@pytest.fixture
def replicas() -> Iterator[list[Replica]]:
    started = [Replica(free_port()), Replica(free_port())]
    try:
        yield started
    finally:
        for replica in started:
            replica.kill()


async def finished_requests(client: httpx.AsyncClient, replica: Replica) -> float:
    """``vllm:request_success_total`` summed over finished reasons, read from the engine."""
    text = (await client.get(f"{replica.url}/metrics")).text
    return sum(float(value) for value in REQUEST_SUCCESS.findall(text))


async def send_requests(client: httpx.AsyncClient, replica: Replica, count: int) -> None:
    for index in range(count):
        response = await client.post(
            f"{replica.url}/v1/completions",
            json={"model": "tiny", "prompt": f"fault test {index}", "max_tokens": 2},
        )
        assert response.status_code == 200, response.text


async def bad_targets_app(scope, receive, send) -> None:
    """/garbage: 200 with HTML; /huge: a body twice the scraper's cap."""
    if scope["type"] != "http":
        return
    body = (
        b"# padding\n" * (2 * MAX_BODY_BYTES // 10)
        if scope["path"] == "/huge"
        else b"<html>metrics moved</html>\n"
    )
    headers = [
        (b"content-type", b"text/plain; version=0.0.4"),
        (b"content-length", b"%d" % len(body)),
    ]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def readings(store: Store, family: str, target: str) -> dict:
    """Each stored series' values, for failure messages."""
    series = store.samples(family, {"target": target}, 0, float("inf"))
    return {
        dict(labels).get("finished_reason"): [s.value for s in values]
        for labels, values in series.items()
    }


def test_a_replica_killed_and_restarted_mid_run_loses_nothing_of_the_others(replicas, tmp_path):
    healthy, victim = replicas
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    up_history: list[float | None] = []  # the victim's target_up after each cycle

    async def scenario(bad_url: str) -> dict[str, float]:
        for replica in replicas:
            replica.start()
        await asyncio.gather(*(replica.wait_ready() for replica in replicas))
        targets = [
            Target("healthy", healthy.url + "/metrics"),
            Target("victim", victim.url + "/metrics"),
            Target("garbage", bad_url + "/garbage"),
            Target("huge", bad_url + "/huge"),
        ]
        async with (
            Scraper(timeout_seconds=2, max_body_bytes=MAX_BODY_BYTES) as scraper,
            httpx.AsyncClient(timeout=30, trust_env=False) as client,
        ):
            collector = Collector(targets, store, scraper, interval_seconds=INTERVAL_SECONDS)
            stop = asyncio.Event()
            running = asyncio.create_task(collector.run(stop))

            def num_scrapes() -> dict[str, int]:
                return {s.target: s.num_scrapes for s in collector.target_statuses()}

            async def wait_cycles(count: int) -> None:
                """Until every target has been scraped ``count`` more times."""
                goal = {name: done + count for name, done in num_scrapes().items()}
                for _ in range(int(CYCLE_WAIT_SECONDS / 0.02)):
                    done = num_scrapes()
                    last = collector.registry.get_sample_value(cm.TARGET_UP, {"target": "victim"})
                    if done["victim"] > len(up_history):
                        up_history.append(last)
                    if all(done[name] >= goal[name] for name in goal):
                        return
                    await asyncio.sleep(0.02)
                raise AssertionError(f"collector stuck at {num_scrapes()} scrapes")

            try:
                # NOTE: each load phase ends a full cycle before the next event, so every
                # request finished before the kill is in a stored scrape.
                await wait_cycles(2)
                found = {
                    "healthy_start": await finished_requests(client, healthy),
                    "victim_start": await finished_requests(client, victim),
                }
                await asyncio.gather(
                    send_requests(client, healthy, 4), send_requests(client, victim, 4)
                )
                await wait_cycles(2)
                found["victim_before_kill"] = await finished_requests(client, victim)
                victim.kill()
                await send_requests(client, healthy, 2)
                await wait_cycles(3)  # the victim's scrapes are down
                victim.start()  # same port
                await victim.wait_ready()
                await wait_cycles(2)
                found["victim_after_restart"] = await finished_requests(client, victim)
                await asyncio.gather(
                    send_requests(client, healthy, 2), send_requests(client, victim, 2)
                )
                await wait_cycles(2)
                found["healthy_end"] = await finished_requests(client, healthy)
                found["victim_end"] = await finished_requests(client, victim)
            finally:
                stop.set()
                await asyncio.wait_for(running, timeout=CYCLE_WAIT_SECONDS)
            for _ in range(20):  # anything a failed last write left buffered
                if await collector.flush():
                    break
            found["scrapes"] = num_scrapes()
            found["buffered"] = collector.num_buffered
            metric = collector.registry.get_sample_value
            for name in ("healthy", "victim", "garbage", "huge"):
                found[f"errors_{name}"] = metric(cm.SCRAPE_ERRORS + "_total", {"target": name})
            found["victim_up_end"] = metric(cm.TARGET_UP, {"target": "victim"})
            return found

    with serve_app(bad_targets_app) as bad_url:
        found = asyncio.run(scenario(bad_url))

    assert found["buffered"] == 0
    # every scrape of every target stored, up or down
    scrapes = found["scrapes"]
    for name in ("healthy", "victim", "garbage", "huge"):
        assert len(store.scrapes(name)) == scrapes[name], name
    healthy_scrapes = store.scrapes("healthy")
    assert all(up for _, up, _ in healthy_scrapes), [e for _, up, e in healthy_scrapes if not up]
    assert found["errors_healthy"] == 0
    (running,) = store.samples("requests_running", {"target": "healthy"}, 0, 1e12).values()
    assert len(running) == scrapes["healthy"]  # one reading per scrape: none lost

    # the victim: up, then down with the connection error, then up again
    victim_scrapes = store.scrapes("victim")
    states = [up for _, up, _ in victim_scrapes]
    first_down, last_down = states.index(False), len(states) - 1 - states[::-1].index(False)
    assert all(states[:first_down]) and all(states[last_down + 1 :]) and first_down > 0
    assert not any(states[first_down : last_down + 1]), "one outage, not several"
    down_errors = {error for _, up, error in victim_scrapes if not up}
    assert all(error.startswith("connection failed") for error in down_errors), down_errors
    assert found["errors_victim"] == last_down - first_down + 1 >= 3
    assert 0 in up_history and found["victim_up_end"] == 1
    assert up_history.index(0) < len(up_history) - 1  # 0, then 1 again

    # malformed and oversized targets: every scrape down, with the reason
    assert all(
        error.startswith("unparseable Prometheus text exposition: invalid metric name")
        for _, _, error in store.scrapes("garbage")
    )
    assert all(
        error.startswith(f"body exceeds max_body_bytes={MAX_BODY_BYTES}")
        for _, _, error in store.scrapes("huge")
    )
    assert found["errors_garbage"] == scrapes["garbage"] and found["errors_huge"] == scrapes["huge"]

    # windows across the whole run: the restart's counter reset is corrected
    # NOTE: each target's own first and last scrape: each target has its own phase.
    start, end = healthy_scrapes[0][0], healthy_scrapes[-1][0]
    healthy_increase = found["healthy_end"] - found["healthy_start"]
    assert healthy_increase == 8
    assert store.counter_window("requests_total", {"target": "healthy"}, start, end) == 8
    window = store.histogram_window("e2e_seconds", {"target": "healthy"}, start, end)
    assert window.cumulative_counts[-1] == 8

    pre_kill = found["victim_before_kill"] - found["victim_start"]
    post_restart = found["victim_end"]  # counted from zero by the new process
    assert pre_kill == 4 and found["victim_end"] - found["victim_after_restart"] == 2
    assert post_restart < found["victim_before_kill"]  # else no reset could be seen
    expected = pre_kill + post_restart
    start, end = victim_scrapes[0][0], victim_scrapes[-1][0]
    got = store.counter_window("requests_total", {"target": "victim"}, start, end)
    assert got == expected, (found, readings(store, "requests_total", "victim"))
    window = store.histogram_window("e2e_seconds", {"target": "victim"}, start, end)
    assert window.cumulative_counts[-1] == expected


def test_a_database_down_for_a_few_cycles_loses_no_scrape(tmp_path):
    server = PrivatePostgres()
    try:
        server.start()
        store = Store(server.url)
        with serve_app(faulty_app) as base_url:
            targets = [
                Target("ok-1", base_url + "/ok"),
                Target("ok-2", base_url + "/ok"),
                Target("broken", base_url + "/error"),
            ]
            collector = Collector(targets, store, Scraper(), interval_seconds=5.0)
            buffered: list[float | None] = []
            gauge = collector.registry.get_sample_value

            def run(num_cycles: int) -> None:
                for _ in range(num_cycles):
                    cycles(collector, 1)
                    buffered.append(gauge(cm.BUFFERED_SCRAPES))

            run(2)
            server.stop()
            run(3)
            assert collector.num_buffered == 9
            server.start()
            for _ in range(5):  # the pool may need a cycle to drop its dead connections
                run(1)
                if collector.num_buffered == 0:
                    break
        num_cycles = collector.num_cycles
        timestamps = [1000.0 + 5 * k for k in range(num_cycles)]
        for name in ("ok-1", "ok-2"):
            assert [(t, up) for t, up, _ in store.scrapes(name)] == [(t, True) for t in timestamps]
            (readings,) = store.samples("requests_running", {"target": name}, 0, 5000).values()
            assert len(readings) == num_cycles
        assert [up for _, up, _ in store.scrapes("broken")] == [False] * num_cycles
        assert buffered[:2] == [0, 0] and buffered[2:5] == [3, 6, 9] and buffered[-1] == 0
        assert gauge(cm.WRITE_ERRORS + "_total") >= 3
        assert gauge(cm.DROPPED_SCRAPES + "_total", {"reason": cm.DROPPED_BUFFER_FULL}) == 0
        assert gauge(cm.SAMPLES_INGESTED + "_total", {"target": "ok-1"}) == num_cycles
        store.close()
    finally:
        server.remove()
