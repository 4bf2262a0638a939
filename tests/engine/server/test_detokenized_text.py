"""End to end: the text a client gets, streamed or not, is the tokenizer's full decode
of the ids the engine generated (seeded random sampling over a random-weight model, so
the ids are arbitrary bytes: split characters, invalid sequences, trailing lead bytes)."""

from __future__ import annotations

import json

import pytest

from engine.server.launch import ServeOptions
from tests.engine.server.conftest import OutputRecorder, live_server, tiny_config

SEEDS = range(8)


@pytest.fixture(scope="module")
def recorder():
    return OutputRecorder()


@pytest.fixture(scope="module")
def server(recorder):
    with live_server(tiny_config(), ServeOptions(), extra_observers=[recorder]) as live:
        yield live


def _body(seed: int, **fields) -> dict:
    return {"prompt": "Щ 뎫", "max_tokens": 24, "temperature": 1.0, "seed": seed, **fields}


def _decoded(server, recorder, request_id: str) -> str:
    ids = [t for _, out in recorder.of(request_id) for t in out.new_token_ids]
    assert ids, request_id
    return server.parts.async_engine.engine.tokenizer.decode(ids)


@pytest.mark.parametrize("seed", SEEDS)
def test_text_is_the_full_decode_of_the_generated_ids(server, recorder, seed):
    with server.http() as http:
        whole = http.post("/v1/completions", json=_body(seed)).json()
        assert whole["choices"][0]["text"] == _decoded(server, recorder, whole["id"])

        with http.stream("POST", "/v1/completions", json=_body(seed, stream=True)) as response:
            events = [line[6:] for line in response.iter_lines() if line.startswith("data: ")]
        chunks = [json.loads(e) for e in events[:-1]]
        streamed = "".join(c["choices"][0]["text"] for c in chunks)
        assert streamed == _decoded(server, recorder, chunks[0]["id"])
        assert streamed == whole["choices"][0]["text"]  # the same seed, the same text
