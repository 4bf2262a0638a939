"""A/B of two lab measurements: each side is one (run, knob value, rate) with its repeats; the
table puts the two side by side with the difference, its bootstrap interval
(``slo.bootstrap_difference`` over the points' per-request samples and across repeats) and a
verdict. Pure: no Streamlit, no store.

Verdicts: ``exceeds run-to-run noise`` (both sides have :data:`MIN_REPEATS` or more repeats
and the interval excludes zero), ``within noise`` (it does not), ``exceeds sampling noise``
(fewer repeats on a side: the interval excludes zero but run-to-run noise was not measured;
re-run with more repeats), ``no samples`` (a side stored none of that figure).

NOTE: a percentile bootstrap over two repeats sees at most three resampled means, so it
understates their spread: two repeats are not enough to call a difference bigger than
run-to-run noise.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from collectors.store.lab_records import LabPoint
from console.knob_lab.frames import number
from slo import SLOError, Statistic, bootstrap_differences

EXCEEDS_RUN_TO_RUN = "exceeds run-to-run noise"
WITHIN_NOISE = "within noise"
#: Repeats a side needs before the interval speaks for run-to-run noise.
MIN_REPEATS = 3
EXCEEDS_SAMPLING = (
    f"exceeds sampling noise (under {MIN_REPEATS} repeats a side: run-to-run noise not measured)"
)
NO_SAMPLES = "no samples"
NO_NOISE_ESTIMATE = (
    f"under {MIN_REPEATS} repeats a side: no noise estimate (--repeats {MIN_REPEATS})"
)
#: (figure, samples key, statistic): per-request figures, from each point's ``samples``.
SAMPLE_FIGURES: tuple[tuple[str, str, Statistic], ...] = (
    ("TTFT p50 ms", "ttft_ms", Statistic(0.5)),
    ("TTFT p95 ms", "ttft_ms", Statistic(0.95)),
    ("ITL p95 ms", "itl_ms", Statistic(0.95)),
    ("ITL p99 ms", "itl_ms", Statistic(0.99)),
    ("E2E p95 ms", "e2e_ms", Statistic(0.95)),
)
#: (figure, summary path): one number per point, compared across repeats (mean).
REPEAT_FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("goodput req/s", ("request_goodput",)),
    ("SLO attainment", ("slo_attainment",)),
)
NUM_RESAMPLES = 1_000
SEED = 0
#: Values a side a bootstrap draws from (thinned evenly past this): a sweep keeps up to
#: 5,000 ITL gaps a point, and 1,000 resamples of 10,000 took ~1.5 s per render (0.4 s
#: at 2,000).
MAX_VALUES = 2_000


#: ``(run id, value label, rate)``: what picks a side's points again (a cache key).
SideKey = tuple[int, str, float]


@dataclass(frozen=True)
class Side:
    """One side of an A/B: its label and the points (repeats) it holds."""

    label: str
    points: tuple[LabPoint, ...]
    is_simulated: bool = False
    #: What picks the points again (``None``: a side built from points alone).
    key: SideKey | None = None


def side_points(points: Sequence[LabPoint], knob_value, rate: float) -> tuple[LabPoint, ...]:
    """The repeats of one (knob value, rate) of a run."""
    return tuple(p for p in points if p.knob_value == knob_value and p.rate == rate)


def _samples(side: Side, key: str) -> list[list[float]]:
    out = []
    for point in side.points:
        values = point.samples.get(key) if hasattr(point.samples, "get") else None
        if isinstance(values, list | tuple):
            out.append(
                [float(v) for v in values if isinstance(v, int | float) and math.isfinite(v)]
            )
    return [v for v in out if v]


def verdict(interval) -> str:
    if not interval.excludes_zero:
        return WITHIN_NOISE
    enough = min(interval.num_repeats_a, interval.num_repeats_b) >= MIN_REPEATS
    return EXCEEDS_RUN_TO_RUN if enough else EXCEEDS_SAMPLING


def _blank(figure: str, a: list, b: list) -> dict:
    return {"figure": figure, "A": math.nan, "B": math.nan, "B − A": math.nan,
            "B vs A": math.nan, "interval low": math.nan, "interval high": math.nan,
            "repeats (A, B)": f"{len(a)}, {len(b)}", "verdict": NO_SAMPLES}  # fmt: skip


def _rows(
    figures: list[str],
    a: list[list[float]],
    b: list[list[float]],
    statistics: list[Statistic],
    *,
    needs_repeats: bool = False,
) -> list[dict]:
    """One row per ``(figure, statistic)`` of the same two samples (one set of resamples)."""
    rows = [_blank(figure, a, b) for figure in figures]
    if not a or not b:
        return rows
    if needs_repeats and min(len(a), len(b)) < MIN_REPEATS:
        # NOTE: one number a side has no spread to resample: any difference would "exceed".
        for row, stat in zip(rows, statistics, strict=True):
            value_a, value_b = (stat.of(np.concatenate(side)) for side in (a, b))
            row.update({"A": value_a, "B": value_b, "B − A": value_b - value_a,
                        "B vs A": (value_b - value_a) / value_a if value_a else math.nan,
                        "verdict": NO_NOISE_ESTIMATE})  # fmt: skip
        return rows
    try:
        intervals = bootstrap_differences(
            a, b, statistics, num_resamples=NUM_RESAMPLES, seed=SEED, max_values=MAX_VALUES
        )
    except SLOError as error:  # NOTE: bad stored samples are a row's message, not a trace
        for row in rows:
            row["verdict"] = f"not compared: {error}"
        return rows
    for row, interval in zip(rows, intervals, strict=True):
        row.update({
            "A": interval.value_a, "B": interval.value_b, "B − A": interval.estimate,
            "B vs A": interval.relative, "interval low": interval.low,
            "interval high": interval.high, "verdict": verdict(interval),
        })  # fmt: skip
    return rows


def ab_frame(a: Side, b: Side) -> pd.DataFrame:
    """One row per figure: A, B, B − A, (B − A) / A, the 95% interval of B − A and the
    verdict. Per-request figures resample requests within repeats and the repeats
    themselves (the figures of one samples key share their resamples); goodput and
    attainment (one number per point) resample the repeats."""
    by_key: dict[str, list[tuple[str, Statistic]]] = {}
    for figure, key, stat in SAMPLE_FIGURES:
        by_key.setdefault(key, []).append((figure, stat))
    found: dict[str, dict] = {}
    for key, chosen in by_key.items():
        figures, stats = [f for f, _ in chosen], [s for _, s in chosen]
        for row in _rows(figures, _samples(a, key), _samples(b, key), stats):
            found[row["figure"]] = row
    rows = [found[figure] for figure, _, _ in SAMPLE_FIGURES]
    for figure, path in REPEAT_FIGURES:
        values_a = [[v] for v in (number(p.summary, *path) for p in a.points) if math.isfinite(v)]
        values_b = [[v] for v in (number(p.summary, *path) for p in b.points) if math.isfinite(v)]
        rows += _rows([figure], values_a, values_b, [Statistic()], needs_repeats=True)
    return pd.DataFrame(rows)


def headline(frame: pd.DataFrame) -> tuple[str, list[str]]:
    """``(verdict, figures)``: ``exceeds run-to-run noise`` with the figures that do, else
    ``exceeds sampling noise`` with those, else ``within noise`` (or ``no samples`` when
    nothing could be compared)."""
    for kind in (EXCEEDS_RUN_TO_RUN, EXCEEDS_SAMPLING):
        hits = frame.loc[frame["verdict"] == kind, "figure"].tolist()
        if hits:
            return kind, hits
    if (frame["verdict"] == WITHIN_NOISE).any():
        return WITHIN_NOISE, []
    return NO_SAMPLES, []
