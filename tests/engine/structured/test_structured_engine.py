"""Structured outputs in the torch engine (tiny preset, xgrammar): outputs that finish with
stop match their constraint, only structured rows are masked, truncation is ``length``,
compiles are cached and counted, spans and metrics show them."""

from __future__ import annotations

import json
import re

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from engine import metric_names as mn
from engine.config import EngineConfig
from engine.errors import RequestError
from engine.llm_engine import LLMEngine
from engine.metrics import EngineMetrics
from engine.model.tokenizer import HFTokenizer
from engine.sampling_params import SamplingParams
from engine.structured import grammar
from engine.structured.params import StructuredOutputsParams
from engine.tracing import EVENT_GRAMMAR_COMPILE, finished_span
from tests.engine.conftest import run_to_completion
from tests.engine.model.checkpoint import byte_level_tokenizer

SEEN = {"stop": 0, "length": 0}


@pytest.fixture(scope="module")
def engine() -> LLMEngine:
    return LLMEngine(EngineConfig(model="tiny", max_model_len=128, num_gpu_blocks=64))


def _generate(engine: LLMEngine, prompt: str, params: list[SamplingParams]):
    ids = [engine.add_request(prompt, p) for p in params]
    outputs = run_to_completion(engine)
    return [
        (
            "".join(o.new_text for o in outputs[i]),
            outputs[i][-1].finish_reason,
            [t for o in outputs[i] for t in o.new_token_ids],
            outputs[i][-1].timings,
        )
        for i in ids
    ]


_SCALARS = st.sampled_from(
    [
        {"type": "boolean"},
        {"type": "null"},
        {"type": "integer", "minimum": -5, "maximum": 40},
        {"type": "integer", "minimum": 0},
        {"type": "number", "minimum": 0, "maximum": 1},
        {"type": "string", "maxLength": 4},
        {"type": "string", "minLength": 1, "maxLength": 2},
        {"enum": ["red", "green", 3, None]},
        {"const": "ok"},
    ]
)


def _schemas():
    return st.recursive(
        _SCALARS,
        lambda inner: st.one_of(
            st.builds(
                lambda s, n: {"type": "array", "items": s, "maxItems": n}, inner, st.integers(0, 2)
            ),
            st.dictionaries(
                st.sampled_from(["a", "b", "c"]), inner, min_size=1, max_size=2
            ).flatmap(
                lambda props: st.builds(
                    lambda req: {"type": "object", "properties": props, "required": req},
                    st.lists(st.sampled_from(sorted(props)), unique=True),
                )
            ),
        ),
        max_leaves=3,
    )


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(schema=_schemas(), whitespace=st.booleans())
def test_every_output_that_stops_matches_its_schema(engine, schema, whitespace):
    constraint = StructuredOutputsParams(json=schema, disable_any_whitespace=not whitespace)
    params = [
        SamplingParams(max_tokens=40, temperature=t, seed=seed, structured_outputs=constraint)
        for seed, t in enumerate((0.7, 1.0, 1.3))
    ]
    for text, reason, _, _ in _generate(engine, "JSON: ", params):
        SEEN[reason] += 1
        if reason == "stop":
            # NOTE: strict=False: xgrammar 0.2.9's grammar for a string with minLength or
            # maxLength admits raw control characters (docs/engine.md, "Structured outputs")
            jsonschema.validate(json.loads(text, strict=False), schema)


def test_the_property_above_saw_outputs_stop():
    assert SEEN["stop"] >= 10, SEEN


@pytest.mark.parametrize(
    ("constraint", "check"),
    [
        (StructuredOutputsParams(regex=r"\d{2,3}-[a-c]+"), lambda t: re.fullmatch(r"\d{2,3}-[a-c]+", t)),
        (StructuredOutputsParams(choice=("yes", "no", 'say "hi"\n')), lambda t: t in ("yes", "no", 'say "hi"\n')),
        (StructuredOutputsParams(grammar='root ::= "(" root ")" | "x"'), lambda t: re.fullmatch(r"(\()*x(\))*", t)),
        (StructuredOutputsParams(json_object=True), lambda t: isinstance(json.loads(t, strict=False), dict)),
    ],
)  # fmt: skip
def test_regex_choice_grammar_and_json_object(engine, constraint, check):
    params = [
        SamplingParams(max_tokens=60, temperature=0.5, seed=s, structured_outputs=constraint)
        for s in range(3)
    ]
    results = _generate(engine, "Answer: ", params)
    stopped = [text for text, reason, _, _ in results if reason == "stop"]
    assert stopped, results
    assert all(check(text) for text in stopped), stopped


