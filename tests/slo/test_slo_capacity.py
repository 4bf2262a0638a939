"""Capacity planning, golden values from the issue."""

from __future__ import annotations

import pytest

import slo

KIB, GIB = 1024, 1024**3


def test_golden_kv_bytes_per_token() -> None:
    per_token = slo.kv_cache_bytes_per_token(40, 8, 128, 2)
    assert per_token == 160 * KIB
    assert 8192 * per_token == 1.25 * GIB


def test_golden_capacity_plan() -> None:
    budget = slo.kv_cache_budget_bytes(80 * GIB, 0.9, 28 * GIB, 4 * GIB)
    assert budget == 40 * GIB  # 72 GiB usable - 28 GiB weights - 4 GiB activations
    tokens = slo.tokens_that_fit(budget, 160 * KIB)
    assert tokens == 262_144  # "about 262,000"
    assert slo.sequences_that_fit(tokens, 4000) == 65
    assert slo.sequences_that_fit(tokens, 8000) == 32
    demand = slo.littles_law_concurrency(3, 12)
    assert demand == 36
    assert slo.replicas_needed(demand, 24, num_spares=1) == 3  # ceil(36 / 24) = 2, + 1 spare


def test_plan_capacity_chains_the_same_figures() -> None:
    plan = slo.plan_capacity(
        num_layers=40,
        num_kv_heads=8,
        head_dim=128,
        bytes_per_value=2,
        gpu_memory_bytes=80 * GIB,
        gpu_memory_utilization=0.9,
        weights_bytes=28 * GIB,
        activation_bytes=4 * GIB,
        tokens_per_sequence=4000,
        arrival_rate_per_second=3,
        mean_latency_seconds=12,
        measured_ceiling_concurrency=24,
    )
    assert plan == slo.CapacityPlan(160 * KIB, 40 * GIB, 262_144, 65, 36, 3)


def test_block_size_rounds_to_whole_blocks() -> None:
    assert slo.tokens_that_fit(40 * GIB, 160 * KIB, block_size=16) == 262_144
    assert slo.tokens_that_fit(1000 * 160 * KIB, 160 * KIB, block_size=16) == 992
    assert slo.sequences_that_fit(262_144, 4001, block_size=16) == 65  # 251 blocks each
    assert slo.sequences_that_fit(262_144, 4097, block_size=16) == 63  # 257 blocks each


def test_replicas_edges() -> None:
    assert slo.replicas_needed(48, 24, num_spares=0) == 2  # exactly two full replicas
    assert slo.replicas_needed(0.1 * 3 * 80, 24, num_spares=0) == 1  # 24.000000000000004 / 24
    assert slo.replicas_needed(48.5, 24, num_spares=2) == 5


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: slo.kv_cache_bytes_per_token(0, 8, 128, 2), "num_layers"),
        (lambda: slo.kv_cache_bytes_per_token(40, 8.5, 128, 2), "num_kv_heads"),
        (lambda: slo.kv_cache_budget_bytes(80 * GIB, 0.9, 70 * GIB, 4 * GIB), "quantize"),
        (lambda: slo.kv_cache_budget_bytes(80 * GIB, 1.5, 1, 1), "gpu_memory_utilization"),
        (lambda: slo.replicas_needed(10, 0), "measured_ceiling_concurrency"),
        (lambda: slo.replicas_needed(10, 5, num_spares=-1), "num_spares"),
        (lambda: slo.littles_law_concurrency(-1, 2), "arrival_rate_per_second"),
        (lambda: slo.sequences_that_fit(100, 0), "tokens_per_sequence"),
    ],
)
def test_errors_name_the_bad_input(call, match) -> None:
    with pytest.raises(slo.SLOError, match=match):
        call()
