"""Sweeps as frames: a run's points as rows, their mean over repeats per (knob value, rate),
each knob value's knee, and a running sweep's progress. Pure: no Streamlit, no store.

Points are read defensively: a writer's ``summary`` is JSON (``loadgen.summary.summarize``'s
shape), and a figure it lacks, or holds as something other than a finite number, is ``NaN``
in the frame (a gap in a chart, ``—`` in a table), never an exception.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collectors.store.lab_records import JsonScalar, LabPoint, LabRun, LabRunStatus
from loadgen.lab_knee import DEFAULT_TARGET, knee_curves

#: DistServe's knee, as ``loadgen.sweep`` searches it and ``tailwatch sweep`` tables it: the
#: highest rate whose attainment is at or above this.
KNEE_ATTAINMENT = DEFAULT_TARGET
#: Columns of :func:`point_rows`: (column, path into the summary).
FIGURES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("attainment", ("slo_attainment",)),
    ("goodput", ("request_goodput",)),
    ("throughput", ("request_throughput",)),
    ("ttft_p50_ms", ("ttft_ms", "p50")),
    ("ttft_p95_ms", ("ttft_ms", "p95")),
    ("ttft_p99_ms", ("ttft_ms", "p99")),
    ("itl_p50_ms", ("itl_ms", "p50")),
    ("itl_p95_ms", ("itl_ms", "p95")),
    ("itl_p99_ms", ("itl_ms", "p99")),
    ("e2e_p95_ms", ("e2el_ms", "p95")),
    ("num_requests", ("num_scheduled",)),
)
FIGURE_COLUMNS = tuple(name for name, _ in FIGURES)
ROW_COLUMNS = ("value", "rate", "repeat", *FIGURE_COLUMNS)


def number(summary: Any, *path: str) -> float:
    """The finite number at ``path`` in a JSON mapping, else NaN (missing, null, a string,
    a bool, infinite)."""
    value = summary
    for key in path:
        if not isinstance(value, Mapping) or key not in value:
            return math.nan
        value = value[key]
    if isinstance(value, bool) or not isinstance(value, int | float):
        return math.nan
    return float(value) if math.isfinite(value) else math.nan


def value_label(run: LabRun, value: JsonScalar) -> str:
    """A knob value as the legend shows it: ``max_num_batched_tokens=512``; a rates-only
    sweep's one line is ``rates only``."""
    if run.sweep_knob is None:
        return "rates only"
    shown = value if isinstance(value, str) else json.dumps(value)
    return f"{run.sweep_knob}={shown}"


def value_order(run: LabRun, points: Sequence[LabPoint]) -> list[str]:
    """The lines in the run's planned order, then any value only the points name."""
    labels = [value_label(run, v) for v in run.knob_values]
    for point in points:
        label = value_label(run, point.knob_value)
        if label not in labels:
            labels.append(label)
    return labels or [value_label(run, None)]


def point_rows(run: LabRun, points: Sequence[LabPoint]) -> pd.DataFrame:
    """One row per point: ``value`` (its label), ``rate``, ``repeat`` and :data:`FIGURES`."""
    rows = [
        {
            "value": value_label(run, p.knob_value),
            "rate": float(p.rate),
            "repeat": int(p.repeat),
            **{name: number(p.summary, *path) for name, path in FIGURES},
        }
        for p in points
    ]
    return pd.DataFrame(rows, columns=list(ROW_COLUMNS))


def sweep_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """Each (value, rate)'s mean over its repeats (NaNs skipped), ``num_repeats`` beside;
    sorted by value then rate."""
    if rows.empty:
        return pd.DataFrame(columns=["value", "rate", "num_repeats", *FIGURE_COLUMNS])
    grouped = rows.groupby(["value", "rate"], sort=True)
    curve = grouped[list(FIGURE_COLUMNS)].mean()
    curve.insert(0, "num_repeats", grouped.size())
    return curve.reset_index()


def knees(run: LabRun, points: Sequence[LabPoint], order: Sequence[str]) -> dict[str, float | None]:
    """Each line's knee: the highest rate whose mean attainment over the repeats is at or
    above :data:`KNEE_ATTAINMENT` (``None``: no measured rate passes), by the rule
    ``tailwatch sweep``'s table uses (``loadgen.lab_knee``)."""
    by_line = {
        value_label(run, c.knob_value): c.knee_rate for c in knee_curves(points, KNEE_ATTAINMENT)
    }
    return {line: by_line.get(line) for line in order}


@dataclass(frozen=True)
class Progress:
    """A sweep's points done against planned; ``fraction`` in [0, 1] for ``st.progress``."""

    num_done: int
    num_planned: int

    @property
    def fraction(self) -> float:
        if self.num_planned <= 0:
            return 0.0
        return min(1.0, self.num_done / self.num_planned)

    @property
    def text(self) -> str:
        if self.num_planned <= 0:
            return f"{self.num_done} points measured (the run planned none)"
        return f"{self.num_done} of {self.num_planned} points measured"


def progress(run: LabRun, points: Sequence[LabPoint]) -> Progress:
    return Progress(len(points), int(run.num_planned_points or 0))


def status_text(run: LabRun) -> str:
    """``running``, ``finished``, ``failed: why``, ``interrupted``; ``simulated`` first when
    the engine was a simulation."""
    text = run.status.value
    if run.status == LabRunStatus.FAILED and run.error:
        text += f": {run.error}"
    return ("simulated · " if run.simulated else "") + text


def run_label(run: LabRun) -> str:
    """How a run is offered in a selectbox: ``#3 mnbt 512 vs 4096 · sim:… (simulated) ·
    finished``."""
    engine = run.target + (" (simulated)" if run.simulated else "")
    return f"#{run.id} {run.name} · {engine} · {run.status.value}"


def run_frame(runs: Sequence[LabRun]) -> pd.DataFrame:
    """The stored runs as a table, newest first (as given)."""
    rows = [
        {
            "id": r.id,
            "name": r.name,
            "engine": r.target,
            "simulated": "yes" if r.simulated else "no",
            "knob": r.sweep_knob or "—",
            "values": ", ".join(json.dumps(v) for v in r.knob_values) or "—",
            "rates": ", ".join(f"{x:g}" for x in r.rates) or "—",
            "repeats": r.num_repeats,
            "status": status_text(r),
            "created": pd.Timestamp(r.created_at, unit="s", tz="UTC"),
        }
        for r in runs
    ]
    return pd.DataFrame(rows)
