"""The OpenAI API against a live server, through the real ``openai`` client."""

from __future__ import annotations

import json
import statistics
import time

import httpx
import openai
import pytest

from engine import metric_names as mn
from engine.server.chat_template import render_chat_prompt
from engine.server.protocol import ChatMessage
from tests.engine.server.conftest import MAX_MODEL_LEN

# The tiny preset has random weights: ignore EOS so lengths are exact.
FIXED_LENGTH = {"ignore_eos": True}
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What is TTFT?"},
]


def _chat_prompt_tokens() -> int:
    text = render_chat_prompt([ChatMessage(**m) for m in MESSAGES])
    return len(text.encode()) + 1  # one token per byte, plus BOS


def test_chat_completion_reports_text_finish_reason_and_usage(client):
    response = client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=6, temperature=0, extra_body=FIXED_LENGTH
    )
    assert response.id.startswith("chatcmpl-") and response.object == "chat.completion"
    assert response.model == "tiny"
    choice = response.choices[0]
    assert choice.finish_reason == "length"
    assert choice.message.role == "assistant" and isinstance(choice.message.content, str)
    assert response.usage.prompt_tokens == _chat_prompt_tokens()
    assert response.usage.completion_tokens == 6
    assert response.usage.total_tokens == _chat_prompt_tokens() + 6


def test_chat_stream_matches_non_streaming_and_ends_with_usage(client):
    kwargs = dict(model="tiny", messages=MESSAGES, max_tokens=6, temperature=0)
    whole = client.chat.completions.create(**kwargs, extra_body=FIXED_LENGTH)
    chunks = list(
        client.chat.completions.create(
            **kwargs,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=FIXED_LENGTH,
        )
    )
    assert chunks[0].choices[0].delta.role == "assistant"
    assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == whole.choices[0].message.content
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 6
    assert all(c.usage is None for c in chunks[:-1])


def test_completion_non_streaming_and_streaming(client):
    kwargs = dict(model="tiny", prompt="Hello", max_tokens=5, temperature=0)
    whole = client.completions.create(**kwargs, extra_body=FIXED_LENGTH)
    assert whole.object == "text_completion" and whole.choices[0].finish_reason == "length"
    assert whole.usage.prompt_tokens == 6 and whole.usage.completion_tokens == 5
    chunks = list(client.completions.create(**kwargs, stream=True, extra_body=FIXED_LENGTH))
    assert "".join(c.choices[0].text for c in chunks) == whole.choices[0].text
    assert chunks[-1].choices[0].finish_reason == "length"
    assert all(c.usage is None for c in chunks)  # no include_usage, no usage chunk


def test_prompt_as_token_ids_and_max_completion_tokens(client):
    response = client.completions.create(
        model="tiny", prompt=[256, 72, 105], max_tokens=3, extra_body=FIXED_LENGTH
    )
    assert response.usage.prompt_tokens == 3 and response.usage.completion_tokens == 3
    response = client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        max_tokens=5,
        max_completion_tokens=2,
        extra_body=FIXED_LENGTH,
    )
    assert response.usage.completion_tokens == 2


def test_same_seed_and_temperature_give_the_same_text(client):
    def sample(seed: int) -> str:
        response = client.completions.create(
            model="tiny",
            prompt="Tell me a story",
            max_tokens=8,
            temperature=1.0,
            seed=seed,
            extra_body=FIXED_LENGTH,
        )
        return response.choices[0].text

    first = sample(seed=7)
    assert sample(seed=7) == first
    assert sample(seed=8) != first


def test_a_vanishing_temperature_is_greedy(client):
    # NOTE: dividing logits by 1e-30 overflows to NaN probabilities; vLLM treats any
    # temperature under 1e-5 as greedy, and so do we.
    kwargs = dict(model="tiny", prompt="Hello", max_tokens=4, extra_body=FIXED_LENGTH)
    greedy = client.completions.create(**kwargs, temperature=0).choices[0].text
    assert client.completions.create(**kwargs, temperature=1e-30).choices[0].text == greedy


