"""Every string field of every request body is safe: invalid Unicode (a lone surrogate)
is a 400 naming the field, never a 500, and /metrics answers 200 whatever came before."""

from __future__ import annotations

import json

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter

from engine.metrics import EngineMetrics

# Any code point, surrogates (category Cs) included.
TEXT = st.text(alphabet=st.characters(blacklist_categories=()), max_size=12)
SURROGATE_TEXT = st.builds(lambda a, s, b: a + s + b, TEXT, st.characters(categories=["Cs"]), TEXT)
ANY_TEXT = st.one_of(TEXT, SURROGATE_TEXT)
CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"


def _chat(**fields) -> dict:
    return {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 1, **fields}


def _completion(**fields) -> dict:
    return {"prompt": "hi", "max_tokens": 1, **fields}


# (route, the body with the fuzzed text in one field, the field an error must name)
FIELDS = {
    "chat content": (CHAT, lambda t: _chat(messages=[{"role": "user", "content": t}]),
                     "messages[0].content"),
    "chat content part": (CHAT, lambda t: _chat(messages=[
        {"role": "user", "content": [{"type": "text", "text": t}]}]), "messages[0].content"),
    "chat name": (CHAT, lambda t: _chat(messages=[{"role": "user", "content": "hi", "name": t}]),
                  "messages[0].name"),
    "chat stop": (CHAT, lambda t: _chat(stop=t), "stop"),
    "chat stop list": (CHAT, lambda t: _chat(stop=["x", t]), "stop"),
    "chat user": (CHAT, lambda t: _chat(user=t), "user"),
    "chat model": (CHAT, lambda t: _chat(model=t), "model"),
    "prompt": (COMPLETIONS, lambda t: _completion(prompt=t), "prompt"),
    "prompt batch of one": (COMPLETIONS, lambda t: _completion(prompt=[t]), "prompt"),
    "completion stop": (COMPLETIONS, lambda t: _completion(stop=[t]), "stop"),
    "completion user": (COMPLETIONS, lambda t: _completion(user=t), "user"),
    "completion model": (COMPLETIONS, lambda t: _completion(model=t), "model"),
}  # fmt: skip


def _post(http: httpx.Client, route: str, body: dict, **kwargs) -> httpx.Response:
    # json.dumps escapes a lone surrogate as \udXXX, as a client's JSON encoder does
    content = json.dumps(body).encode()
    headers = {"Content-Type": "application/json", **kwargs.pop("headers", {})}
    return http.post(route, content=content, headers=headers, **kwargs)


def _has_surrogate(text: str) -> bool:
    """Whether the server sees a lone surrogate: ``json.dumps`` writes every surrogate as
    ``\\udXXX``, and a JSON parser joins a high one followed by a low one into one valid
    code point (``"\\ud800\\udc00"`` is U+10000), so only the unpaired ones arrive."""
    seen = json.loads(json.dumps(text))
    return any(0xD800 <= ord(c) <= 0xDFFF for c in seen)


@pytest.mark.parametrize("field", list(FIELDS))
def test_every_string_field_is_served_or_refused_by_name(server, field):
    route, make_body, named = FIELDS[field]

    @settings(
        max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(text=ANY_TEXT)
    def check(text: str) -> None:
        with server.http() as http:
            response = _post(http, route, make_body(text))
            allowed = {200, 400, 404} if named == "model" else {200, 400}
            assert response.status_code in allowed, (text, response.text)
            if response.status_code != 200:
                error = response.json()["error"]
                assert error["param"] == named, (text, error)
            if _has_surrogate(text):
                assert response.status_code == 400, (text, response.text)
                assert "invalid Unicode" in response.json()["error"]["message"]
            assert http.get("/metrics").status_code == 200

    check()


@settings(max_examples=25, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(tenant=st.binary(min_size=1, max_size=12))
def test_any_tenant_header_bytes_keep_metrics_answering(server, tenant):
    # NOTE: header values arrive as latin-1 text; control bytes are refused by the client
    value = bytes(b for b in tenant if b >= 0x20 and b != 0x7F) or b"t"
    with server.http() as http:
        response = http.post(
            COMPLETIONS, json=_completion(), headers=[(b"X-Tenant", value.strip() or b"t")]
        )
        assert response.status_code == 200, response.text
        assert http.get("/metrics").status_code == 200


def test_a_utf8_tenant_header_is_read_as_utf8(server):
    with server.http() as http:
        headers = [(b"X-Tenant", "caf\u00e9-\u6771\u4eac".encode())]
        assert http.post(COMPLETIONS, json=_completion(), headers=headers).status_code == 200
        metrics = http.get("/metrics").text
    assert 'tenant="caf\u00e9-\u6771\u4eac"' in metrics


def test_head_metrics_answers_like_get_without_a_body(server):
    with server.http() as http:
        get, head = http.get("/metrics"), http.head("/metrics")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
        assert int(head.headers["content-length"]) > 0
        om = {"Accept": "application/openmetrics-text"}
        assert (
            http.head("/metrics", headers=om).headers["content-type"]
            == (http.get("/metrics", headers=om).headers["content-type"])
        )


def test_metrics_make_label_values_safe_where_they_are_set():
    metrics = EngineMetrics("m\udfff", {"max_num_seqs": 1})
    metrics.on_rejected("max_num_queued_reqs", "tenant-\ud800-" + "x" * 1000)
    body, _ = metrics.render(None)
    text = body.decode()
    assert 'model_name="m\ufffd"' in text
    assert "tenant-\ufffd-" in text and "x" * 1000 not in text


def test_a_label_value_that_slipped_through_still_renders():
    metrics = EngineMetrics("m", {"max_num_seqs": 1}, registry=CollectorRegistry())
    rogue = Counter("rogue", "set past the guards", ["who"], registry=metrics.registry)
    rogue.labels("\udfff").inc()
    for accept in (None, "application/openmetrics-text"):
        body, _ = metrics.render(accept)
        assert 'who="\ufffd"' in body.decode()
