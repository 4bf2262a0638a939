"""The Mixtral-class MoE shape: parameters from all experts, FLOPs from the active ones,
bytes from the experts a step's tokens are expected to touch."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.sim.backend import build_sim_backend
from engine.sim.experts import Experts
from engine.sim.runner import VirtualClock
from engine.sim.specs import GPUS, SIM_MODELS
from engine.sim.step_cost import BatchItem, StepCostModel

MIXTRAL = SIM_MODELS["mixtral-8x7b"]
H200 = GPUS["h200"]
H, LAYERS, VOCAB = 4096, 32, 32000
EXPERT = 3 * H * 14336  # one expert's gate, up and down projections
ATTENTION = H * 128 * (2 * 32 + 2 * 8)
ROUTER = 8 * H


@pytest.fixture(scope="module")
def mixtral_h200() -> StepCostModel:
    return StepCostModel(MIXTRAL.shape, H200, experts=MIXTRAL.experts)


def test_published_parameter_counts():
    # Mistral AI: 46.7B parameters in all, 12.9B used per token.
    assert MIXTRAL.num_parameters() == pytest.approx(46.7e9, rel=1e-3)
    assert MIXTRAL.experts.active_parameters(MIXTRAL.shape) == pytest.approx(12.9e9, rel=2e-3)
    assert (
        MIXTRAL.num_parameters()
        == 2 * VOCAB * H + LAYERS * (ATTENTION + ROUTER + 8 * EXPERT + 2 * H) + H
    )


def test_expected_experts_by_hand():
    experts = Experts(num_local_experts=8, num_experts_per_tok=2)
    assert experts.expected_distinct_experts(0) == 0.0
    assert experts.expected_distinct_experts(1) == pytest.approx(2.0)  # k of E
    assert experts.expected_distinct_experts(2) == pytest.approx(8 * (1 - 0.75**2))  # 3.5
    assert experts.expected_distinct_experts(2048) == pytest.approx(8.0)  # all of them
    assert Experts(4, 4).expected_distinct_experts(1) == pytest.approx(4.0)


@settings(max_examples=40, deadline=None)
@given(e=st.integers(1, 64), k=st.integers(1, 64), t=st.integers(1, 10_000))
def test_expected_experts_lie_between_k_and_e_and_grow(e, k, t):
    if k > e:
        with pytest.raises(ConfigError, match=f"num_experts_per_tok={k}"):
            Experts(e, k)
        return
    experts = Experts(e, k)
    touched = experts.expected_distinct_experts(t)
    assert k - 1e-9 <= touched <= e + 1e-9
    assert experts.expected_distinct_experts(t + 1) >= touched - 1e-12


def test_one_decode_reads_two_experts_and_counts_active_flops(mixtral_h200):
    c = 1001
    cost = mixtral_h200.cost([BatchItem(1, c)], num_sampled=1)
    non_expert = VOCAB * H + LAYERS * (ATTENTION + ROUTER + 2 * H) + H  # less the input table
    kv_per_token = 2 * LAYERS * 8 * 128 * 2
    expected = (non_expert + LAYERS * 2 * EXPERT) * 2 + H * 2 + kv_per_token * (c + 1)
    assert cost.bytes == pytest.approx(expected)
    matmul = LAYERS * (ATTENTION + ROUTER + 2 * EXPERT + 2 * H) + H
    flops = 2 * matmul + 2 * VOCAB * H + 4 * LAYERS * 32 * 128 * c
    assert cost.flops == pytest.approx(flops)
    assert not cost.is_compute_bound


def test_a_long_prefill_reads_every_expert(mixtral_h200):
    cost = mixtral_h200.cost([BatchItem(2048, 2048)], num_sampled=1)
    every_weight = (MIXTRAL.num_parameters() - VOCAB * H) * 2
    weights_read = cost.bytes - H * 2 * 2048 - 2 * LAYERS * 8 * 128 * 2 * (2048 + 2048)
    assert weights_read == pytest.approx(every_weight, rel=1e-9)


def test_the_pool_counts_every_expert_and_tp_makes_room():
    # 141 GB x 0.9 less 93.4 GB of weights (all 8 experts) less 10%, at 128 KiB a token
    one = build_sim_backend(EngineConfig(model="sim:mixtral-8x7b@h200"), VirtualClock())
    allowance = int(141e9 * 0.9) - MIXTRAL.num_parameters() * 2
    assert one.num_gpu_blocks == (allowance - allowance // 10) // (16 * 131072)
    two = EngineConfig(model="sim:mixtral-8x7b@h100", tensor_parallel_size=2)
    assert build_sim_backend(two, VirtualClock()).num_gpu_blocks > one.num_gpu_blocks


def test_a_dense_model_is_unchanged_by_the_moe_path():
    shape = SIM_MODELS["llama-3.1-8b"].shape
    batch = [BatchItem(1, 500)] * 8
    dense = StepCostModel(shape, H200).cost(batch, 8)
    assert dense == StepCostModel(shape, H200, experts=None).cost(batch, 8)
    # one expert chosen of one: every token touches it, as a dense MLP
    single = StepCostModel(shape, H200, experts=Experts(1, 1)).cost(batch, 8)
    assert single.flops == pytest.approx(dense.flops + 2 * 8 * 32 * H)  # + the 1 x h router
    assert single.bytes == pytest.approx(dense.bytes + 32 * H * 2)
