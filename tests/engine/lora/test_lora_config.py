"""The LoRA knobs, adapter sources and the loaded set's bookkeeping, without torch; fuzzed
at their extremes: every value is accepted or refused with a ConfigError naming it."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.lora.config import MAX_LORA_RANKS, LoRAConfig
from engine.lora.manager import LoRAManager
from engine.lora.request import LoRARequest
from engine.lora.slots import AdapterSlots
from engine.lora.source import (
    DEFAULT_TARGET_MODULES,
    PeftDirectory,
    RandomAdapter,
    parse_lora_module,
    parse_lora_source,
)

FUZZ = settings(max_examples=150, deadline=None, derandomize=True, database=None)
EXTREME_NUMBERS = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0, 1, -1, 2**63, True, False, None, "8", 16.0, 1e-300]),
)


def test_vllms_defaults_and_max_cpu_loras_following_max_loras():
    config = EngineConfig(enable_lora=True, max_loras=3)
    assert config.lora_config() == LoRAConfig(3, 3, 16, 0.0)
    assert EngineConfig().lora_config() is None  # LoRA off
    assert EngineConfig(max_cpu_loras=None).max_cpu_loras is None  # never written back


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"max_loras": 0}, "max_loras=0: must be a positive integer"),
        ({"max_loras": 2, "max_cpu_loras": 1}, "max_cpu_loras=1: must be >= max_loras (2)"),
        ({"max_lora_rank": 12}, "max_lora_rank=12: must be one of 1, 8, 16"),
        ({"max_lora_rank": 16.0}, "max_lora_rank=16.0"),
        ({"lora_load_seconds": math.inf}, "lora_load_seconds=inf"),
        ({"lora_load_seconds": -0.5}, "lora_load_seconds=-0.5"),
        ({"enable_lora": "yes"}, "enable_lora='yes': must be true or false"),
        ({"quantization": "int4"}, "quantization='int4': must be one of"),
    ],
)
def test_bad_knobs_are_refused_naming_the_knob(knobs, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        EngineConfig(**knobs)


@FUZZ
@given(
    knob=st.sampled_from(["max_loras", "max_cpu_loras", "max_lora_rank", "lora_load_seconds"]),
    value=EXTREME_NUMBERS,
)
def test_every_lora_knob_value_is_accepted_or_refused_naming_it(knob, value):
    try:
        config = EngineConfig(enable_lora=True, **{knob: value})
    except ConfigError as error:
        assert str(error).startswith(f"{knob}="), error
        return
    lora = config.lora_config()
    assert lora is not None and 1 <= lora.max_loras <= lora.max_cpu_loras
    assert lora.max_lora_rank in MAX_LORA_RANKS
    assert 0 <= lora.load_seconds <= 3600


def test_sources_and_modules_parse_as_vllms_flag_and_our_random_spec():
    assert parse_lora_source("/models/sql-lora") == PeftDirectory("/models/sql-lora")
    random = parse_lora_source("random:rank=8,seed=3,alpha=16,targets=q_proj+o_proj")
    assert random == RandomAdapter(8, 3, 16.0, ("q_proj", "o_proj"))
    assert random.scaling == 2.0 and parse_lora_source(str(random)) == random
    assert parse_lora_source("random:rank=4").target_modules == DEFAULT_TARGET_MODULES
    assert parse_lora_module("sql=random:rank=8") == ("sql", RandomAdapter(8))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "give a PEFT adapter directory"),
        ("random:", "is not one of rank="),
        ("random:seed=3", "needs rank="),
        ("random:rank=0", "rank must be an integer in [1, 512]"),
        ("random:rank=8,rank=8", "each once"),
        ("random:rank=8,alpha=nan", "alpha must be a positive number"),
        ("random:rank=8,targets=lm_head", "targets must be distinct names"),
        ("random:rank=8,seed=-1", "seed must be an integer"),
    ],
)
def test_bad_sources_are_refused_naming_the_part(text, message):
    with pytest.raises(ConfigError) as raised:
        parse_lora_source(text)
    assert message in str(raised.value)


@pytest.mark.parametrize(
    "text", ["no-equals", "=random:rank=8", "a,b=random:rank=8", "x" * 200 + "=random:rank=8"]
)
def test_bad_module_names_are_refused(text):
    with pytest.raises(ConfigError, match="lora_modules"):
        parse_lora_module(text)


@FUZZ
@given(text=st.one_of(st.text(max_size=80), st.text(max_size=80).map(lambda t: "random:" + t)))
def test_any_source_text_parses_or_is_refused_with_a_config_error(text):
    try:
        source = parse_lora_source(text)
    except ConfigError as error:
        assert str(error).startswith("lora_path=")
        return
    if isinstance(source, RandomAdapter):
        assert 1 <= source.rank <= 512 and source.scaling > 0


def _request(i: int) -> LoRARequest:
    return LoRARequest(f"a{i}", i + 1, RandomAdapter(8, i))


@FUZZ
@given(
    capacity=st.integers(1, 4),
    steps=st.lists(st.lists(st.integers(0, 6), min_size=1, max_size=4), max_size=30),
)
def test_the_loaded_set_never_exceeds_max_cpu_loras_and_keeps_a_steps_adapters(capacity, steps):
    loads: list[int] = []
    config = LoRAConfig(max_loras=capacity, max_cpu_loras=capacity, load_seconds=0.25)
    clock = [0.0]
    manager: LoRAManager[str] = LoRAManager(
        config,
        lambda r: loads.append(r.lora_int_id) or r.lora_name,
        lambda: clock[0],
        lambda seconds: clock.__setitem__(0, clock[0] + seconds),
    )
    for step in steps:
        wanted = [_request(i) for i in dict.fromkeys(step)][:capacity]
        manager.prepare(wanted)
        assert all(manager.get(r.lora_int_id) == r.lora_name for r in wanted)
        assert len(manager.loaded_names) <= capacity
    assert clock[0] == pytest.approx(0.25 * len(loads))  # every load spent its latency
    assert sum(s.num_loads for s in manager.loads.values()) == len(loads)


def test_adapter_slots_count_moves_and_bound_distinct_running_adapters():
    slots = AdapterSlots(max_loras=1)
    a, b = _request(0), _request(1)
    for lora in (a, b, None):
        slots.added(lora)
    assert slots.can_run(a) and slots.can_run(b) and slots.can_run(None)
    slots.started(a)
    assert not slots.can_run(b) and slots.can_run(a) and slots.can_run(None)
    slots.preempted(a)
    assert slots.can_run(b) and slots.waiting == {"a0": 1, "a1": 1}
    slots.started(b)
    slots.finished(b, was_running=True)
    slots.finished(a, was_running=False)
    assert slots.running == {} and slots.waiting == {}
