"""Speculative decoding and structured outputs in the simulator, and in the virtual fleet:
acceptance at a rate a patch changes, steps priced for every verified token (a speedup at a
small batch, a slowdown at a large one), compiles that cost time on a miss only, truncation
at a share, the same metrics; and the new canonical families in the store, which the rules
know."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts.rules import check_rules
from alerts.rules.types import MetricAbsentRule, RuleError
from collectors import canonical as c
from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.live_knobs import apply_knob_changes, knobs_in_force
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.sim.features import SIM_FEATURE_KNOBS
from engine.sim.runner import VirtualClock
from engine.structured.params import StructuredOutputsParams
from loadgen.errors import WorkloadError
from loadgen.virtual.collect import VirtualCollector, VirtualStore
from loadgen.workload import build_schedule, parse_workload
from tests.engine.conftest import run_to_completion
from tests.loadgen.test_virtual_fleet import _fleet

SIM = "sim:llama-3.1-8b@h100"
SPEC = '{"method": "ngram", "num_speculative_tokens": 4}'
NEW_FAMILIES = (
    c.SPEC_DECODE_DRAFTS_TOTAL,
    c.SPEC_DECODE_DRAFT_TOKENS_TOTAL,
    c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL,
    c.SPEC_DECODE_ACCEPTED_TOKENS_PER_POS_TOTAL,
    c.STRUCTURED_OUTPUT_REQUESTS_TOTAL,
    c.STRUCTURED_OUTPUT_CACHE_HITS_TOTAL,
    c.STRUCTURED_OUTPUT_CACHE_MISSES_TOTAL,
    c.STRUCTURED_OUTPUT_COMPILE_SECONDS,
    c.STRUCTURED_OUTPUT_FINISHED_TOTAL,
)


class _Faults:
    step_delay_seconds = 0.0
    prefill_seconds_per_token = 0.0


class _Admission:
    max_waiting_requests = None
    max_concurrency_per_tenant = None


def _engine(spec: str | None = SPEC, **knobs) -> tuple[LLMEngine, VirtualClock]:
    clock = VirtualClock()
    config = EngineConfig(model=SIM, speculative_config=spec, max_num_seqs=256,
                          max_num_batched_tokens=8192, **knobs)  # fmt: skip
    return LLMEngine(config, clock=clock), clock


def _decode(engine: LLMEngine, clock: VirtualClock, num_requests: int, **params):
    for _ in range(num_requests):
        engine.add_request([256] + [97] * 200, SamplingParams(max_tokens=64, temperature=0.0,
                           ignore_eos=True, **params))  # fmt: skip
    drafted = accepted = 0
    outputs = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            outputs.setdefault(out.request_id, []).append(out)
        stats = engine.last_step.spec_decoding
        if stats is not None:
            drafted, accepted = (
                drafted + stats.num_draft_tokens,
                accepted + stats.num_accepted_tokens,
            )
    texts = {i: "".join(o.new_text for o in outs) for i, outs in outputs.items()}
    return texts, clock.now, drafted, accepted


def _patch(engine: LLMEngine, **changes):
    return apply_knob_changes(engine, _Faults(), _Admission(), changes)


def test_speculation_pays_at_a_small_batch_costs_at_a_large_one_and_keeps_the_text():
    for num_requests, faster in ((1, True), (192, False)):
        plain_text, plain_seconds, _, _ = _decode(*_engine(None), num_requests)
        spec_text, spec_seconds, drafted, accepted = _decode(*_engine(), num_requests)
        assert list(spec_text.values()) == list(plain_text.values())
        assert (spec_seconds < plain_seconds) is faster, (num_requests, spec_seconds, plain_seconds)
        # 0.7 per token given the ones before: 0.7 + 0.49 + 0.34 + 0.24 of 4 (0.44)
        assert 0.35 < accepted / drafted < 0.55


def test_a_patch_changes_the_acceptance_rate_and_a_torch_engine_refuses_it():
    engine, clock = _engine()
    changes = _patch(engine, spec_decode_acceptance_rate=1.0)
    assert [(ch.knob, ch.old_value, ch.new_value) for ch in changes] == [
        ("spec_decode_acceptance_rate", 0.7, 1.0)
    ]
    assert knobs_in_force(engine, _Faults(), _Admission())["spec_decode_acceptance_rate"] == 1.0
    _, _, drafted, accepted = _decode(engine, clock, 2)
    assert accepted == drafted > 0
    _patch(engine, spec_decode_acceptance_rate=0.0)
    _, _, drafted, accepted = _decode(engine, clock, 2)
    assert accepted == 0 and drafted > 0
    for bad in (-0.1, 1.5, float("nan"), "0.5", True):
        with pytest.raises(ConfigError, match="spec_decode_acceptance_rate"):
            _patch(engine, spec_decode_acceptance_rate=bad, max_num_seqs=8)
    assert engine.live_config.max_num_seqs == 256  # all or nothing
    torch_engine = LLMEngine(EngineConfig(model="tiny", max_model_len=64, num_gpu_blocks=8))
    with pytest.raises(ConfigError, match="a simulator knob; this engine runs a model"):
        _patch(torch_engine, structured_output_compile_seconds=0.1)


def test_compiles_cost_on_a_miss_and_truncation_takes_its_share():
    engine, clock = _engine(None)
    _patch(engine, structured_output_compile_seconds=2.0, structured_output_truncation_share=0.0)
    schema = StructuredOutputsParams(json={"type": "object", "title": "a"})
    before = clock.now
    engine.add_request([256, 97], SamplingParams(max_tokens=8, structured_outputs=schema))
    assert clock.now - before == 2.0
    engine.add_request([256, 98], SamplingParams(max_tokens=8, structured_outputs=schema))
    assert clock.now - before == 2.0  # cached: free
    outputs = run_to_completion(engine)
    assert {outs[-1].finish_reason for outs in outputs.values()} == {"stop"}
    assert {outs[-1].num_output_tokens for outs in outputs.values()} == {8}
    compiles = [outs[-1].timings.grammar_compile for outs in outputs.values()]
    assert sorted((g.cache_hit, g.compile_seconds) for g in compiles) == [(False, 2.0), (True, 0.0)]
    stats = engine.grammar_cache_stats()
    assert (stats.num_hits, stats.num_misses) == (1, 1)
    _patch(engine, structured_output_truncation_share=1.0)
    engine.add_request([256, 99], SamplingParams(max_tokens=8, structured_outputs=schema))
    ((last,),) = [outs[-1:] for outs in run_to_completion(engine).values()]
    assert last.finish_reason == "length"


def test_a_mask_costs_each_structured_row_each_step():
    seconds = []
    for mask in (0.0, 0.01):
        engine, clock = _engine(None)
        _patch(engine, structured_output_mask_seconds=mask, structured_output_compile_seconds=0.0)
        schema = StructuredOutputsParams(regex="x+")
        for _ in range(4):
            engine.add_request([256, 97], SamplingParams(max_tokens=10, structured_outputs=schema))
        run_to_completion(engine)
        seconds.append(clock.now)
    assert seconds[1] - seconds[0] == pytest.approx(4 * 10 * 0.01)


def _counter(replica, family_name: str) -> float:
    return sum(
        s.value
        for f in replica.metrics.registry.collect()
        for s in f.samples
        if s.name == family_name + "_total" and "position" not in s.labels
    )


def test_the_virtual_fleet_runs_both_a_patch_turns_acceptance_off_and_the_rules_know_it():
    knobs = {"speculative_config": SPEC}
    fleet = _fleet(
        count=2, knobs=knobs, rate=6, output_tokens=32, structured={"share": 0.5, "schemas": 3}
    )
    collector = VirtualCollector(VirtualStore.memory(), fleet.replicas)
    replica = fleet.replicas[0]
    accepted, drafted = "vllm:spec_decode_num_accepted_tokens", "vllm:spec_decode_num_draft_tokens"
    for t in range(12):
        if t == 5:  # a scenario's admin step: the drafts stop matching
            assert _counter(replica, accepted) > 0
            before = (_counter(replica, accepted), _counter(replica, drafted))
            replica.patch({"spec_decode_acceptance_rate": 0.0})
        fleet.advance_to(float(t))
        collector.receive(fleet.take_log().finished)
        collector.scrape(float(t))
    assert _counter(replica, accepted) == before[0] and _counter(replica, drafted) > before[1]
    store = collector.store
    series = store.metrics.series(c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL)
    assert series and all(dict(s.labels)[c.LABEL_MODEL] == SIM for s in series)
    assert {r.status for r in fleet.results} == {200}
    reasons = {r.finish_reason for r in fleet.results}
    assert "stop" in reasons and "length" in reasons  # structured ones complete their JSON
    # every structured request is counted once when it finishes, by how it finished
    finished = _counter(replica, "tailwatch:structured_output_finished")
    assert finished == _counter(replica, "tailwatch:structured_output_requests") > 0
    rule = MetricAbsentRule(
        name="new-families", alert="metric-absent", checked_families=NEW_FAMILIES
    )
    ((check,),) = [check_rules([rule], store.metrics)]
    assert check.missing_families == ()
    with pytest.raises(RuleError, match="unknown family 'spec_decode_bogus'"):
        MetricAbsentRule(name="x", alert="metric-absent", checked_families=("spec_decode_bogus",))


@settings(max_examples=60, deadline=None)
@given(
    share=st.one_of(st.floats(allow_nan=True), st.integers(-2, 2), st.none(), st.text(max_size=3)),
    schemas=st.one_of(st.integers(-(2**40), 2**40), st.floats(), st.booleans(), st.none()),
)
def test_a_workloads_structured_share_is_parsed_or_named_in_the_error(share, schemas):
    raw = {
        "structured": {k: v for k, v in (("share", share), ("schemas", schemas)) if v is not None}
    }
    try:
        workload = parse_workload(raw)
    except WorkloadError as error:
        assert "workload.structured" in str(error)
        return
    assert 0 <= workload.structured.share <= 1 and 1 <= workload.structured.num_schemas <= 10_000


def test_a_workload_without_structured_requests_keeps_its_schedule():
    base = {"rate": 5, "duration": 4, "seed": 7}
    plain = build_schedule([parse_workload(base)])
    off = build_schedule([parse_workload({**base, "structured": {"share": 0.0}})])
    assert plain == off and all(r.schema is None for r in plain)
    some = build_schedule([parse_workload({**base, "structured": {"share": 1.0, "schemas": 2}})])
    assert {r.schema for r in some} == {0, 1}
    assert some[0].prompt_token_ids == plain[0].prompt_token_ids  # drawn before the schema


@pytest.fixture(scope="module")
def sim_engine() -> LLMEngine:
    return _engine()[0]


_EXTREMES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**70), 2**70),
    st.sampled_from([0, 1, 60, 60.000001, 5e-324, -0.0, True, None, "0.5", [0.5]]),
)


@settings(max_examples=80, deadline=None)
@given(knob=st.sampled_from(SIM_FEATURE_KNOBS), value=_EXTREMES)
def test_any_simulator_knob_value_is_applied_or_refused_naming_it(sim_engine, knob, value):
    engine = sim_engine
    before = knobs_in_force(engine, _Faults(), _Admission())
    try:
        _patch(engine, **{knob: value})
    except ConfigError as error:
        assert str(error).startswith(f"{knob}=")
        assert knobs_in_force(engine, _Faults(), _Admission()) == before
        return
    assert getattr(engine.simulation.features.knobs, knob) == float(value)
    _patch(engine, **{knob: before[knob]})
