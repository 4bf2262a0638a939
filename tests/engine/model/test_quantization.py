"""int8 weight-only quantization: the torch forward stays close to fp32, the simulator
prices it, and its name is on the engine's info metric."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from engine.async_engine import AsyncEngine
from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.metrics import EngineMetrics
from engine.model.loader import load_model
from engine.quantization import INT8_WEIGHT_ONLY
from engine.quantization.int8 import Int8Linear
from engine.sampling_params import SamplingParams
from engine.sim.specs import GPUS, SIM_MODELS
from engine.sim.step_cost import BatchItem, StepCostModel
from tests.engine.conftest import run_to_completion

PROMPTS = ["int8 weights", "a second, longer prompt for the same check"]


def _first_token_logprobs(quantization: str | None) -> list[list[tuple[int, float]]]:
    engine = LLMEngine(
        EngineConfig(model="tiny", max_model_len=64, num_gpu_blocks=16, quantization=quantization)
    )
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=5)
    ids = [engine.add_request(p, params) for p in PROMPTS]
    outputs = run_to_completion(engine)
    return [[(t, lp) for t, lp in outputs[i][0].new_logprobs[0].top] for i in ids]


def test_int8_logits_stay_close_to_fp32_but_are_not_the_same():
    full, quantized = _first_token_logprobs(None), _first_token_logprobs(INT8_WEIGHT_ONLY)
    differences = [
        abs(a - b)
        for full_top, quantized_top in zip(full, quantized, strict=True)
        for (_, a), (_, b) in zip(full_top, quantized_top, strict=True)
    ]
    assert max(differences) < 0.05  # per-channel int8 of N(0, 0.02) weights
    assert max(differences) > 0  # the forward really ran on the int8 weights
    assert [t for t, _ in full[0][:2]] == [t for t, _ in quantized[0][:2]]


def test_every_decoder_projection_is_int8_and_within_half_a_step_of_its_weight():
    full, _, _ = load_model("tiny", device="cpu", dtype="float32")
    quantized, _, _ = load_model(
        "tiny", device="cpu", dtype="float32", quantization=INT8_WEIGHT_ONLY
    )
    for full_layer, layer in zip(full.model.layers, quantized.model.layers, strict=True):
        for parent, name in (("self_attn", "qkv_proj"), ("self_attn", "o_proj"), ("mlp", "gate_up_proj"), ("mlp", "down_proj")):  # fmt: skip
            linear = getattr(getattr(layer, parent), name)
            assert isinstance(linear, Int8Linear) and linear.weight_int8.dtype == torch.int8
            weight = getattr(getattr(full_layer, parent), name).weight
            error = (linear.dequantized() - weight).abs()
            assert (error <= linear.scales[:, None] / 2 + 1e-7).all()
    assert quantized.lm_head.weight.dtype == torch.float32  # the head is left as it is
    int8_bytes = sum(b.numel() * b.element_size() for b in quantized.buffers())
    fp32_bytes = sum(
        p.numel() * p.element_size() for n, p in full.named_parameters() if "_proj" in n
    )
    assert int8_bytes < fp32_bytes / 3.5


def test_an_unknown_method_is_a_config_error_naming_the_knob():
    with pytest.raises(ConfigError, match="quantization='fp4': must be one of int8_per_channel"):
        EngineConfig(quantization="fp4")


def test_the_method_is_a_label_of_cache_config_info():
    engine = LLMEngine(
        EngineConfig(
            model="tiny", max_model_len=64, num_gpu_blocks=16, quantization=INT8_WEIGHT_ONLY
        )
    )
    metrics = EngineMetrics("tiny", AsyncEngine(engine).knobs())
    body, _ = metrics.render(None)
    families = {f.name: f for f in text_string_to_metric_families(body.decode())}
    (info,) = families["vllm:cache_config_info"].samples
    assert info.labels["quantization"] == INT8_WEIGHT_ONLY


def test_the_simulator_prices_int8_weights_half_the_bytes_at_the_kernels_speed():
    shape, gpu = SIM_MODELS["llama-3.1-8b"].shape, GPUS["h100"]
    plain = StepCostModel(shape, gpu)
    int8 = StepCostModel(shape, gpu, quantization=INT8_WEIGHT_ONLY)
    assert 0.5 < int8.weight_bytes / plain.weight_bytes < 0.6  # the embeddings stay 16-bit
    decode = [BatchItem(1, 1000)] * 8  # memory-bound: fewer bytes, a faster step
    assert int8.cost(decode, 8).step_seconds < 0.7 * plain.cost(decode, 8).step_seconds
    prefill = [BatchItem(4096, 4096)]  # compute-bound: the int8 kernel's slower matmuls
    speed = gpu.quantization_speed[INT8_WEIGHT_ONLY]
    assert int8.cost(prefill, 1).compute_seconds > plain.cost(prefill, 1).compute_seconds
    assert int8.cost(prefill, 1).compute_seconds < plain.cost(prefill, 1).compute_seconds / speed


def test_a_simulated_engine_takes_the_knob():
    config = EngineConfig(model="sim:llama-3.1-8b@h100", quantization=INT8_WEIGHT_ONLY)
    engine = LLMEngine(config)
    assert engine.simulation is not None
    assert engine.simulation.runner.cost_model.quantization == INT8_WEIGHT_ONLY


@settings(max_examples=60, deadline=None, derandomize=True, database=None)
@given(value=st.one_of(st.text(max_size=40), st.integers(), st.booleans(), st.floats()))
def test_any_other_quantization_value_is_refused_naming_the_knob(value):
    if value == INT8_WEIGHT_ONLY:
        return
    with pytest.raises(ConfigError, match=r"^quantization="):
        EngineConfig(quantization=value)
