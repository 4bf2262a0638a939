"""X-Priority (or the body's ``priority``) orders the waiting queue under the priority policy."""

from __future__ import annotations

import threading
import time
from functools import partial

import pytest

from engine import metric_names as mn
from engine.server.launch import ServeOptions
from tests.engine.server.conftest import ADMIN_TOKEN, live_server, tiny_config, wait_until


@pytest.fixture(scope="module")
def server():
    config = tiny_config(max_num_seqs=1, scheduling_policy="priority")
    with live_server(config, ServeOptions(admin_token=ADMIN_TOKEN)) as live:
        assert live.admin("PATCH", "/admin/config", json={"step_delay_seconds": 0.02}).is_success
        yield live


def test_waiting_requests_are_served_by_priority_header_first(server):
    finished_at: dict[str, float] = {}

    def send(name: str, headers: dict[str, str], body: dict) -> threading.Thread:
        def run() -> None:
            with server.client() as client:
                client.completions.create(
                    model="tiny",
                    prompt=name,
                    max_tokens=2,
                    extra_headers=headers,
                    extra_body={"ignore_eos": True, **body},
                )
            finished_at[name] = time.monotonic()

        thread = threading.Thread(target=run)
        thread.start()
        return thread

    def num_waiting(n: int) -> bool:
        return server.value(mn.NUM_REQUESTS_WAITING.name) == n

    with server.client() as client:
        running = client.completions.create(
            model="tiny", prompt="hold the slot", max_tokens=30, stream=True,
            extra_body={"ignore_eos": True},
        )  # fmt: skip
        chunks = iter(running)
        next(chunks)  # it runs; everything after it waits
        threads = []
        for name, headers, body in (
            ("low", {"X-Priority": "5"}, {}),
            ("high", {"X-Priority": "1"}, {"priority": 9}),  # the header wins
            ("middle", {}, {"priority": 3}),
        ):
            threads.append(send(name, headers, body))
            wait_until(partial(num_waiting, len(threads)), timeout_seconds=10, what=name)
        list(chunks)
    for thread in threads:
        thread.join(timeout=30)
    assert sorted(finished_at, key=finished_at.__getitem__) == ["high", "middle", "low"]