def test_stop_string_ends_the_text_before_it(client):
    # The preset's greedy continuation of "a" is mostly invalid UTF-8 (U+FFFD) with a
    # few ASCII characters; stop at the first of those that is not at the very start.
    kwargs = dict(model="tiny", prompt="a", temperature=0, max_tokens=16)
    full = client.completions.create(**kwargs, extra_body=FIXED_LENGTH).choices[0].text
    stop = next((ch for ch in full[1:] if ch.isascii() and ch.isprintable()), None)
    assert stop is not None, f"no ASCII character to stop at in {full!r}"
    stopped = client.completions.create(**kwargs, stop=[stop], extra_body=FIXED_LENGTH)
    choice = stopped.choices[0]
    assert choice.finish_reason == "stop"
    assert choice.text == full[: full.index(stop)]
    streamed = client.completions.create(**kwargs, stop=stop, stream=True, extra_body=FIXED_LENGTH)
    assert "".join(c.choices[0].text for c in streamed) == choice.text


def test_models_lists_the_served_model(client):
    models = client.models.list().data
    assert [m.id for m in models] == ["tiny"]
    assert models[0].max_model_len == MAX_MODEL_LEN


BAD_REQUESTS = [
    # (route, body, param the error names or None, text in the message)
    ("completions", {"prompt": "x", "temperature": -1}, "temperature", "greater than"),
    ("completions", {"prompt": "x", "top_p": 0}, "top_p", "greater than 0"),
    ("completions", {"prompt": "x", "max_tokens": "many"}, "max_tokens", "integer"),
    ("completions", {"prompt": "x", "n": 2}, "n", "only one choice"),
    ("completions", {"prompt": ["a", "b"]}, "prompt", "batch of 2"),
    ("completions", {"prompt": "x", "seed": 2**64}, "seed", "less than"),
    ("completions", {"prompt": ""}, "prompt", "is empty"),
    ("completions", {"prompt": [72, -1]}, "prompt", "must be >= 0"),
    ("completions", {"prompt": "x", "stop": [""]}, "stop", "non-empty"),
    ("completions", {"prompt": [999999]}, None, "outside the vocabulary"),
    ("completions", {"prompt": "x", "stream_options": {}}, "stream_options", "stream is true"),
    ("completions", {}, "prompt", "required"),
    ("chat/completions", {"messages": []}, "messages", "at least 1"),
    ("chat/completions", {"messages": [{"role": "robot", "content": "x"}]}, None, "role"),
    (
        "chat/completions",
        {"messages": [{"role": "user", "content": [{"type": "image_url"}]}]},
        "messages[0].content",
        "only text parts",
    ),
]


@pytest.mark.parametrize(("route", "body", "param", "text"), BAD_REQUESTS)
def test_invalid_requests_are_400_naming_the_field(server, route, body, param, text):
    response = httpx.post(f"{server.base_url}/v1/{route}", json={"model": "tiny", **body})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert text in error["message"]
    if param is not None:
        assert error["param"] == param


