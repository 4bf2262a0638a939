"""Admission control: a bounded queue and per-tenant caps answer 429 with Retry-After."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import httpx
import openai
import pytest

from engine import metric_names as mn
from engine.server.launch import ServeOptions
from tests.engine.server.conftest import ADMIN_TOKEN, live_server, tiny_config

MAX_NUM_SEQS = 2
MAX_WAITING = 2
NUM_CLIENTS = 12
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def server():
    options = ServeOptions(
        admin_token=ADMIN_TOKEN, max_waiting_requests=MAX_WAITING, max_concurrency_per_tenant=1
    )
    with live_server(tiny_config(max_num_seqs=MAX_NUM_SEQS), options) as live:
        # Slow steps: a request holds its slot for MAX_TOKENS x 50 ms at least.
        response = live.admin("PATCH", "/admin/config", json={"step_delay_seconds": 0.05})
        assert response.status_code == 200
        yield live


def _stream(client: openai.OpenAI, prompt: str, **kwargs):
    return client.completions.create(
        model="tiny",
        prompt=prompt,
        max_tokens=MAX_TOKENS,
        stream=True,
        stream_options={"include_usage": True},
        extra_body={"ignore_eos": True},
        **kwargs,
    )


def test_overload_sheds_with_429_and_serves_every_admitted_request(server):
    rejected_name = mn.ADMISSION_REJECTIONS.name + "_total"
    success_name = mn.REQUEST_SUCCESS.name + "_total"
    rejected_before = server.value(rejected_name, reason="max_num_queued_reqs")
    success_before = server.value(success_name, finished_reason="length")
    start = threading.Barrier(NUM_CLIENTS)
    probing = threading.Event()
    probe_statuses: list[tuple[int, int]] = []

    def probe() -> None:
        with server.http() as http:
            while not probing.is_set():
                probe_statuses.append(
                    (http.get("/health").status_code, http.get("/ready").status_code)
                )
                probing.wait(0.05)

    def one(i: int):
        with server.client() as client:
            start.wait(timeout=30)
            try:
                return list(_stream(client, f"request {i}"))
            except openai.RateLimitError as error:
                return error

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        with ThreadPoolExecutor(NUM_CLIENTS) as pool:
            results = list(pool.map(one, range(NUM_CLIENTS)))
    finally:
        probing.set()
        prober.join(timeout=30)

    refused = [r for r in results if isinstance(r, openai.RateLimitError)]
    served = [r for r in results if not isinstance(r, openai.RateLimitError)]
    assert refused and served, f"{len(refused)} refused, {len(served)} served"
    for error in refused:
        assert error.status_code == 429 and error.code == "max_num_queued_reqs"
        assert int(error.response.headers["retry-after"]) >= 1
        assert f"max_waiting_requests={MAX_WAITING}" in error.message
    for chunks in served:
        assert chunks[-2].choices[0].finish_reason == "length"
        assert chunks[-1].usage.completion_tokens == MAX_TOKENS
    assert probe_statuses and set(probe_statuses) == {(200, 200)}
    assert server.value(rejected_name, reason="max_num_queued_reqs") - rejected_before == len(
        refused
    )
    assert server.value(success_name, finished_reason="length") - success_before == len(served)
    assert httpx.get(f"{server.base_url}/ready").status_code == 200


def test_a_tenant_over_its_concurrency_cap_gets_429_others_do_not(server):
    with server.client() as client:
        first = _stream(client, "long one", extra_headers={"X-Tenant": "acme"})
        chunks = iter(first)
        next(chunks)  # acme now has one request in flight
        with pytest.raises(openai.RateLimitError) as caught:
            list(_stream(client, "second", extra_headers={"X-Tenant": "acme"}))
        assert caught.value.code == "tenant_concurrency"
        assert "max_concurrency_per_tenant=1" in caught.value.message
        assert caught.value.response.headers["retry-after"].isdigit()
        other = list(_stream(client, "other", user="globex"))
        assert other[-1].usage.completion_tokens == MAX_TOKENS
        rest = list(chunks)
        assert rest[-1].usage.completion_tokens == MAX_TOKENS
        # the slot is free again once acme's request finished
        again = list(_stream(client, "again", extra_headers={"X-Tenant": "acme"}))
        assert again[-1].usage.completion_tokens == MAX_TOKENS
