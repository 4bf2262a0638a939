"""Replays against production: each stored replay point's ``summary`` is
``{"replay": <summary>, "production": <summary>}`` (``loadgen.summary.summarize``'s shape);
the frame puts TTFT, ITL and goodput side by side. Pure: no Streamlit, no store.

A point of another shape is not guessed at: :func:`replay_frame` says what it expected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from collectors.store.lab_records import LabPoint, LabRun
from console.lab_frames import number, value_label

REPLAY_KEY, PRODUCTION_KEY = "replay", "production"
#: (figure, summary path)
FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("TTFT p50 ms", ("ttft_ms", "p50")),
    ("TTFT p95 ms", ("ttft_ms", "p95")),
    ("TTFT p99 ms", ("ttft_ms", "p99")),
    ("ITL p50 ms", ("itl_ms", "p50")),
    ("ITL p95 ms", ("itl_ms", "p95")),
    ("ITL p99 ms", ("itl_ms", "p99")),
    ("goodput req/s", ("request_goodput",)),
    ("SLO attainment", ("slo_attainment",)),
    ("requests", ("num_scheduled",)),
)
EXPECTED_SHAPE = (
    'each replay point\'s summary should be {"replay": <summary>, "production": <summary>} '
    "(loadgen.summary.summarize's shape)"
)


@dataclass(frozen=True)
class ReplayComparison:
    """``frame`` (one row per figure and point) or ``problem`` (why it could not be read)."""

    frame: pd.DataFrame
    problem: str = ""


def _is_summary(value: object) -> bool:
    return isinstance(value, Mapping) and any(
        isinstance(value.get(k), Mapping | int | float) for k in ("ttft_ms", "request_goodput")
    )


def replay_frame(run: LabRun, points: Sequence[LabPoint]) -> ReplayComparison:
    """``candidate, figure, production, replay, replay − production, replay vs production``
    for every point of the shape above; a point of another shape is a ``problem`` naming it
    (the others are still shown)."""
    rows, bad = [], []
    for i, point in enumerate(points):
        summary = point.summary
        if not (
            isinstance(summary, Mapping)
            and _is_summary(summary.get(REPLAY_KEY))
            and _is_summary(summary.get(PRODUCTION_KEY))
        ):
            keys = sorted(summary) if isinstance(summary, Mapping) else type(summary).__name__
            bad.append(f"point {i + 1} has {keys}")
            continue
        candidate = value_label(run, point.knob_value)
        if run.sweep_knob is None:
            candidate = "the run's knobs"
        for figure, path in FIGURES:
            production = number(summary[PRODUCTION_KEY], *path)
            replay = number(summary[REPLAY_KEY], *path)
            diff = replay - production
            rows.append(
                {
                    "candidate": candidate,
                    "figure": figure,
                    "production": production,
                    "replay": replay,
                    "replay − production": diff,
                    "replay vs production": diff / production
                    if production and math.isfinite(production)
                    else math.nan,
                }
            )
    frame = pd.DataFrame(
        rows,
        columns=["candidate", "figure", "production", "replay", "replay − production",
                 "replay vs production"],
    )  # fmt: skip
    problem = ""
    if bad:
        problem = f"{len(bad)} point(s) of a shape this page does not know ({'; '.join(bad[:3])}): {EXPECTED_SHAPE}"
    return ReplayComparison(frame, problem)
