"""Replays against production: the frame puts TTFT, ITL, TPOT and goodput of each stored
replay point side by side with what production saw. Pure: no Streamlit, no store.

Two shapes of a point's ``summary`` are read (each side ``loadgen.summary.summarize``'s):
``{"replay": <summary>, "production": <summary>}``, and what ``tailwatch replay`` writes —
the replay's summary at the top level (as every lab point has), ``"production"`` beside it
and ``"replay"`` holding how it ran (``speed``, ``virtual_time``, ``timed_at``, ``replicas``,
``route``). A point of
another shape is not guessed at: :func:`replay_frame` says what it expected.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from collectors.store.lab_records import LabPoint, LabRun
from console.knob_lab.frames import number, value_label

REPLAY_KEY, PRODUCTION_KEY = "replay", "production"
#: What a ``tailwatch replay`` point says of how it ran, shown under the table.
NOTE_KEYS = ("speed", "virtual_time", "timed_at", "replicas", "route", "run_seconds")
#: (figure, summary path)
FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("TTFT p50 ms", ("ttft_ms", "p50")),
    ("TTFT p95 ms", ("ttft_ms", "p95")),
    ("TTFT p99 ms", ("ttft_ms", "p99")),
    ("ITL p50 ms", ("itl_ms", "p50")),
    ("ITL p95 ms", ("itl_ms", "p95")),
    ("ITL p99 ms", ("itl_ms", "p99")),
    ("TPOT p50 ms", ("tpot_ms", "p50")),
    ("TPOT p95 ms", ("tpot_ms", "p95")),
    ("goodput req/s", ("request_goodput",)),
    ("SLO attainment", ("slo_attainment",)),
    ("requests", ("num_scheduled",)),
)
EXPECTED_SHAPE = (
    'each replay point\'s summary should be {"replay": <summary>, "production": <summary>}, '
    'or the replay\'s summary with "production": <summary> beside it '
    "(loadgen.summary.summarize's shape)"
)


@dataclass(frozen=True)
class ReplayComparison:
    """``frame`` (one row per figure and point) or ``problem`` (why it could not be read)."""

    frame: pd.DataFrame
    problem: str = ""
    #: How each point ran, when the writer said (``speed``, ``virtual_time``, ``timed_at``,
    #: ``replicas``, ``route``).
    notes: tuple[str, ...] = ()


def _is_summary(value: object) -> bool:
    return isinstance(value, Mapping) and any(
        isinstance(value.get(k), Mapping | int | float) for k in ("ttft_ms", "request_goodput")
    )


def _sides(summary: object) -> tuple[Mapping, Mapping] | None:
    """``(replay, production)`` summaries of a point, in either shape; ``None``: neither."""
    if not isinstance(summary, Mapping) or not _is_summary(summary.get(PRODUCTION_KEY)):
        return None
    if _is_summary(summary.get(REPLAY_KEY)):
        return summary[REPLAY_KEY], summary[PRODUCTION_KEY]
    if _is_summary(summary):
        return summary, summary[PRODUCTION_KEY]
    return None


def replay_frame(run: LabRun, points: Sequence[LabPoint]) -> ReplayComparison:
    """``candidate, figure, production, replay, replay − production, replay vs production``
    for every point of the shape above; a point of another shape is a ``problem`` naming it
    (the others are still shown)."""
    rows, bad, notes = [], [], []
    for i, point in enumerate(points):
        summary = point.summary
        sides = _sides(summary)
        if sides is None:
            keys = sorted(summary) if isinstance(summary, Mapping) else type(summary).__name__
            bad.append(f"point {i + 1} has {keys}")
            continue
        replayed, produced = sides
        how = summary.get(REPLAY_KEY) if replayed is summary else None
        if isinstance(how, Mapping):
            shown = ", ".join(f"{k}={how[k]}" for k in NOTE_KEYS if how.get(k) is not None)
            if shown:
                notes.append(f"point {i + 1}: {shown}")
        candidate = value_label(run, point.knob_value)
        if run.sweep_knob is None:
            candidate = "the run's knobs"
        for figure, path in FIGURES:
            production = number(produced, *path)
            replay = number(replayed, *path)
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
    return ReplayComparison(frame, problem, tuple(notes))
