"""The n-gram proposer against a plain-Python reading of vLLM's rule, and its config."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError
from engine.spec_decode.config import MAX_SPECULATIVE_TOKENS, SpeculativeConfig
from engine.spec_decode.ngram import propose_ngram
from engine.spec_decode.stats import SpecDecodingStats


def reference(tokens: list[int], min_n: int, max_n: int, k: int) -> list[int]:
    """vLLM's rule, read literally: the longest n in [min_n, max_n] whose suffix n-gram occurs
    earlier with a token after it; of its occurrences the earliest; up to k tokens after."""
    if k < 1:
        return []
    for n in range(max_n, min_n - 1, -1):
        if n > len(tokens) - 1:
            continue
        suffix = tokens[len(tokens) - n :]
        for start in range(len(tokens) - n):
            if tokens[start : start + n] == suffix:
                return tokens[start + n : start + n + k]
    return []


def test_vllm_docstring_example():
    # vLLM's NgramProposer.propose docstring: [1,2,3,4,2,3], min 2, max 3, k 4 -> [4,2,3]
    assert propose_ngram([1, 2, 3, 4, 2, 3], 2, 3, 4) == [4, 2, 3]


def test_the_longest_match_wins_and_the_earliest_of_it():
    tokens = [3, 8, 1, 3, 9, 9, 1, 3]
    assert propose_ngram(tokens, 1, 2, 2) == [9, 9]  # "1 3" at 2, not "3" at 0
    assert propose_ngram(tokens, 1, 1, 2) == [8, 1]  # "3": its earliest occurrence
    assert propose_ngram(tokens, 1, 2, 9) == [9, 9, 1, 3]  # fewer than k: the context ends
    assert propose_ngram([7, 7, 7, 7], 1, 2, 3) == [7, 7]  # overlaps its own suffix


def test_no_match_short_context_and_zero_k_propose_nothing():
    assert propose_ngram([1, 2, 3, 4], 1, 3, 4) == []
    assert propose_ngram([1], 1, 1, 4) == []
    assert propose_ngram([1, 1, 1], 1, 1, 0) == []


def test_large_ids_do_not_match_across_id_boundaries():
    # packed as 32-bit ints, 256 = 00 01 00 00 and 1 = 01 00 00 00: a byte-level search
    # without alignment would see "1" inside "256, 1"
    assert propose_ngram([256, 1, 5, 1], 1, 1, 2) == [5, 1]
    assert propose_ngram([70000, 3, 1, 70000], 1, 1, 2) == [3, 1]


@settings(max_examples=150, deadline=None)
@given(
    tokens=st.lists(st.integers(0, 3), min_size=0, max_size=40),
    min_n=st.integers(1, 4),
    extra=st.integers(0, 4),
    k=st.integers(0, 6),
)
def test_matches_the_reference(tokens, min_n, extra, k):
    assert propose_ngram(tokens, min_n, min_n + extra, k) == reference(
        tokens, min_n, min_n + extra, k
    )


# -- --speculative-config -----------------------------------------------------------------


def test_vllm_defaults_for_the_lookup_bounds():
    parse = SpeculativeConfig.parse
    assert parse('{"method": "ngram", "num_speculative_tokens": 3}') == SpeculativeConfig(3, 5, 5)
    both = parse({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 4})
    assert (both.prompt_lookup_min, both.prompt_lookup_max) == (4, 4)
    low = parse({"method": "[ngram]", "num_speculative_tokens": 2, "prompt_lookup_min": 2})
    assert (low.method, low.prompt_lookup_min, low.prompt_lookup_max) == ("ngram", 2, 2)
    assert parse({"model": "[ngram]", "num_speculative_tokens": 1}).method == "ngram"
    assert parse(None) is None and parse("") is None
    config = parse('{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_min":2}')
    assert parse(config.to_json()) == config


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("{not json", "not valid JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('{"method": "eagle", "num_speculative_tokens": 3}', "only 'ngram'"),
        ('{"num_speculative_tokens": 3}', "method is required"),
        ('{"method": "ngram"}', "num_speculative_tokens is required"),
        ('{"method": "ngram", "num_speculative_tokens": 0}', "must be a positive integer"),
        ('{"method": "ngram", "num_speculative_tokens": 3.5}', "must be a positive integer"),
        ('{"method": "ngram", "num_speculative_tokens": true}', "must be a positive integer"),
        (f'{{"method": "ngram", "num_speculative_tokens": {MAX_SPECULATIVE_TOKENS + 1}}}', "at most"),
        ('{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4, '
         '"prompt_lookup_max": 2}', "must be <= prompt_lookup_max=2"),
        ('{"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0}', "positive"),
        ('{"method": "ngram", "num_speculative_tokens": 2, "model": "llama-68m"}', "draft model"),
        ('{"method": "ngram", "num_speculative_tokens": 2, "draft_tensor_parallel_size": 1}',
         "unknown keys ['draft_tensor_parallel_size']"),
    ],
)  # fmt: skip
def test_bad_configs_name_the_key(value, message):
    with pytest.raises(ConfigError, match="speculative_config") as caught:
        SpeculativeConfig.parse(value)
    assert message in str(caught.value)


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=6,
)
_KEY_VALUES = st.one_of(
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([0, 1, 2, 64, 65, 2**31, 2**63, -1, True, None, 1.5, "3", [], {}]),
)


@settings(max_examples=100, deadline=None)
@given(
    extra=st.dictionaries(st.sampled_from(["method", "model", "x"]), _ANY_JSON, max_size=2),
    values=st.fixed_dictionaries(
        {},
        optional={
            "num_speculative_tokens": _KEY_VALUES,
            "prompt_lookup_min": _KEY_VALUES,
            "prompt_lookup_max": _KEY_VALUES,
        },
    ),
    as_text=st.booleans(),
)
def test_any_value_is_a_config_or_a_config_error(extra, values, as_text):
    raw = {"method": "ngram", **values, **extra}
    try:
        config = SpeculativeConfig.parse(json.dumps(raw) if as_text else raw)
    except ConfigError as error:
        assert str(error).startswith("speculative_config: ")
        return
    assert config is not None
    assert 1 <= config.num_speculative_tokens <= MAX_SPECULATIVE_TOKENS
    assert 1 <= config.prompt_lookup_min <= config.prompt_lookup_max


def test_stats_count_per_position_and_refuse_impossible_counts():
    stats = SpecDecodingStats.of(3, [(3, 2), (1, 1), (2, 0)])
    assert stats == SpecDecodingStats(3, 6, 3, (2, 1, 0))
    assert stats.acceptance_rate == 0.5
    with pytest.raises(ValueError, match="2 accepted of 1"):
        SpecDecodingStats.of(3, [(1, 2)])
