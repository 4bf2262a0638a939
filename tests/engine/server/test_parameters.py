"""Sampling parameters through the live server: what is served, what is accepted only at
its default, what is rejected (a 400 naming the field), and logprobs in OpenAI's shapes."""

from __future__ import annotations

import httpx
import openai
import pytest

from engine.model.tokenizer import ByteTokenizer

MESSAGES = [{"role": "user", "content": "Count to three."}]
FIXED_LENGTH = {"ignore_eos": True}
EOS = ByteTokenizer.EOS_TOKEN_ID
CHAT, COMPLETIONS = "chat/completions", "completions"


def _post(server, route: str, **fields) -> httpx.Response:
    base = {"messages": MESSAGES} if route == CHAT else {"prompt": "Hi"}
    body = {"model": "tiny", "max_tokens": 2, **base, **fields}
    return httpx.post(f"{server.base_url}/v1/{route}", json=body, timeout=60)


# -- rejected unless at the default -------------------------------------------------------

REJECTED = [
    # (route, field, a value that turns the feature on)
    (CHAT, "tools", [{"type": "function", "function": {"name": "f", "parameters": {}}}]),
    (CHAT, "tool_choice", "auto"),
    (CHAT, "tool_choice", {"type": "function", "function": {"name": "f"}}),
    (CHAT, "functions", [{"name": "f", "parameters": {}}]),
    (CHAT, "function_call", "auto"),
    (CHAT, "audio", {"voice": "alloy", "format": "wav"}),
    (CHAT, "modalities", ["text", "audio"]),
    (CHAT, "web_search_options", {}),
    (CHAT, "verbosity", "low"),
    (CHAT, "echo", True),
    (CHAT, "add_generation_prompt", False),
    (CHAT, "continue_final_message", True),
    (CHAT, "chat_template", "{{ messages }}"),
    (CHAT, "chat_template_kwargs", {"enable_thinking": True}),
    (CHAT, "documents", [{"text": "x"}]),
    (COMPLETIONS, "best_of", 2),
    (COMPLETIONS, "best_of", True),
    (CHAT, "best_of", 3),
    (COMPLETIONS, "echo", True),
    (COMPLETIONS, "echo", 1),
    (COMPLETIONS, "suffix", "the end"),
    (COMPLETIONS, "use_beam_search", True),
    (CHAT, "prompt_logprobs", 1),
    (COMPLETIONS, "allowed_token_ids", [1, 2]),
    (COMPLETIONS, "bad_words", ["x"]),
    (COMPLETIONS, "logits_processors", ["x"]),
    (COMPLETIONS, "truncate_prompt_tokens", 4),
    (COMPLETIONS, "include_stop_str_in_output", True),
    (COMPLETIONS, "skip_special_tokens", False),
    (CHAT, "return_tokens_as_token_ids", True),
    (COMPLETIONS, "n", 2),
]


@pytest.mark.parametrize(("route", "field", "value"), REJECTED)
def test_a_feature_the_engine_lacks_is_a_400_naming_it(server, route, field, value):
    response = _post(server, route, **{field: value})
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["param"] == field and error["type"] == "invalid_request_error"
    assert error["message"].startswith(f"{field}: ")


ACCEPTED_DEFAULTS = [
    (CHAT, "tools", []),
    (CHAT, "tool_choice", "none"),
    (CHAT, "functions", []),
    (CHAT, "function_call", "none"),
    (CHAT, "response_format", {"type": "text"}),
    (COMPLETIONS, "response_format", {"type": "text"}),
    (CHAT, "modalities", ["text"]),
    (CHAT, "verbosity", "medium"),
    (CHAT, "reasoning_effort", "low"),  # no reasoning model is served: ignored
    (CHAT, "echo", False),
    (CHAT, "add_generation_prompt", True),
    (CHAT, "continue_final_message", False),
    (CHAT, "chat_template_kwargs", {}),
    (COMPLETIONS, "best_of", 1),
    (CHAT, "best_of", 1),
    (COMPLETIONS, "echo", False),
    (COMPLETIONS, "suffix", ""),
    (COMPLETIONS, "use_beam_search", False),
    (COMPLETIONS, "bad_words", []),
    (COMPLETIONS, "include_stop_str_in_output", False),
    (COMPLETIONS, "skip_special_tokens", True),
    (CHAT, "return_tokens_as_token_ids", False),
    (COMPLETIONS, "n", 1),
    (CHAT, "parallel_tool_calls", True),  # no effect without tools: ignored
    (CHAT, "store", False),
    (CHAT, "metadata", {"k": "v"}),
] + [(route, field, None) for route, field, _ in REJECTED if field != "n"]
# NOTE: structured outputs (response_format, structured_outputs, guided_*) are served now:
# tests/engine/server/test_structured_outputs.py; null is still accepted as off.
ACCEPTED_DEFAULTS += [
    (COMPLETIONS, field, None)
    for field in ("guided_json", "guided_regex", "guided_choice", "guided_grammar")
] + [(CHAT, "structured_outputs", None), (CHAT, "response_format", None)]


