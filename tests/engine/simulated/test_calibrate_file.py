"""The calibration file: it round-trips, ``sim:<model>@file:<path>`` runs it, and a
missing or bad file is one ConfigError naming the path and the problem."""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.config import DEFAULT_CPU_KV_CACHE_MEMORY_BYTES, EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.model.presets import PRESETS
from engine.sim.calibration_file import (
    Calibration,
    DeviceSpec,
    load_calibration,
    save_calibration,
)
from engine.sim.offline import run_open_loop
from engine.sim.step_cost import Efficiency
from engine.sim.workload import RequestShape, poisson_schedule

TINY = PRESETS["tiny"].config


def _calibration(**changes) -> Calibration:
    fields = {
        "model": "tiny",
        "shape": TINY,
        "dtype": "float32",
        "device": DeviceSpec(
            type="cpu",
            description="test CPU, 1 torch thread",
            peak_flops_per_second=5e10,
            memory_bandwidth_bytes_per_second=2e10,
            memory_bytes=16 << 30,
            peak_source="measured: test",
            default_kv_cache_memory_bytes=DEFAULT_CPU_KV_CACHE_MEMORY_BYTES,
            torch_threads=1,
        ),
        "efficiency": Efficiency(0.3, 0.5, 0.003, 0.0002),
        "engine_knobs": EngineConfig().to_dict(),
        "torch_version": "test",
        "created": "2026-01-01T00:00:00+00:00",
        "fit": {"method": "test", "notes": []},
        "grid": {"prefill_tokens": [32]},
        "cells": [{"cell": "prefill 32 x 512", "relative_error": 0.01}],
    }
    return Calibration(**{**fields, **changes})


def test_a_calibration_round_trips(tmp_path):
    path = tmp_path / "calibration.json"
    calibration = _calibration()
    save_calibration(calibration, path)
    assert load_calibration(path) == calibration
    assert not list(tmp_path.glob(".*partial"))  # NOTE: written whole, then renamed


def test_the_calibrated_simulator_runs_the_tiny_model_with_the_fitted_factors(tmp_path):
    path = tmp_path / "cal.json"
    save_calibration(_calibration(), path)
    name = f"sim:tiny@file:{path}"
    engine = LLMEngine(EngineConfig(model=name))
    assert engine.simulation is not None
    cost_model = engine.simulation.runner.cost_model
    assert cost_model.efficiency == Efficiency(0.3, 0.5, 0.003, 0.0002)
    assert (cost_model.dtype, cost_model.shape) == ("float32", TINY)
    # NOTE: the KV pool the torch engine gives itself on a CPU: 256 MiB of float32 blocks
    assert engine.num_gpu_blocks == LLMEngine(EngineConfig(model="tiny")).num_gpu_blocks
    arrivals = poisson_schedule(5, 2, [RequestShape(64, 8)], seed=0)
    run = run_open_loop(EngineConfig(model=name), arrivals)
    assert len(run.results) == len(arrivals)
    # one request alone: its decodes cost the overhead, the per-request cost and the roofline
    assert min(x for r in run.results for x in r.itl_seconds) > 0.003 + 0.0002


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("sim:small@file:{path}", "is of model 'tiny', not 'small'"),
        ("sim:tiny@file:", "write sim:<model>@file:<calibration.json>"),
        ("sim:tiny@file:{tmp}/absent.json", "absent.json: no such file"),
        ("sim:tiny@file:{tmp}", "is a directory"),
    ],
)
def test_a_bad_file_name_is_one_clear_error(tmp_path, model, says):
    path = tmp_path / "cal.json"
    save_calibration(_calibration(), path)
    with pytest.raises(ConfigError, match=re.escape(says)):
        LLMEngine(EngineConfig(model=model.format(path=path, tmp=tmp_path)))


def test_a_calibrated_dtype_is_not_overridden(tmp_path):
    path = tmp_path / "cal.json"
    save_calibration(_calibration(), path)
    with pytest.raises(ConfigError, match="calibrated in float32; leave dtype at auto"):
        LLMEngine(EngineConfig(model=f"sim:tiny@file:{path}", dtype="bfloat16"))


def _write(tmp_path, body) -> str:
    path = tmp_path / "bad.json"
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return str(path)


def _body() -> dict:
    return _calibration().to_json()


@pytest.mark.parametrize(
    ("edit", "says"),
    [
        (lambda b: "{not json", "not JSON"),
        (lambda b: [1, 2], "format='list': not a tailwatch-calibration/1 file"),
        (lambda b: {**b, "format": "other/9"}, "format='other/9'"),
        (lambda b: {k: v for k, v in b.items() if k != "efficiency"}, "missing 'efficiency'"),
        (lambda b: {**b, "dtype": "int8"}, "dtype='int8': must be one of"),
        (
            lambda b: {**b, "efficiency": {**b["efficiency"], "compute": 2.0}},
            "efficiency: compute_efficiency=2.0: must be in (0, 1]",
        ),
        (
            lambda b: {**b, "device": {**b["device"], "peak_flops_per_second": -1}},
            "peak_flops_per_second=-1: must be a finite number > 0",
        ),
        (lambda b: {**b, "shape": {**b["shape"], "hidden_size": 0}}, "shape: hidden_size"),
        (lambda b: {**b, "model": 7}, "model=7: expected str"),
    ],
)
def test_a_bad_file_is_a_clear_error_naming_the_path(tmp_path, edit, says):
    path = _write(tmp_path, edit(_body()))
    with pytest.raises(ConfigError, match=re.escape(says)) as raised:
        load_calibration(path)
    assert str(raised.value).startswith(f"calibration file {path}: ")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    section=st.sampled_from(["device", "efficiency", "shape", None]),
    key=st.sampled_from(
        [
            "type",
            "peak_flops_per_second",
            "memory_bytes",
            "default_kv_cache_memory_bytes",
            "torch_threads",
            "compute",
            "step_overhead_seconds",
            "request_overhead_seconds",
            "vocab_size",
            "eos_token_ids",
            "rope_scaling",
            "model",
            "dtype",
            "fit",
        ]
    ),
    value=JSON,
)
def test_any_value_in_any_field_loads_or_is_a_config_error(tmp_path, section, key, value):
    body = _body()
    target = body if section is None else body[section]
    target[key] = value
    path = _write(tmp_path, body)
    try:
        load_calibration(path)
    except ConfigError as error:
        assert str(error).startswith(f"calibration file {path}: ")
