"""The calibration fit: exact on step times the step model itself generated, robust to a
stalled step, and a clear error for a grid that cannot determine the factors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model.presets import PRESETS
from engine.sim.calibrate_fit import FitError, StepSample, fit_roofline
from engine.sim.specs import GpuSpec
from engine.sim.step_cost import BatchItem, Efficiency, StepCostModel

TINY = PRESETS["tiny"].config
PEAK_FLOPS, PEAK_BANDWIDTH = 50e9, 20e9
DEVICE = GpuSpec("local", "test CPU", {"float32": PEAK_FLOPS}, PEAK_BANDWIDTH, 10**10, "test")
NOMINAL = StepCostModel(TINY, DEVICE, "float32", Efficiency(1.0, 1.0, 0.0))


def _grid() -> list[tuple[list[BatchItem], int]]:
    """Prefill chunks (compute-bound) and decodes of several batch sizes (memory-bound at
    small batch and long context): both sides of the roofline are visited."""
    batches = [([BatchItem(q, c)], 1) for q in (32, 128, 512) for c in (q, 4 * q)]
    batches += [([BatchItem(1, c)] * b, b) for b in (1, 8, 32) for c in (64, 512, 1024)]
    return batches


def _samples(truth: Efficiency, grid=None) -> list[StepSample]:
    model = StepCostModel(TINY, DEVICE, "float32", truth)
    samples = []
    for batch, sampled in grid or _grid():
        priced = NOMINAL.cost(batch, sampled)
        seconds = model.cost(batch, sampled).step_seconds
        samples.append(StepSample(priced.flops, priced.bytes, seconds, len(batch)))
    return samples


def _efficiency(fit) -> tuple[float, float, float, float]:
    return (
        1 / fit.seconds_per_flop / PEAK_FLOPS,
        1 / fit.seconds_per_byte / PEAK_BANDWIDTH,
        fit.overhead_seconds,
        fit.request_overhead_seconds,
    )


@settings(max_examples=25, deadline=None)
@given(
    compute=st.floats(0.05, 1.0),
    bandwidth=st.floats(0.05, 1.0),
    overhead=st.floats(0.0, 0.01),
    per_request=st.floats(0.0, 0.001),
)
def test_the_fit_recovers_the_factors_that_generated_the_steps(
    compute, bandwidth, overhead, per_request
):
    truth = Efficiency(compute, bandwidth, overhead, per_request)
    samples = _samples(truth)
    fit = fit_roofline(samples)
    memory_bound = [
        StepCostModel(TINY, DEVICE, "float32", truth).cost(b, s).is_compute_bound is False
        for b, s in _grid()
    ]
    fitted = _efficiency(fit)
    assert fitted[0] == pytest.approx(compute, rel=1e-6)
    assert fitted[2] == pytest.approx(overhead, rel=1e-6, abs=1e-9)
    assert fitted[3] == pytest.approx(per_request, rel=1e-6, abs=1e-9)
    if any(memory_bound):
        assert fitted[1] == pytest.approx(bandwidth, rel=1e-6)
    else:
        # NOTE: no step on the memory side: the fit can only bound the bandwidth from below
        assert fit.bandwidth_bounded_only and fitted[1] <= bandwidth * (1 + 1e-6)
    assert max(abs(r) for r in fit.relative_residuals) < 1e-6


def test_a_stalled_step_barely_moves_the_fit():
    truth = Efficiency(0.3, 0.4, 0.003, 0.0002)
    samples = _samples(truth)
    stalled = samples[4]
    samples[4] = StepSample(stalled.flops, stalled.bytes, stalled.seconds * 6, 1)
    compute, bandwidth, overhead, _ = _efficiency(fit_roofline(samples))
    assert compute == pytest.approx(0.3, rel=0.05)
    assert bandwidth == pytest.approx(0.4, rel=0.05)
    assert overhead == pytest.approx(0.003, rel=0.1)


def test_a_grid_with_one_side_only_reports_the_other_as_a_bound():
    # NOTE: big prefill chunks only: everything compute-bound
    grid = [([BatchItem(q, q)], 1) for q in (256, 512, 1024, 2048)]
    grid += [([BatchItem(q, 2 * q)] * 2, 2) for q in (256, 1024)]
    fit = fit_roofline(_samples(Efficiency(0.5, 0.5, 0.002), grid))
    assert fit.bandwidth_bounded_only and fit.num_memory_bound == 0
    assert 1 / fit.seconds_per_flop / PEAK_FLOPS == pytest.approx(0.5, rel=1e-6)


@pytest.mark.parametrize(
    ("samples", "says"),
    [
        ([StepSample(1e6, 1e6, 0.01)] * 2, "2 measured steps: the fit needs at least 3"),
        ([StepSample(1e6, 2e6, 0.01)] * 10, "1 distinct batch shapes"),
        (
            [StepSample(1e6 * k, 2e6 * k, 0.01 * k, k) for k in range(1, 8)],
            "same FLOPs per byte",
        ),
        (
            [StepSample(1e6 * k, 2e6 + k, -0.01, k) for k in range(1, 8)],
            "not a positive number",
        ),
        ([StepSample(0.0, 1e6 + k, 0.01, k) for k in range(1, 8)], "computed nothing"),
    ],
)
def test_a_degenerate_grid_is_a_clear_error(samples, says):
    with pytest.raises(FitError, match=says):
        fit_roofline(samples)


def test_steps_that_shrink_as_batches_grow_are_refused():
    samples = [StepSample(1e6 * k, 1e6 + 1e5 * k * k, 1.0 / k, 1) for k in range(1, 9)]
    with pytest.raises(FitError, match="non-positive"):
        fit_roofline(samples)
