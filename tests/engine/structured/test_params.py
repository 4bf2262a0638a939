"""``StructuredOutputsParams`` and the grammar cache: pure Python, no xgrammar."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError, RequestError
from engine.metric_names import STRUCTURED_OUTPUT_KINDS
from engine.structured.cache import GrammarCache
from engine.structured.params import (
    CONSTRAINTS,
    MAX_JSON_DEPTH,
    MAX_TEXT_CHARS,
    GrammarKey,
    StructuredOutputsParams,
)


def test_the_metric_kinds_are_the_constraints():
    assert STRUCTURED_OUTPUT_KINDS == CONSTRAINTS


def test_a_schema_is_keyed_by_its_canonical_text_in_its_own_order():
    a = StructuredOutputsParams(json={"type": "object", "properties": {"b": {}, "a": {}}})
    b = StructuredOutputsParams(json='{ "type" : "object", "properties": {"b": {}, "a": {}} }')
    assert (
        a.key == b.key == GrammarKey("json", '{"type":"object","properties":{"b":{},"a":{}}}', True)
    )
    assert StructuredOutputsParams(json=a.json, disable_any_whitespace=True).key != a.key
    assert StructuredOutputsParams(choice=("x", "y")).key == GrammarKey(
        "choice", '["x", "y"]', True
    )
    assert StructuredOutputsParams(json_object=True).kind == "json_object"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({}, "set exactly one of json, json_object, regex, choice, grammar (got none)"),
        ({"regex": "a", "choice": ("a",)}, "(got regex, choice)"),
        ({"json": "{not"}, "structured_outputs.json: not valid JSON"),
        ({"json": "[1]"}, "must be a JSON schema object, got list"),
        ({"json": True}, "true and false schemas are not served"),
        ({"json": {"x": float("nan")}}, "cannot be written as JSON"),
        ({"json_object": False}, "json_object: must be true when given"),
        ({"regex": ""}, "regex: must be a non-empty string"),
        ({"grammar": 3}, "grammar: must be a non-empty string"),
        ({"regex": "a" * (MAX_TEXT_CHARS + 1)}, f"at most {MAX_TEXT_CHARS}"),
        ({"choice": "ab"}, "choice: must be a list of strings"),
        ({"choice": ()}, "at least one string"),
        ({"choice": ("a", "")}, "every entry must be a non-empty string"),
        ({"choice": ("a",) * 2000}, "at most 1024"),
        ({"regex": "a", "disable_any_whitespace": "yes"}, "must be true or false"),
    ],
)
def test_bad_constraints_name_the_field(fields, message):
    with pytest.raises(RequestError) as caught:
        StructuredOutputsParams(**fields)
    assert message in str(caught.value) and str(caught.value).startswith("structured_outputs")


def test_deep_schemas_are_refused_before_any_compile():
    schema: dict = {"type": "integer"}
    for _ in range(MAX_JSON_DEPTH):
        schema = {"type": "array", "items": schema}
    with pytest.raises(RequestError, match=f"nests deeper than {MAX_JSON_DEPTH} levels"):
        StructuredOutputsParams(json=schema)
    with pytest.raises(RequestError, match="nests deeper"):
        StructuredOutputsParams(json="[" * 100_000 + "]" * 100_000)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(
    kind=st.sampled_from([*CONSTRAINTS, "disable_any_whitespace"]),
    value=_JSON | st.text(max_size=20) | st.lists(st.text(max_size=5), max_size=4).map(tuple),
    second=st.sampled_from([None, *CONSTRAINTS]),
)
def test_any_value_is_a_constraint_or_a_request_error(kind, value, second):
    fields = {kind: value}
    if second is not None and second != kind:
        fields[second] = "x"
    try:
        params = StructuredOutputsParams(**fields)
    except RequestError as error:
        assert str(error).startswith("structured_outputs")
        return
    key = params.key
    assert key.kind in CONSTRAINTS and isinstance(key.text, str)
    if key.kind == "json":
        assert isinstance(json.loads(key.text), dict)


def test_the_cache_counts_hits_and_misses_and_evicts_the_least_recent():
    compiled: list[GrammarKey] = []
    ticks = iter(range(100))

    def compile_(key: GrammarKey) -> str:
        compiled.append(key)
        if key.text == "bad":
            raise RequestError("structured_outputs.regex: bad")
        return f"grammar of {key.text}"

    cache = GrammarCache(compile_, max_size=2, clock=lambda: float(next(ticks)))
    a, b, c = (GrammarKey("regex", t, True) for t in "abc")
    first = cache.get(a)
    assert (first.grammar, first.cache_hit, first.compile_seconds) == ("grammar of a", False, 1.0)
    assert cache.get(a).cache_hit and cache.get(a).compile_seconds == 0.0
    cache.get(b)
    cache.get(a)  # a is now the most recent
    cache.get(c)  # evicts b
    assert a in cache and c in cache and b not in cache
    assert not cache.get(b).cache_hit
    with pytest.raises(RequestError):
        cache.get(GrammarKey("regex", "bad", True))
    stats = cache.stats()
    assert (stats.num_hits, stats.num_misses, stats.num_cached) == (3, 5, 2)
    assert compiled == [a, b, c, b, GrammarKey("regex", "bad", True)]
    with pytest.raises(ConfigError, match="max_size=0"):
        GrammarCache(compile_, max_size=0)
