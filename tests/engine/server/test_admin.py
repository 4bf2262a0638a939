"""The admin API: bearer-token protected live knobs, applied between steps, recorded."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from engine import metric_names as mn
from engine.server.launch import ServeOptions
from tests.engine.server.conftest import ADMIN_TOKEN, live_server, tiny_config

NUM_CONCURRENT = 4


@pytest.fixture(scope="module")
def server():
    options = ServeOptions(admin_token=ADMIN_TOKEN)
    with live_server(tiny_config(max_num_seqs=NUM_CONCURRENT), options) as live:
        yield live


def _events(server) -> list[dict]:
    return server.admin("GET", "/admin/events").json()["events"]


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({}, 401),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, 401),
        ({"Authorization": "Bearer"}, 401),
        ({"Authorization": "Bearer wrong-token"}, 403),
        ({"Authorization": f"Bearer {ADMIN_TOKEN}x"}, 403),
    ],
)
def test_calls_without_the_token_change_nothing(server, headers, status):
    before, events_before = server.admin("GET", "/admin/config").json(), _events(server)
    with server.http(headers=headers) as http:
        patch = http.patch("/admin/config", json={"max_num_seqs": 1})
        malformed = http.patch("/admin/config", content=b"{not json")
        reads = [http.get(f"/admin/{path}") for path in ("config", "events")]
    for response in (patch, malformed, *reads):
        assert response.status_code == status, response.text
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}
    if status == 401:
        assert patch.headers["www-authenticate"] == "Bearer"
    assert server.admin("GET", "/admin/config").json() == before
    assert _events(server) == events_before


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"max_num_seqs": 0}, "max_num_seqs=0"),
        ({"max_num_seqs": 2, "enable_prefix_caching": "yes"}, "enable_prefix_caching='yes'"),
        ({"max_num_seqs": 2, "step_delay_seconds": -1}, "step_delay_seconds=-1"),
        ({"max_model_len": 64}, "max_model_len: cannot be changed while running"),
        ({"num_usable_gpu_blocks": 1000}, "num_usable_gpu_blocks=1000"),
    ],
)
def test_a_bad_value_is_400_naming_the_knob_and_nothing_changes(server, changes, named):
    before, events_before = server.admin("GET", "/admin/config").json(), _events(server)
    response = server.admin("PATCH", "/admin/config", json=changes)
    assert response.status_code == 400, response.text
    assert named in response.json()["error"]["message"]
    assert server.admin("GET", "/admin/config").json() == before
    assert _events(server) == events_before


def test_a_body_that_is_not_a_json_object_is_400(server):
    for content in (b"[1, 2]", b"{oops", b""):
        response = server.admin("PATCH", "/admin/config", content=content)
        assert response.status_code == 400, (content, response.text)


def _peak_running_under_load(server, num_requests: int) -> float:
    """Run ``num_requests`` concurrent requests; the highest num_requests_running seen."""
    done = threading.Event()
    peak = 0.0

    def watch() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, server.value(mn.NUM_REQUESTS_RUNNING.name))
            done.wait(0.01)

    def request(i: int) -> int:
        with server.client() as client:
            response = client.completions.create(
                model="tiny",
                prompt=f"load {i}",
                max_tokens=6,
                extra_body={"ignore_eos": True},
            )
            return response.usage.completion_tokens

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with ThreadPoolExecutor(num_requests) as pool:
            assert list(pool.map(request, range(num_requests))) == [6] * num_requests
    finally:
        done.set()
        watcher.join(timeout=30)
    return peak


def test_lowering_max_num_seqs_caps_running_requests_and_is_recorded(server):
    # Slow steps so that a scrape every 10 ms sees every batch.
    assert server.admin("PATCH", "/admin/config", json={"step_delay_seconds": 0.05}).is_success
    assert _peak_running_under_load(server, NUM_CONCURRENT) > 1
    started = time.time()
    response = server.admin("PATCH", "/admin/config", json={"max_num_seqs": 1})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["config"]["max_num_seqs"] == 1
    [change] = body["changes"]
    assert (change["knob"], change["old"], change["new"]) == ("max_num_seqs", NUM_CONCURRENT, 1)
    assert started - 1 <= change["time"] <= time.time() + 1
    assert _peak_running_under_load(server, NUM_CONCURRENT) == 1
    assert _events(server)[-1] == change
    assert server.admin("GET", "/admin/config").json()["max_num_seqs"] == 1
    restore = {"max_num_seqs": NUM_CONCURRENT, "step_delay_seconds": 0}
    assert server.admin("PATCH", "/admin/config", json=restore).is_success
    assert [e["knob"] for e in _events(server)[-2:]] == ["max_num_seqs", "step_delay_seconds"]
