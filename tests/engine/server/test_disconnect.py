"""A client that goes away has its request aborted within one engine step."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator

import httpx
import pytest

from engine import metric_names as mn
from engine.server.launch import ServeOptions
from tests.engine.server.conftest import (
    ADMIN_TOKEN,
    OutputRecorder,
    live_server,
    tiny_config,
    wait_until,
)

LONG = {"model": "tiny", "prompt": "Hello", "max_tokens": 200, "ignore_eos": True}
STEP_DELAY_SECONDS = 0.03


@pytest.fixture(scope="module")
def recorder():
    return OutputRecorder()


@pytest.fixture(scope="module")
def server(recorder):
    # One sequence at a time, so a second request waits in the queue.
    options = ServeOptions(admin_token=ADMIN_TOKEN)
    with live_server(tiny_config(max_num_seqs=1), options, extra_observers=[recorder]) as live:
        # A fixed delay per step makes "within one step" measurable on any machine.
        response = live.admin("PATCH", "/admin/config", json={"step_delay_seconds": 0.03})
        assert response.status_code == 200
        yield live


def _data_events(lines: Iterator[str], count: int) -> list[dict]:
    """The next ``count`` data events. ``lines`` must outlive this call: dropping an
    httpx line iterator part-way closes the connection."""
    events = []
    for line in lines:
        if line.startswith("data: {"):
            events.append(json.loads(line.removeprefix("data: ")))
            if len(events) == count:
                return events
    raise AssertionError(f"the stream ended after {len(events)} events")


def _finished(recorder: OutputRecorder, request_id: str):
    return next((out for _, out in recorder.of(request_id) if out.finished), None)


def _wait_idle(server) -> None:
    def idle() -> bool:
        running = server.value(mn.NUM_REQUESTS_RUNNING.name)
        waiting = server.value(mn.NUM_REQUESTS_WAITING.name)
        return running == 0 and waiting == 0

    wait_until(idle, timeout_seconds=10, what="no request running or waiting")
    assert server.value(mn.KV_CACHE_USAGE.name) == 0


def test_disconnect_mid_stream_aborts_within_a_step_and_frees_kv(server, recorder):
    aborted_before = server.value(mn.REQUEST_SUCCESS.name + "_total", finished_reason="abort")
    with (
        server.http() as http,
        http.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as response,
    ):
        lines = response.iter_lines()
        request_id = _data_events(lines, 3)[0]["id"]
        assert server.value(mn.KV_CACHE_USAGE.name) > 0
        assert _finished(recorder, request_id) is None
        closed_at = time.monotonic()
    # leaving the block closes the connection with the body unread
    final = wait_until(lambda: _finished(recorder, request_id), timeout_seconds=10, what="abort")
    assert final.finish_reason == "abort"
    assert final.num_output_tokens < LONG["max_tokens"]
    tokens_after_close = [
        out for t, out in recorder.of(request_id) if t > closed_at and out.new_token_ids
    ]
    # NOTE: the step already running when the disconnect lands may finish; no other.
    assert len(tokens_after_close) <= 1, tokens_after_close
    _wait_idle(server)
    after = server.value(mn.REQUEST_SUCCESS.name + "_total", finished_reason="abort")
    assert after == aborted_before + 1


def test_disconnect_while_queued_aborts_before_the_first_token(server, recorder):
    with (
        server.http() as http,
        http.stream("POST", "/v1/completions", json={**LONG, "stream": True}) as running,
    ):
        running_lines = running.iter_lines()
        running_id = _data_events(running_lines, 1)[0]["id"]
        queued_body = {**LONG, "max_tokens": 5, "stream": True}
        with http.stream("POST", "/v1/completions", json=queued_body) as queued:
            assert queued.status_code == 200  # admitted, waiting behind the first
            wait_until(
                lambda: server.value(mn.NUM_REQUESTS_WAITING.name) == 1,
                timeout_seconds=10,
                what="the second request to wait",
            )
            known = {out.request_id for _, out in list(recorder.outputs)}
        # the queued one's client is gone; the running one is still streaming
        wait_until(
            lambda: server.value(mn.NUM_REQUESTS_WAITING.name) == 0,
            timeout_seconds=10,
            what="the queued request to leave the queue",
        )
        assert _finished(recorder, running_id) is None
        new_ids = {out.request_id for _, out in list(recorder.outputs)} - known - {running_id}
        assert len(new_ids) == 1
        final = _finished(recorder, new_ids.pop())
        assert final.finish_reason == "abort" and final.num_output_tokens == 0
    _wait_idle(server)


def test_disconnect_before_a_non_streaming_response_aborts_it(server, recorder):
    known = {out.request_id for _, out in list(recorder.outputs)}
    timeout = httpx.Timeout(30, read=0.5)
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(f"{server.base_url}/v1/completions", json=LONG, timeout=timeout)

    def aborted():
        new = [out for _, out in list(recorder.outputs) if out.request_id not in known]
        return next((out for out in new if out.finished), None)

    final = wait_until(aborted, timeout_seconds=10, what="the abort")
    assert final.finish_reason == "abort"
    assert final.num_output_tokens < LONG["max_tokens"]
    _wait_idle(server)
