"""The roofline step-time model against hand-computed cases."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.errors import ConfigError
from engine.sim.specs import GPUS, SIM_MODELS
from engine.sim.step_cost import BatchItem, Efficiency, StepCostModel

LLAMA_8B = SIM_MODELS["llama-3.1-8b"].shape
H100 = GPUS["h100"]


@pytest.fixture(scope="module")
def h100_8b() -> StepCostModel:
    return StepCostModel(LLAMA_8B, H100)


def test_published_parameter_counts():
    # NOTE: the checkpoints' own counts (8.03B, 70.6B, 14.7B), to 0.1%.
    counts = {name: m.shape.num_parameters() for name, m in SIM_MODELS.items()}
    assert counts["llama-3.1-8b"] == pytest.approx(8.03e9, rel=1e-3)
    assert counts["llama-3.1-70b"] == pytest.approx(70.55e9, rel=1e-3)
    assert counts["qwen2.5-14b"] == pytest.approx(14.77e9, rel=1e-3)


def test_a_single_decode_is_memory_bound_by_hand(h100_8b):
    # One decode at context 1000: bytes = weights less the input table, one embedding row,
    # and 1001 tokens of K/V (1000 read + 1 written... the model reads the whole context
    # c=1001 and writes 1 token).
    cost = h100_8b.cost([BatchItem(1, 1001)], num_sampled=1)
    params = LLAMA_8B.num_parameters()
    embedding = 128256 * 4096
    kv_per_token = 2 * 32 * 8 * 128 * 2
    expected_bytes = (params - embedding) * 2 + 4096 * 2 + kv_per_token * (1001 + 1)
    assert cost.bytes == expected_bytes
    expected_flops = 2 * (params - 2 * embedding) + 2 * embedding + 4 * 32 * 32 * 128 * 1001
    assert cost.flops == expected_flops
    assert not cost.is_compute_bound
    memory = expected_bytes / (3350e9 * 0.8)
    assert cost.memory_seconds == pytest.approx(memory)
    assert cost.step_seconds == pytest.approx(memory + 0.001)
    # ~16 GB of weights at 2.68 TB/s: about 6 ms, the figure vLLM's batch-1 ITL is near.
    assert 0.005 < cost.memory_seconds < 0.007


def test_a_long_prefill_is_compute_bound_by_hand(h100_8b):
    q = 4096
    cost = h100_8b.cost([BatchItem(q, q)], num_sampled=1)
    params = LLAMA_8B.num_parameters()
    embedding = 128256 * 4096
    attention_positions = q * q - q * (q - 1) // 2  # causal: 1 + 2 + ... + q
    flops = (
        2 * (params - 2 * embedding) * q + 2 * embedding + 4 * 32 * 32 * 128 * attention_positions
    )
    assert cost.flops == flops
    assert cost.is_compute_bound
    assert cost.compute_seconds == pytest.approx(flops / (989e12 * 0.6))


def test_an_empty_step_costs_the_overhead(h100_8b):
    assert h100_8b.cost([], 0).step_seconds == pytest.approx(0.001)


@settings(max_examples=40, deadline=None)
@given(
    base=st.lists(st.tuples(st.integers(1, 2048), st.integers(0, 4096)), min_size=0, max_size=8),
    extra=st.integers(1, 2048),
)
def test_more_tokens_never_cost_less(h100_8b, base, extra):
    batch = [BatchItem(q, q + c) for q, c in base]
    before = h100_8b.cost(batch, len(batch)).step_seconds
    longer = h100_8b.cost([*batch, BatchItem(extra, extra)], len(batch) + 1).step_seconds
    assert longer >= before
    if batch:  # a longer last chunk of the same request, too
        q, c = batch[-1]
        grown = [*batch[:-1], BatchItem(q + extra, c + extra)]
        assert h100_8b.cost(grown, len(batch)).step_seconds >= before


def _seconds(batch, num_sampled):
    return {
        name: StepCostModel(LLAMA_8B, GPUS[name]).cost(batch, num_sampled).step_seconds
        for name in GPUS
    }


def test_decode_steps_rank_gpus_by_bandwidth_and_prefills_by_flops():
    decode = _seconds([BatchItem(1, 2000)] * 64, 64)
    assert decode["l40s"] > decode["a100"] > decode["h100"] > decode["h200"]
    # NOTE: the L40S's dense bf16 peak (362 TFLOPS) is above the A100's (312), so a
    # compute-bound prefill is faster on it, while the H100 and H200 share one peak.
    prefill = _seconds([BatchItem(4096, 4096)], 1)
    assert prefill["a100"] > prefill["l40s"] > prefill["h100"] == prefill["h200"]


@pytest.mark.parametrize(
    ("knobs", "named"),
    [
        ({"compute": 0.0}, "compute_efficiency"),
        ({"bandwidth": 1.5}, "bandwidth_efficiency"),
        ({"step_overhead_seconds": -1.0}, "step_overhead_seconds"),
        ({"step_overhead_seconds": float("nan")}, "step_overhead_seconds"),
    ],
)
def test_bad_efficiency_names_the_knob(knobs, named):
    with pytest.raises(ConfigError, match=named):
        Efficiency(**knobs)


def test_an_unsimulated_dtype_is_refused():
    with pytest.raises(ConfigError, match="dtype='float32'"):
        StepCostModel(LLAMA_8B, H100, "float32")