@pytest.mark.parametrize(("route", "field", "value"), ACCEPTED_DEFAULTS)
def test_the_value_that_means_off_is_accepted(server, route, field, value):
    response = _post(server, route, **{field: value})
    assert response.status_code == 200, response.text


def test_continuous_usage_stats_is_refused_naming_it(server):
    options = {"include_usage": True, "continuous_usage_stats": True}
    response = _post(server, CHAT, stream=True, stream_options=options)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == "stream_options.continuous_usage_stats"
    options["continuous_usage_stats"] = False
    assert _post(server, CHAT, stream=True, stream_options=options).status_code == 200


def test_sdk_defaults_through_the_openai_client(client):
    chat = client.chat.completions.create(
        model="tiny",
        messages=MESSAGES,
        max_tokens=2,
        n=1,
        tools=[],
        tool_choice="none",
        response_format={"type": "text"},
        logprobs=False,
        presence_penalty=0,
        frequency_penalty=0,
        logit_bias={},
    )
    assert chat.choices[0].logprobs is None
    text = client.completions.create(
        model="tiny", prompt="Hi", max_tokens=2, n=1, best_of=1, echo=False, suffix=None
    )
    assert text.choices[0].logprobs is None


@pytest.mark.parametrize(
    ("kwargs", "param"),
    [
        (dict(tools=[{"type": "function", "function": {"name": "f"}}]), "tools"),
        (dict(tool_choice="required"), "tool_choice"),
    ],
)
def test_rejections_reach_the_openai_client_with_the_param(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.chat.completions.create(model="tiny", messages=MESSAGES, max_tokens=2, **kwargs)
    assert caught.value.param == param


@pytest.mark.parametrize(
    ("kwargs", "param"), [(dict(best_of=2), "best_of"), (dict(echo=True), "echo"),
                          (dict(suffix="!"), "suffix")]
)  # fmt: skip
def test_completion_rejections_reach_the_openai_client(client, kwargs, param):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny", prompt="Hi", max_tokens=2, **kwargs)
    assert caught.value.param == param


# -- served parameters: ranges -------------------------------------------------------------

OUT_OF_RANGE = [
    (COMPLETIONS, {"presence_penalty": 2.5}, "presence_penalty"),
    (COMPLETIONS, {"frequency_penalty": -3}, "frequency_penalty"),
    (COMPLETIONS, {"repetition_penalty": 0}, "repetition_penalty"),
    (COMPLETIONS, {"min_p": 1.5}, "min_p"),
    (COMPLETIONS, {"min_tokens": -1}, "min_tokens"),
    (COMPLETIONS, {"min_tokens": 5, "max_tokens": 2}, "min_tokens"),
    (COMPLETIONS, {"logit_bias": {"abc": 1}}, "logit_bias"),
    (COMPLETIONS, {"logit_bias": {"5": 101}}, "logit_bias"),
    (COMPLETIONS, {"logit_bias": {"5": "x"}}, "logit_bias"),
    (COMPLETIONS, {"logit_bias": [1, 2]}, "logit_bias"),
    (COMPLETIONS, {"logit_bias": {"99999": 1}}, "logit_bias"),
    (COMPLETIONS, {"logprobs": 21}, "logprobs"),
    (COMPLETIONS, {"logprobs": -1}, "logprobs"),
    (CHAT, {"top_logprobs": 21, "logprobs": True}, "top_logprobs"),
    (CHAT, {"top_logprobs": 2}, "top_logprobs"),
    (CHAT, {"top_logprobs": 2, "logprobs": False}, "top_logprobs"),
]


@pytest.mark.parametrize(("route", "fields", "param"), OUT_OF_RANGE)
def test_an_out_of_range_sampling_value_is_a_400_naming_it(server, route, fields, param):
    response = _post(server, route, **fields)
    assert response.status_code == 400, response.text
    assert response.json()["error"]["param"] == param


def test_an_out_of_vocabulary_logit_bias_names_the_token_id(client):
    with pytest.raises(openai.BadRequestError) as caught:
        client.completions.create(model="tiny", prompt="Hi", max_tokens=2, logit_bias={"999": 5})
    assert caught.value.param == "logit_bias" and "token id 999" in caught.value.message


def test_a_vanishing_top_p_is_served_and_the_engine_keeps_serving(client):
    for top_p in (5e-324, 1e-300):  # the reproduction: this killed the engine loop
        out = client.completions.create(
            model="tiny", prompt="Hi", max_tokens=4, temperature=1, top_p=top_p,
            extra_body=FIXED_LENGTH,
        )  # fmt: skip
        assert out.usage.completion_tokens == 4
    after = client.completions.create(model="tiny", prompt="Hi", max_tokens=2)
    assert after.choices[0].finish_reason in ("length", "stop")


def test_logit_bias_steers_greedy_text(client):
    out = client.completions.create(
        model="tiny", prompt="Hi", max_tokens=5, temperature=0, logit_bias={str(ord("z")): 100},
        extra_body=FIXED_LENGTH,
    )  # fmt: skip
    assert out.choices[0].text == "zzzzz"


def test_min_tokens_holds_eos_back_until_reached(client):
    eos_first = {"logit_bias": {str(EOS): 100}}
    plain = client.completions.create(
        model="tiny", prompt="Hi", max_tokens=10, temperature=0, extra_body=eos_first
    )
    assert plain.usage.completion_tokens == 1 and plain.choices[0].finish_reason == "stop"
    held = client.completions.create(
        model="tiny", prompt="Hi", max_tokens=10, temperature=0,
        extra_body={**eos_first, "min_tokens": 4},
    )  # fmt: skip
    # four tokens that are not EOS, then EOS (counted, as vLLM counts it)
    assert held.usage.completion_tokens == 5 and held.choices[0].finish_reason == "stop"


# -- logprobs in OpenAI's shapes -----------------------------------------------------------


def test_chat_logprobs_shape_and_greedy_top_token(client):
    out = client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=6, temperature=0, logprobs=True,
        top_logprobs=3, extra_body=FIXED_LENGTH,
    )  # fmt: skip
    content = out.choices[0].logprobs.content
    assert len(content) == out.usage.completion_tokens == 6
    for entry in content:
        assert entry.bytes == list(entry.token.encode("utf-8"))
        assert entry.logprob <= 0 and len(entry.top_logprobs) == 3
        # greedy with no processors: the sampled token is the raw distribution's top
        assert entry.top_logprobs[0].token == entry.token
        assert entry.top_logprobs[0].logprob == entry.logprob
        values = [t.logprob for t in entry.top_logprobs]
        assert values == sorted(values, reverse=True)