def test_only_structured_rows_are_masked_and_max_tokens_truncates(engine):
    plain = SamplingParams(max_tokens=12, temperature=0.0)
    (alone,) = _generate(engine, "hello", [plain])
    constraint = StructuredOutputsParams(json={"type": "array", "items": {"type": "integer"}})
    mixed = _generate(
        engine,
        "hello",
        [plain, SamplingParams(max_tokens=3, temperature=0.0, structured_outputs=constraint)],
    )
    assert mixed[0][:3] == alone[:3]  # the unstructured request is untouched by the mask
    text, reason, tokens, _ = mixed[1]
    assert reason == "length" and len(tokens) == 3 and text.startswith("[")
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # truncated: usually invalid JSON, as vLLM's


def test_the_grammar_wins_over_ignore_eos_and_stop_ends_it(engine):
    constraint = StructuredOutputsParams(choice=("done",))
    ((text, reason, tokens, _),) = _generate(
        engine, "x", [SamplingParams(max_tokens=30, ignore_eos=True, structured_outputs=constraint)]
    )
    assert (text, reason) == ("done", "stop") and tokens[-1] == engine.tokenizer.eos_token_ids[0]


def test_compiles_are_cached_counted_traced_and_measured():
    engine = LLMEngine(EngineConfig(model="tiny", max_model_len=64, num_gpu_blocks=16))
    metrics = EngineMetrics("tiny", engine.knobs())
    constraint = StructuredOutputsParams(regex="[ab]{3}")
    before = engine.grammar_cache_stats()
    params = SamplingParams(max_tokens=8, structured_outputs=constraint)
    ids = [engine.add_request("p", params) for _ in range(3)]
    outputs: dict[str, list] = {}
    while engine.has_unfinished_requests():
        out = engine.step()
        metrics.on_step(engine, out, {})
        for o in out:
            outputs.setdefault(o.request_id, []).append(o)
    after = engine.grammar_cache_stats()
    assert (after.num_misses - before.num_misses, after.num_hits - before.num_hits) == (1, 2)
    timings = [outputs[i][-1].timings for i in ids]
    assert [t.grammar_compile.cache_hit for t in timings] == [False, True, True]
    assert timings[0].grammar_compile.compile_seconds > 0
    assert timings[1].grammar_compile.compile_seconds == 0
    span = finished_span("tiny", outputs[ids[0]][-1], timings[0])
    (event,) = [e for e in span.events if e[0] == EVENT_GRAMMAR_COMPILE]
    assert (
        event[1]["tailwatch.grammar.cache_hit"] is False
        and event[1]["tailwatch.grammar.kind"] == "regex"
    )
    body, _ = metrics.render(None)
    samples = {
        (s.name, s.labels.get("kind")): s.value
        for f in text_string_to_metric_families(body.decode())
        for s in f.samples
    }
    assert samples[(mn.STRUCTURED_OUTPUT_CACHE_MISSES.name + "_total", None)] == 1
    assert samples[(mn.STRUCTURED_OUTPUT_CACHE_HITS.name + "_total", None)] == 2
    assert samples[(mn.STRUCTURED_OUTPUT_COMPILE_SECONDS.name + "_count", None)] == 1
    assert samples[(mn.STRUCTURED_OUTPUT_REQUESTS.name + "_total", "regex")] == 3


@pytest.mark.parametrize(
    ("constraint", "message"),
    [
        (StructuredOutputsParams(regex="(ab"), "structured_outputs.regex: Regex parsing error"),
        (StructuredOutputsParams(json={"type": "nonsense"}), 'Unsupported type "nonsense"'),
        (
            StructuredOutputsParams(grammar="root ::= "),
            "structured_outputs.grammar: EBNF parser error",
        ),
    ],
)
def test_a_constraint_that_does_not_parse_is_refused_and_queues_nothing(
    engine, constraint, message
):
    params = SamplingParams(max_tokens=4, structured_outputs=constraint)
    with pytest.raises(RequestError) as caught:
        engine.add_request("p", params)
    assert message in str(caught.value) and "/project/" not in str(caught.value)
    assert not engine.has_unfinished_requests() and engine.structured_outputs.num_requests == 0


def test_a_tokenizer_json_vocabulary_masks_as_the_byte_one(tmp_path):
    path = tmp_path / "tokenizer.json"
    byte_level_tokenizer().save(str(path))
    hf = HFTokenizer.from_file(path, 256, (257,))
    info = grammar.tokenizer_info(hf, 258)
    assert info.vocab_size == 258 and info.stop_token_ids == [257]
    compiler = grammar.GrammarCompiler(hf, 258)
    import xgrammar

    matcher = xgrammar.GrammarMatcher(
        compiler.compile(StructuredOutputsParams(regex="[0-9]+!").key)
    )
    for token in hf.encode("42!", add_bos=False):
        assert matcher.accept_token(token)
    assert matcher.accept_token(257) and matcher.is_terminated()
