"""Structured outputs and speculative decoding through the server and the real ``openai``
client: one server that speculates (``--speculative-config`` at its start) and serves
``response_format``, vLLM's ``structured_outputs`` and ``guided_*``; their metrics on
``/metrics``; every malformed or conflicting constraint a 400 naming its field."""

from __future__ import annotations

import json

import httpx
import jsonschema
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from engine import metric_names as mn
from engine.server.launch import ServeOptions
from tailwatch.cli import app
from tests.engine.server.conftest import live_server, tiny_config

SPEC = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3, "prompt_lookup_min": 1}'
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "n": {"type": "integer", "minimum": 0, "maximum": 9}},
    "required": ["ok", "n"],
}
MESSAGES = [{"role": "user", "content": "JSON please"}]


@pytest.fixture(scope="module")
def server():
    with live_server(tiny_config(speculative_config=SPEC), ServeOptions()) as live:
        yield live


def _post(server, route: str, **fields) -> httpx.Response:
    base = {"messages": MESSAGES} if route == "chat/completions" else {"prompt": "Hi"}
    body = {"max_tokens": 4, **base, **fields}
    return httpx.post(f"{server.base_url}/v1/{route}", json=body, timeout=60)


def test_a_json_schema_response_format_through_the_openai_client(server, client):
    replies = [
        client.chat.completions.create(
            model="tiny",
            messages=MESSAGES,
            max_tokens=64,
            temperature=0.7,
            seed=seed,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "answer", "schema": SCHEMA, "strict": True},
            },
        )
        for seed in range(3)
    ]
    stopped = [
        r.choices[0].message.content for r in replies if r.choices[0].finish_reason == "stop"
    ]
    assert stopped, [r.choices[0] for r in replies]
    for text in stopped:
        jsonschema.validate(json.loads(text), SCHEMA)
    truncated = client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=2, response_format={"type": "json_object"}
    )
    assert truncated.choices[0].finish_reason == "length"
    assert truncated.choices[0].message.content.startswith("{")


def test_vllm_fields_and_a_stream(server, client):
    regex = client.completions.create(
        model="tiny", prompt="Code:", max_tokens=12, temperature=0.5, seed=1,
        extra_body={"structured_outputs": {"regex": "[A-Z]{2}[0-9]{3}"}},
    )  # fmt: skip
    assert regex.choices[0].text[:2].isupper() and regex.choices[0].finish_reason == "stop"
    choice = client.completions.create(
        model="tiny", prompt="?", max_tokens=8, extra_body={"guided_choice": ["left", "right"]}
    )
    assert choice.choices[0].text in ("left", "right")
    chunks = client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=64, temperature=0.7, seed=0, stream=True,
        response_format={"type": "json_schema", "json_schema": {"name": "a", "schema": SCHEMA}},
    )  # fmt: skip
    pieces, reasons = [], []
    for chunk in chunks:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            reasons.append(chunk.choices[0].finish_reason)
    if reasons[-1] == "stop":
        jsonschema.validate(json.loads("".join(pieces)), SCHEMA)


def test_speculation_and_grammars_show_on_metrics(server, client):
    before = server.value(mn.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name + "_total")
    client.completions.create(
        model="tiny", prompt="abcabcabcabcabcabcabcabc", max_tokens=24, temperature=0.0
    )
    assert server.value(mn.SPEC_DECODE_NUM_ACCEPTED_TOKENS.name + "_total") > before
    drafts = server.value(mn.SPEC_DECODE_NUM_DRAFTS.name + "_total")
    tokens = server.value(mn.SPEC_DECODE_NUM_DRAFT_TOKENS.name + "_total")
    assert 0 < drafts <= tokens <= 3 * drafts
    per_pos = [
        server.value(mn.SPEC_DECODE_NUM_ACCEPTED_TOKENS_PER_POS.name + "_total", position=str(i))
        for i in range(3)
    ]
    assert per_pos == sorted(per_pos, reverse=True) and per_pos[0] > 0
    regex = {"structured_outputs": {"regex": "[xy]{4}"}}
    for _ in range(2):
        assert _post(server, "completions", **regex, max_tokens=8).status_code == 200
    assert server.value(mn.STRUCTURED_OUTPUT_CACHE_MISSES.name + "_total") >= 1
    assert server.value(mn.STRUCTURED_OUTPUT_CACHE_HITS.name + "_total") >= 1
    assert server.value(mn.STRUCTURED_OUTPUT_COMPILE_SECONDS.name + "_count") >= 1
    assert server.value(mn.STRUCTURED_OUTPUT_REQUESTS.name + "_total", kind="regex") >= 2