def test_chat_logprobs_stream_the_same_as_the_whole_response(client):
    kwargs = dict(
        model="tiny", messages=MESSAGES, max_tokens=8, temperature=0, logprobs=True,
        top_logprobs=2, extra_body=FIXED_LENGTH,
    )  # fmt: skip
    whole = client.chat.completions.create(**kwargs).choices[0].logprobs.content
    chunks = list(client.chat.completions.create(**kwargs, stream=True))
    streamed = [e for c in chunks if c.choices and c.choices[0].logprobs for e in
                c.choices[0].logprobs.content]  # fmt: skip
    assert [e.model_dump() for e in streamed] == [e.model_dump() for e in whole]


def test_chat_without_top_logprobs_gives_the_sampled_token_only(client):
    out = client.chat.completions.create(
        model="tiny", messages=MESSAGES, max_tokens=3, logprobs=True, seed=4,
        extra_body=FIXED_LENGTH,
    )  # fmt: skip
    content = out.choices[0].logprobs.content
    assert len(content) == 3 and all(e.top_logprobs == [] for e in content)


def test_completion_logprobs_shape_offsets_and_stream(client):
    kwargs = dict(
        model="tiny", prompt="Hi", max_tokens=6, temperature=0, logprobs=2,
        extra_body=FIXED_LENGTH,
    )  # fmt: skip
    whole = client.completions.create(**kwargs).choices[0].logprobs
    assert len(whole.tokens) == len(whole.token_logprobs) == len(whole.top_logprobs) == 6
    offsets = [0]
    for token in whole.tokens[:-1]:
        offsets.append(offsets[-1] + len(token))
    assert whole.text_offset == offsets
    for token, logprob, top in zip(
        whole.tokens, whole.token_logprobs, whole.top_logprobs, strict=True
    ):
        # the sampled token and the top 2, keyed by text (one key when they coincide)
        assert top[token] == logprob and 1 <= len(top) <= 3
        assert max(top.values()) == logprob  # greedy: the sampled token is the top one
    chunks = list(client.completions.create(**kwargs, stream=True))
    parts = [c.choices[0].logprobs for c in chunks if c.choices and c.choices[0].logprobs]
    assert [t for p in parts for t in p.tokens] == whole.tokens
    assert [o for p in parts for o in p.text_offset] == whole.text_offset
    assert [t for p in parts for t in p.token_logprobs] == whole.token_logprobs
