"""Percentile fidelity: how far p50/p95/p99 taken from histograms are from the exact values.

Classic buckets use vLLM 0.33's TTFT and ITL layouts (``shared/reference/engine-metrics.md``
§3); exponential histograms use scales 2-5. Each trial draws a seeded sample from a realistic
latency distribution, records it on four "replicas" (classic: the same layout; exponential:
scales s, s+1, s+2, s+3), merges them with ``slo`` and compares the quantile against the exact
one (numpy's ``inverted_cdf``: the smallest observation with at least q·n at or below it).

Targets: the classic bucket interval contains the exact value in 100 % of cases; exponential
errors stay within (base - 1) / (base + 1).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

import slo

TTFT_BOUNDS = (
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
)
ITL_BOUNDS = (
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
)
PERCENTILES = (0.50, 0.95, 0.99)
NUM_TRIALS = 20
NUM_OBSERVATIONS = 10_000
NUM_REPLICAS = 4
SCALES = (2, 3, 4, 5)
SEED = 20_260_101

Sampler = Callable[[np.random.Generator, int], np.ndarray]


def _mixture(*parts: tuple[float, float, float]) -> Sampler:
    """Lognormal mixture of (weight, median_seconds, sigma) components."""

    def draw(rng: np.random.Generator, n: int) -> np.ndarray:
        weights = np.array([w for w, _, _ in parts])
        which = rng.choice(len(parts), size=n, p=weights / weights.sum())
        medians = np.array([m for _, m, _ in parts])[which]
        sigmas = np.array([s for _, _, s in parts])[which]
        return medians * np.exp(sigmas * rng.standard_normal(n))

    return draw


DISTRIBUTIONS: dict[str, tuple[tuple[float, ...], dict[str, Sampler]]] = {
    "TTFT": (
        TTFT_BOUNDS,
        {
            "lognormal mix": _mixture((0.85, 0.12, 0.6), (0.15, 0.9, 0.5)),
            "bimodal + preemption tail": _mixture((0.93, 0.15, 0.4), (0.07, 6.0, 0.6)),
            "beyond highest bucket": _mixture((0.9, 1200.0, 0.5), (0.1, 6000.0, 0.3)),
        },
    ),
    "ITL": (
        ITL_BOUNDS,
        {
            "lognormal mix": _mixture((0.9, 0.025, 0.25), (0.1, 0.08, 0.4)),
            "bimodal + preemption tail": _mixture((0.97, 0.03, 0.3), (0.03, 2.5, 0.5)),
            "beyond highest bucket": _mixture((0.95, 0.04, 0.3), (0.05, 150.0, 0.4)),
        },
    ),
}


def _exact(values: np.ndarray, q: float) -> float:
    return float(np.quantile(values, q, method="inverted_cdf"))


def _classic_rows(rng: np.random.Generator) -> tuple[list[tuple], int, int]:
    rows, contained, cases = [], 0, 0
    for family, (bounds, samplers) in DISTRIBUTIONS.items():
        for name, sampler in samplers.items():
            stats = {
                q: {"exact": [], "err": [], "width": [], "in": 0, "capped": 0} for q in PERCENTILES
            }
            for _ in range(NUM_TRIALS):
                values = sampler(rng, NUM_OBSERVATIONS)
                replicas = np.array_split(values, NUM_REPLICAS)
                merged = slo.merge_histograms(
                    slo.ClassicHistogram.from_observations(r.tolist(), bounds) for r in replicas
                )
                for q in PERCENTILES:
                    exact, result, s = _exact(values, q), merged.quantile(q), stats[q]
                    s["exact"].append(exact)
                    s["err"].append(abs(result.value - exact) / exact)
                    s["width"].append((result.upper_bound - result.lower_bound) / exact)
                    s["in"] += result.lower_bound <= exact <= result.upper_bound
                    s["capped"] += result.in_inf_bucket
            for q, s in stats.items():
                contained, cases = contained + s["in"], cases + NUM_TRIALS
                rows.append(
                    (
                        family,
                        name,
                        f"p{round(q * 100)}",
                        float(np.median(s["exact"])),
                        float(np.median(s["err"])),
                        max(s["err"]),
                        float(np.median(s["width"])),
                        s["in"],
                        s["capped"],
                    )
                )
    return rows, contained, cases


def _exponential_rows(rng: np.random.Generator) -> tuple[list[tuple], int, int]:
    rows, within, cases = [], 0, 0
    samplers = [(f, n, s) for f, (_, group) in DISTRIBUTIONS.items() for n, s in group.items()]
    draws = {(f, n): [s(rng, NUM_OBSERVATIONS) for _ in range(NUM_TRIALS)] for f, n, s in samplers}
    for scale in SCALES:
        for family, name, _ in samplers:
            worst = dict.fromkeys(PERCENTILES, 0.0)
            inside = 0
            for values in draws[(family, name)]:
                replicas = np.array_split(values, NUM_REPLICAS)
                merged = slo.merge_exponential_histograms(
                    slo.ExponentialHistogram.from_observations(r.tolist(), min(scale + i, 20))
                    for i, r in enumerate(replicas)
                )
                for q in PERCENTILES:
                    exact = _exact(values, q)
                    result = slo.exponential_quantile(merged, q)
                    error = abs(result.value - exact) / exact
                    worst[q] = max(worst[q], error)
                    inside += error <= result.relative_error_bound * (1 + 1e-12)
            bound = slo.ExponentialHistogram(scale=scale).relative_error_bound
            within, cases = within + inside, cases + NUM_TRIALS * len(PERCENTILES)
            rows.append((scale, bound, family, name, *worst.values(), inside))
    return rows, within, cases


def _fmt(x: float) -> str:
    if math.isinf(x):
        return "inf"
    return f"{x:.3g}" if abs(x) < 1000 else f"{x:.0f}"


def main() -> None:
    rng = np.random.default_rng(SEED)
    print(
        f"seed {SEED}; {NUM_TRIALS} trials x {NUM_OBSERVATIONS} observations per distribution, "
        f"each merged from {NUM_REPLICAS} replicas; exact = inverted-CDF empirical quantile\n"
    )
    rows, contained, cases = _classic_rows(rng)
    print("Classic buckets (vLLM 0.33 layouts): relative error of histogram_quantile")
    header = (
        "layout",
        "distribution",
        "pct",
        "exact s",
        "err med",
        "err max",
        "width/exact",
        "in interval",
        "capped",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for family, name, pct, exact, err_med, err_max, width, inside, capped in rows:
        cells = (
            family,
            name,
            pct,
            _fmt(exact),
            f"{err_med:.1%}",
            f"{err_max:.1%}",
            _fmt(width),
            f"{inside}/{NUM_TRIALS}",
            f"{capped}/{NUM_TRIALS}",
        )
        print("| " + " | ".join(cells) + " |")
    print(
        f"\ninterval contained the exact value in {contained}/{cases} cases "
        f"({contained / cases:.0%})\n"
    )

    rows, within, cases = _exponential_rows(rng)
    print("Exponential histograms: worst relative error over trials vs the bound (base-1)/(base+1)")
    header = (
        "scale",
        "bound",
        "family",
        "distribution",
        "p50 max",
        "p95 max",
        "p99 max",
        "within bound",
    )
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    for scale, bound, family, name, p50, p95, p99, inside in rows:
        cells = (
            str(scale),
            f"{bound:.2%}",
            family,
            name,
            f"{p50:.2%}",
            f"{p95:.2%}",
            f"{p99:.2%}",
            f"{inside}/{NUM_TRIALS * len(PERCENTILES)}",
        )
        print("| " + " | ".join(cells) + " |")
    print(
        f"\nexponential estimates within their bound in {within}/{cases} cases "
        f"({within / cases:.0%})"
    )


if __name__ == "__main__":
    main()
