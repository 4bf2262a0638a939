"""Tensor parallelism in the simulator: the per-GPU shard, the all-reduce term, the KV pool
of a group, and the knob's errors (the torch engine refuses it)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.sim.backend import build_sim_backend
from engine.sim.parallel import ring_all_reduce_seconds, shard
from engine.sim.runner import VirtualClock
from engine.sim.specs import GPUS, SIM_MODELS
from engine.sim.step_cost import BatchItem, StepCostModel
from tailwatch.cli import app

LLAMA_8B = SIM_MODELS["llama-3.1-8b"].shape
H100 = GPUS["h100"]


def test_the_all_reduce_term_by_hand():
    # 64 decodes on 2 x H100: each all-reduce carries 64 x 4096 bf16 = 524,288 bytes, of
    # which a ring sends 2 (2 - 1) / 2 = 1x over NVLink 4's 450 GB/s a direction, + 8 us;
    # 32 layers x 2 all-reduces.
    model = StepCostModel(LLAMA_8B, H100, tensor_parallel_size=2)
    cost = model.cost([BatchItem(1, 1000)] * 64, num_sampled=64)
    one = 8e-6 + 524_288 / 450e9
    assert cost.communication_seconds == pytest.approx(64 * one)
    assert cost.step_seconds == pytest.approx(
        max(cost.compute_seconds, cost.memory_seconds) + 64 * one + 0.001
    )
    # 4 GPUs send 2 x 3/4 of the buffer each
    assert ring_all_reduce_seconds(1e6, 4, 450e9, 8e-6) == pytest.approx(8e-6 + 1.5e6 / 450e9)
    assert ring_all_reduce_seconds(1e6, 1, 450e9, 8e-6) == 0.0


def test_one_gpu_of_two_reads_half_the_weights_by_hand():
    cost = StepCostModel(LLAMA_8B, H100, tensor_parallel_size=2).cost([BatchItem(1, 1001)], 1)
    h, layers = 4096, 32
    lm_head = 128256 // 2 * h
    attention = h * 128 * 2 * (16 + 4)  # 16 of 32 query heads, 4 of 8 KV heads
    mlp = 3 * h * 14336 // 2
    streamed = lm_head + layers * (attention + mlp + 2 * h) + h  # norms replicated
    kv_per_token = 2 * layers * 4 * 128 * 2
    assert cost.bytes == streamed * 2 + h * 2 + kv_per_token * (1001 + 1)
    one_gpu = StepCostModel(LLAMA_8B, H100).cost([BatchItem(1, 1001)], 1)
    assert cost.bytes == pytest.approx(one_gpu.bytes / 2, rel=1e-4)
    assert cost.flops == pytest.approx(one_gpu.flops / 2, rel=1e-4)


@settings(max_examples=30, deadline=None)
@given(
    batch=st.lists(st.tuples(st.integers(1, 2048), st.integers(0, 4096)), max_size=8),
    gpu=st.sampled_from(sorted(GPUS)),
)
def test_tp_1_is_the_one_gpu_model_exactly(batch, gpu):
    items = [BatchItem(q, q + c) for q, c in batch]
    default = StepCostModel(LLAMA_8B, GPUS[gpu]).cost(items, len(items))
    explicit = StepCostModel(LLAMA_8B, GPUS[gpu], tensor_parallel_size=1).cost(items, len(items))
    assert default == explicit
    assert default.communication_seconds == 0.0
    overhead = 0.0 if not items else max(default.compute_seconds, default.memory_seconds)
    assert default.step_seconds == pytest.approx(overhead + 0.001)


@settings(max_examples=60, deadline=None)
@given(tp=st.one_of(st.integers(-3, 40), st.booleans(), st.floats(allow_nan=True), st.text()))
def test_tp_divides_the_heads_or_is_one_clear_error(tp):
    try:
        part = shard(LLAMA_8B, tp)
    except ConfigError as error:
        assert f"tensor_parallel_size={tp!r}" in str(error)
        if isinstance(tp, int) and not isinstance(tp, bool) and 0 < tp <= 8:
            assert "must divide the model's 32 attention heads" in str(error)
    else:
        assert part.num_attention_heads * tp == 32
        assert part.num_key_value_heads * tp == 8


def test_kv_heads_are_replicated_when_tp_exceeds_them():
    # NOTE: a shape with 2 KV heads on 4 GPUs: vLLM gives each GPU one (each head twice).
    import dataclasses

    shape = dataclasses.replace(LLAMA_8B, num_key_value_heads=2)
    assert shard(shape, 4).num_key_value_heads == 1
    one = StepCostModel(shape, H100).kv_bytes_per_token
    assert StepCostModel(shape, H100, tensor_parallel_size=4).kv_bytes_per_token == one // 2


@pytest.mark.parametrize(
    ("tp", "says"),
    [
        (3, "tensor_parallel_size=3: must divide the model's 32 attention heads"),
        (16, "tensor_parallel_size=16: at most 8"),
    ],
)
def test_a_bad_tp_names_the_knob_and_the_model(tp, says):
    config = EngineConfig(model="sim:llama-3.1-8b@h100", tensor_parallel_size=tp)
    with pytest.raises(ConfigError, match=says) as raised:
        build_sim_backend(config, VirtualClock())
    assert "sim:llama-3.1-8b@h100" in str(raised.value)


def test_70b_fits_two_h100s_with_the_blocks_by_hand():
    backend = build_sim_backend(
        EngineConfig(model="sim:llama-3.1-70b@h100", tensor_parallel_size=2), VirtualClock()
    )
    # each GPU: 72 GB allowed, less half of 141.11 GB of weights, less the 256 MiB floor
    # of headroom, over 16 tokens x 80 layers x 4 KV heads x 128 x 2 (K, V) x 2 bytes.
    norms = 80 * 2 * 8192 + 8192  # on both GPUs; the rest is split in two
    weights = 2 * ((SIM_MODELS["llama-3.1-70b"].shape.num_parameters() - norms) // 2 + norms)
    allowance = 72_000_000_000 - weights
    budget = allowance - max(256 * 1024 * 1024, allowance // 10)
    assert backend.num_gpu_blocks == budget // (16 * 2 * 80 * 4 * 128 * 2) == 448
    four = EngineConfig(model="sim:llama-3.1-70b@h100", tensor_parallel_size=4)
    assert build_sim_backend(four, VirtualClock()).num_gpu_blocks > 50 * 448


def test_tp_2_pool_holds_more_than_two_replicas():
    # NOTE: one copy of the weights over two GPUs leaves more room for KV than two copies.
    one = build_sim_backend(EngineConfig(model="sim:llama-3.1-8b@h100"), VirtualClock())
    two = build_sim_backend(
        EngineConfig(model="sim:llama-3.1-8b@h100", tensor_parallel_size=2), VirtualClock()
    )
    # blocks of tp=2 hold half the KV heads each: compare tokens the pools hold
    assert two.num_gpu_blocks > 2 * one.num_gpu_blocks


@settings(max_examples=40, deadline=None)
@given(tp=st.one_of(st.integers(-(2**63), 2**63), st.booleans(), st.floats(), st.none()))
def test_the_torch_engine_refuses_tensor_parallelism_clearly(tp):
    try:
        EngineConfig(model="tiny", tensor_parallel_size=tp)
    except ConfigError as error:
        assert f"tensor_parallel_size={tp!r}" in str(error)
        if isinstance(tp, int) and not isinstance(tp, bool) and tp > 1:
            assert "only 1 is supported" in str(error)
    else:
        assert tp == 1


@pytest.mark.parametrize(
    ("model", "says"),
    [
        ("tiny", "tensor_parallel_size=2: the torch engine runs model 'tiny' on one device"),
        ("sim:qwen2.5-14b@h100", "tensor_parallel_size=2"),
    ],
)
def test_the_cli_option_reaches_the_knob(model, says):
    size = "3" if model.startswith("sim:") else "2"
    says = says.replace("=2", f"={size}")
    result = CliRunner().invoke(
        app,
        ["engine", "serve", "--port", "0", "--model", model, "--tensor-parallel-size", size],
        env={"COLUMNS": "500"},
    )
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def test_generate_says_how_many_simulated_gpus_it_priced():
    # NOTE: the summary line read the torch runner's device and failed on any sim: model
    args = ["engine", "generate", "-p", "hi", "--max-tokens", "2", "--max-model-len", "1024"]
    args += ["--model", "sim:llama-3.1-70b@h100", "--tensor-parallel-size", "2"]
    result = CliRunner().invoke(app, args, env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "on 2 x h100, simulated (bfloat16); KV pool 448 blocks" in result.output