BAD = [
    # (route, fields, param)
    ("chat/completions", {"response_format": {"type": "json_schema"}}, "response_format.json_schema"),
    ("chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"name": "x"}}},
     "response_format.json_schema.schema"),
    ("chat/completions", {"response_format": {"type": "json_schema", "json_schema": {"schema": {}}}},
     "response_format.json_schema.name"),
    ("chat/completions", {"response_format": {"type": "xml"}}, "response_format"),
    ("chat/completions", {"response_format": {"type": "structural_tag", "format": {}}}, "response_format"),
    ("chat/completions", {"response_format": "json"}, "response_format"),
    ("completions", {"response_format": {"type": "json_schema", "json_schema": {
        "name": "x", "schema": {"type": "nonsense"}}}}, "response_format"),
    ("completions", {"guided_json": {"type": "object"}, "guided_regex": "a+"}, "guided_regex"),
    ("completions", {"guided_json": "{oops"}, "guided_json"),
    ("completions", {"guided_regex": "(a"}, "guided_regex"),
    ("completions", {"guided_choice": "a"}, "guided_choice"),
    ("completions", {"guided_grammar": "root ::= "}, "guided_grammar"),
    ("completions", {"structured_outputs": {"json": {}, "regex": "a"}}, "structured_outputs"),
    ("completions", {"structured_outputs": {"whitespace_pattern": " "}},
     "structured_outputs.whitespace_pattern"),
    ("completions", {"structured_outputs": {"regex": "a", "backend": "outlines"}}, "structured_outputs"),
    ("chat/completions", {"response_format": {"type": "json_object"}, "guided_regex": "a"}, "guided_regex"),
    ("chat/completions", {"structured_outputs": {"regex": "a"}, "response_format": {"type": "json_object"}},
     "structured_outputs"),
]  # fmt: skip


@pytest.mark.parametrize(("route", "fields", "param"), BAD)
def test_malformed_and_conflicting_constraints_are_400s_naming_the_field(
    server, route, fields, param
):
    response = _post(server, route, **fields)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    # NOTE: a conflict names both fields ("guided_json, guided_regex: ..."), param the second
    assert error["param"] == param and param in error["message"].split(": ", 1)[0], error


def test_the_openai_client_raises_bad_request_with_the_param(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(
            model="tiny", messages=MESSAGES, max_tokens=2,
            response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": 3}}},
        )  # fmt: skip
    assert caught.value.param == "response_format"


_JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)  # fmt: skip
_CONSTRAINT_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "response_format": _JSONISH
        | st.builds(lambda t, s: {"type": t, "json_schema": {"name": "n", "schema": s}},
                    st.sampled_from(["json_schema", "json_object", "text"]), _JSONISH),
        "structured_outputs": _JSONISH
        | st.dictionaries(st.sampled_from(["json", "regex", "choice", "grammar", "json_object",
                                           "disable_any_whitespace"]), _JSONISH, max_size=2),
        "guided_json": _JSONISH,
        "guided_regex": _JSONISH | st.text(alphabet="ab()[]{}*+?|^$\\.0-9", max_size=12),
        "guided_choice": _JSONISH,
        "guided_grammar": _JSONISH,
    },
)  # fmt: skip


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(route=st.sampled_from(["completions", "chat/completions"]), fields=_CONSTRAINT_FIELDS)
def test_any_constraint_fields_are_served_or_a_400_never_a_500(server, route, fields):
    response = _post(server, route, **fields, max_tokens=3)
    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        error = response.json()["error"]
        assert error["param"] and error["param"] in error["message"].split(": ", 1)[0], error


def test_the_cli_flag_refuses_a_bad_speculative_config_in_one_line():
    result = CliRunner().invoke(
        app, ["engine", "generate", "-p", "x", "--speculative-config", '{"method": "medusa"}']
    )
    assert result.exit_code == 2 and "speculative_config: method='medusa'" in result.output
    assert "Traceback" not in result.output