def test_malformed_json_is_a_bad_request(server, client):
    response = httpx.post(
        f"{server.base_url}/v1/completions",
        content=b'{"model": "tiny", "prompt": ',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    assert "not valid JSON" in response.json()["error"]["message"]
    # Python's JSON parser accepts NaN and Infinity; they are no sampling values.
    for literal in (b"NaN", b"Infinity"):
        response = httpx.post(
            f"{server.base_url}/v1/completions",
            content=b'{"prompt": "x", "temperature": ' + literal + b"}",
            headers={"content-type": "application/json"},
        )
        assert response.status_code == 400
        assert response.json()["error"]["param"] == "temperature"
        assert "finite" in response.json()["error"]["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny", messages=MESSAGES, temperature=-0.5)
    assert caught.value.param == "temperature"


def test_prompt_plus_max_tokens_over_the_context_is_a_bad_request_naming_both(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny", prompt="Hello", max_tokens=MAX_MODEL_LEN)
    message = caught.value.message
    assert "prompt (6 tokens)" in message and f"max_tokens ({MAX_MODEL_LEN})" in message
    assert f"max_model_len={MAX_MODEL_LEN}" in message


def test_unknown_model_is_not_found(client):
    with pytest.raises(openai.NotFoundError) as caught:
        client.completions.create(model="gpt-9", prompt="Hi", max_tokens=1)
    assert caught.value.code == "model_not_found" and caught.value.param == "model"


def test_unknown_fields_are_ignored(server):
    body = {
        "model": "tiny",
        "prompt": "Hi",
        "max_tokens": 2,
        "some_future_field": {"nested": [1, 2]},
        "service_tier": "auto",
    }
    response = httpx.post(f"{server.base_url}/v1/completions", json=body, timeout=30)
    assert response.status_code == 200, response.text


def test_bad_priority_header_and_unknown_paths_are_openai_shaped(server):
    response = httpx.post(
        f"{server.base_url}/v1/completions",
        json={"prompt": "Hi", "max_tokens": 1},
        headers={"X-Priority": "high"},
    )
    assert response.status_code == 400
    assert response.json()["error"]["param"] == "x-priority"
    for method, path, status in (
        ("GET", "/v1/nothing", 404),
        ("GET", "/v1/completions", 405),
        ("GET", "/admin/config", 404),  # no admin token: the admin API is not there
    ):
        response = httpx.request(method, f"{server.base_url}{path}")
        assert response.status_code == status
        assert set(response.json()["error"]) == {"message", "type", "param", "code"}


def test_tenant_comes_from_the_header_first_then_from_user(server, client):
    def finished(tenant: str) -> float:
        return server.value(
            mn.TENANT_REQUESTS.name + "_total", tenant=tenant, finished_reason="length"
        )

    before = {t: finished(t) for t in ("acme", "alice", "bob")}
    kwargs = dict(model="tiny", prompt="Hi", max_tokens=2, extra_body=FIXED_LENGTH)
    client.completions.create(**kwargs, user="alice", extra_headers={"X-Tenant": "acme"})
    client.completions.create(**kwargs, user="bob")
    after = {t: finished(t) for t in ("acme", "alice", "bob")}
    assert {t: after[t] - before[t] for t in after} == {"acme": 1, "alice": 0, "bob": 1}


def test_probes_and_metrics(server):
    http = httpx.Client(base_url=server.base_url, timeout=30)
    assert http.get("/live").status_code == 200
    assert http.get("/ready").json() == {"status": "ready"}
    health = http.get("/health")
    assert health.status_code == 200 and health.content == b""
    plain = http.get("/metrics")
    assert plain.headers["content-type"].startswith("text/plain")
    assert mn.NUM_REQUESTS_RUNNING.name in plain.text
    open_metrics = http.get("/metrics", headers={"Accept": "application/openmetrics-text"})
    assert open_metrics.headers["content-type"].startswith("application/openmetrics-text")
    assert open_metrics.text.rstrip().endswith("# EOF")


def test_every_response_is_counted_by_status_code_and_route(server):
    name = mn.HTTP_RESPONSES.name + "_total"
    cases = (
        ("200", "/v1/models"),
        ("400", "/v1/completions"),
        ("404", "/v1/completions"),  # an unknown model: the route matched
        ("404", "none"),  # no route matched: the template, never the path
        ("200", "/metrics"),
    )

    def counts() -> dict[tuple[str, str], float]:
        samples = server.samples()  # one scrape, itself counted after it renders
        return {
            (code, handler): samples.get(
                (name, frozenset({"model_name": "tiny", "code": code, "handler": handler}.items())),
                0,
            )
            for code, handler in cases
        }

    before = counts()
    httpx.get(f"{server.base_url}/v1/models")
    httpx.post(f"{server.base_url}/v1/completions", json={"prompt": ""})
    httpx.post(f"{server.base_url}/v1/completions", json={"prompt": "x", "model": "nope"})
    httpx.get(f"{server.base_url}/nowhere")
    after = counts()
    assert {key: after[key] - before[key] for key in after} == {
        ("200", "/v1/models"): 1,
        ("400", "/v1/completions"): 1,
        ("404", "/v1/completions"): 1,
        ("404", "none"): 1,
        ("200", "/metrics"): 1,  # the first scrape, counted once it was sent
    }


def test_small_responses_are_not_held_back_by_nagle(server):
    # NOTE: with Nagle's algorithm on, a response written in two sends (headers, body)
    # waits ~40 ms for the client's delayed ACK; every SSE chunk would too.
    durations = []
    with server.http() as http:
        http.get("/live")
        for _ in range(15):
            started = time.perf_counter()
            http.get("/live")
            durations.append(time.perf_counter() - started)
    assert statistics.median(durations) < 0.02, durations


def test_sse_wire_format(server):
    body = {"model": "tiny", "prompt": "Hi", "max_tokens": 3, "stream": True, **FIXED_LENGTH}
    with httpx.stream("POST", f"{server.base_url}/v1/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        raw = response.read().decode()
    events = raw.split("\n\n")
    assert events[-1] == "" and events[-2] == "data: [DONE]"
    assert all(e.startswith("data: ") for e in events[:-1])
    payloads = [json.loads(e.removeprefix("data: ")) for e in events[:-2]]
    assert payloads[-1]["choices"][0]["finish_reason"] == "length"
