"""``sim:<model>@<gpu>``: parsing, and one clear error for every bad name."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.sim.backend import build_sim_backend
from engine.sim.runner import VirtualClock
from engine.sim.specs import GPUS, SIM_MODELS
from engine.sim.target import is_simulated, parse_target


@pytest.mark.parametrize("model", list(SIM_MODELS))
@pytest.mark.parametrize("gpu", list(GPUS))
def test_every_model_and_gpu_parses(model, gpu):
    target = parse_target(f"sim:{model}@{gpu}")
    assert (target.model.name, target.gpu.name) == (model, gpu)
    assert target.name == f"sim:{model}@{gpu}"


def test_names_are_case_insensitive():
    assert parse_target("sim:Llama-3.1-8B@H100").name == "sim:llama-3.1-8b@h100"


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("sim:llama-3.1-8b", "write sim:<model>@<gpu>"),
        ("sim:llama-3.1-8b@h100@x", "write sim:<model>@<gpu>"),
        ("sim:gpt-5@h100", "unknown simulated model 'gpt-5'"),
        ("sim:llama-3.1-8b@tpu", "unknown GPU 'tpu'"),
        ("sim:@", "unknown simulated model ''"),
    ],
)
def test_a_bad_name_lists_what_is_known(model, says):
    with pytest.raises(ConfigError) as raised:
        parse_target(model)
    message = str(raised.value)
    assert says in message and repr(model) in message
    assert all(name in message for name in (*SIM_MODELS, *GPUS))


@settings(max_examples=60, deadline=None)
@given(st.text(max_size=40))
def test_any_string_parses_or_raises_config_error(body):
    model = f"sim:{body}"
    assert is_simulated(model)
    try:
        target = parse_target(model)
    except ConfigError as error:
        assert "known models" in str(error)
    else:
        assert target.model.name in SIM_MODELS and target.gpu.name in GPUS


def test_the_kv_pool_is_gpu_memory_less_weights():
    # 80 GB x 0.9 - 16.06 GB of bf16 weights - 10% headroom, at 128 KiB a token.
    backend = build_sim_backend(EngineConfig(model="sim:llama-3.1-8b@h100"), VirtualClock())
    weights = SIM_MODELS["llama-3.1-8b"].shape.num_parameters() * 2
    allowance = int(80e9 * 0.9) - weights
    budget = allowance - allowance // 10
    assert backend.num_gpu_blocks == budget // (16 * 131072)
    fixed = EngineConfig(model="sim:llama-3.1-8b@h100", num_gpu_blocks=200)
    assert build_sim_backend(fixed, VirtualClock()).num_gpu_blocks == 200


def test_a_model_that_does_not_fit_says_so():
    with pytest.raises(ConfigError, match=r"does not fit one NVIDIA H100.*tensor_parallel_size"):
        build_sim_backend(EngineConfig(model="sim:llama-3.1-70b@h100"), VirtualClock())
    # NOTE: Mixtral's weights are all its experts (46.7B params, 93 GB), not its active 12.9B
    with pytest.raises(ConfigError, match=r"Mixtral 8x7B.*does not fit one NVIDIA H100"):
        build_sim_backend(EngineConfig(model="sim:mixtral-8x7b@h100"), VirtualClock())


def test_serving_sleeps_and_offline_advances_the_virtual_clock():
    import time

    config = EngineConfig(model="sim:llama-3.1-8b@h100", num_gpu_blocks=200)
    assert build_sim_backend(config, time.monotonic).runner.advance is time.sleep
    clock = VirtualClock()
    runner = build_sim_backend(config, clock).runner
    runner.advance(0.25)
    assert clock() == 0.25


@pytest.mark.parametrize(
    ("knobs", "message"),
    [
        ({"device": "cuda"}, "device='cuda'"),
        ({"dtype": "float32"}, "dtype='float32'"),
        ({"kv_cache_memory_bytes": 1000}, "kv_cache_memory_bytes=1000"),
    ],
)
def test_knobs_the_simulator_cannot_honour_are_refused(knobs, message):
    config = EngineConfig(model="sim:llama-3.1-8b@h100", **knobs)
    with pytest.raises(ConfigError, match=re.escape(message)):
        build_sim_backend(config, VirtualClock())
