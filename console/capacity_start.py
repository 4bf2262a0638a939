"""Where the Capacity page's workload inputs start: the fleet's own traffic over the selected
range, the newest finished sweep's knee for the measured ceiling, else the Q39 worked example
(docs/slo.md, "Capacity"), each with a caption that says which. Pure: no Streamlit, no store.

The knee is a *rate* (the highest offered req/s whose SLO attainment held, ``loadgen.lab_knee``);
the planner's ceiling is a *concurrency* (sequences one replica holds within its SLO). By
Little's law they are one figure: the knee rate × the mean e2e latency measured at the knee.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from collectors.store.lab_records import LabPoint, LabRun
from console.knob_lab.frames import KNEE_ATTAINMENT, value_label
from console.knob_lab.headroom import finished_sweeps, sweep_time
from loadgen.lab_knee import knee_curves

#: The worked example of docs/slo.md, "Capacity": 4,000 tokens, 3 req/s × 12 s, ceiling 24.
Q39_TOKENS = 4000
Q39_ARRIVAL = 3.0
Q39_LATENCY = 12.0
Q39_CEILING = 24.0
Q39 = "Q39 worked example"


@dataclass(frozen=True)
class Start:
    """A widget's starting ``value``, the ``caption`` that says where it came from, and
    ``source``: a stamp for the widget's key (a new source is a fresh widget, so a new start;
    the same source keeps the user's edit)."""

    value: float
    caption: str
    source: str


def q39(value: float, why: str) -> Start:
    return Start(value, f"{Q39}: {why}", "q39")


@dataclass(frozen=True)
class Fleet:
    """The range's increases: finished requests (``requests_total``), their prompt and
    generated tokens, the e2e histogram's count and sum; ``arrival_rate`` is the requests
    per second over the part of the range holding data, ``over`` what that part is."""

    requests: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    e2e_count: float | None
    e2e_sum: float | None
    arrival_rate: float | None
    over: str


def _positive(x: float | None) -> bool:
    return x is not None and math.isfinite(x) and x > 0


def has_traffic(fleet: Fleet | None) -> bool:
    return fleet is not None and _positive(fleet.requests)


def fleet_starts(fleet: Fleet | None, source: str, why_not: str) -> dict[str, Start]:
    """``arrival``, ``latency`` and ``tokens`` from the fleet where it measured them, else
    Q39's with ``why_not`` (or what is missing) as the reason."""
    if not has_traffic(fleet):
        return {
            "arrival": q39(Q39_ARRIVAL, why_not),
            "latency": q39(Q39_LATENCY, why_not),
            "tokens": q39(Q39_TOKENS, why_not),
        }
    assert fleet is not None and fleet.requests is not None
    out = {}
    if _positive(fleet.arrival_rate):
        out["arrival"] = Start(
            round(fleet.arrival_rate, 3),  # type: ignore[arg-type]
            f"from the fleet: {fleet.arrival_rate:,.2f} req/s, {fleet.requests:,.0f} "
            f"finished requests {fleet.over}",
            source,
        )
    else:
        out["arrival"] = q39(Q39_ARRIVAL, "the request counter holds no data span")
    if _positive(fleet.e2e_count) and fleet.e2e_sum is not None and fleet.e2e_sum >= 0:
        mean = fleet.e2e_sum / fleet.e2e_count  # type: ignore[operator]
        out["latency"] = Start(
            round(mean, 3),
            f"from the fleet: mean e2e {mean:,.3f} s = sum / count of e2e_seconds "
            f"({fleet.e2e_sum:,.1f} s / {fleet.e2e_count:,.0f} requests) {fleet.over}",
            source,
        )
    else:
        out["latency"] = q39(Q39_LATENCY, "no e2e latency histogram in the selected range")
    tokens = [t for t in (fleet.prompt_tokens, fleet.generation_tokens) if t is not None]
    if tokens and sum(tokens) > 0:
        prompt, generated = fleet.prompt_tokens or 0.0, fleet.generation_tokens or 0.0
        per = (prompt + generated) / fleet.requests
        out["tokens"] = Start(
            max(1, round(per)),
            f"from the fleet: ({prompt:,.0f} prompt + {generated:,.0f} generated tokens) / "
            f"{fleet.requests:,.0f} finished requests = {per:,.0f} per request {fleet.over}",
            source,
        )
    else:
        out["tokens"] = q39(Q39_TOKENS, "no token counters in the selected range")
    return out


@dataclass(frozen=True)
class KneeCeiling:
    """A sweep's knee as a concurrency: ``knee_rate`` × ``latency_seconds`` (the mean e2e
    at the knee, over its repeats) on the line ``line`` of run ``run_id``."""

    run_id: int | None
    line: str
    knee_rate: float
    latency_seconds: float
    measured_at: float

    @property
    def concurrency(self) -> float:
        return self.knee_rate * self.latency_seconds


def _mean_e2e_seconds(point: LabPoint) -> float | None:
    """The point's mean e2e: the summary's ``e2el_ms.mean`` (``loadgen.summary``), else the
    mean of its kept per-request ``e2e_ms`` samples."""
    stats: Any = point.summary.get("e2el_ms") if isinstance(point.summary, Mapping) else None
    mean = stats.get("mean") if isinstance(stats, Mapping) else None
    if isinstance(mean, int | float) and not isinstance(mean, bool) and math.isfinite(mean):
        return float(mean) / 1000.0
    samples = point.samples.get("e2e_ms") if isinstance(point.samples, Mapping) else None
    values = [
        float(v)
        for v in (samples or ())
        if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
    ]
    return sum(values) / len(values) / 1000.0 if values else None


def knee_ceiling(run: LabRun, points: Sequence[LabPoint]) -> KneeCeiling | None:
    """The first line (in the sweep's planned order) that has a knee and a mean e2e at it,
    as the knob lab's headroom takes a sweep's first line when it cannot match knobs."""
    curves = knee_curves(points, KNEE_ATTAINMENT)
    planned = [json.dumps(v) for v in run.knob_values]
    curves.sort(key=lambda c: planned.index(k) if (k := json.dumps(c.knob_value)) in planned
                else len(planned))  # fmt: skip
    for curve in curves:
        if curve.knee_rate is None or curve.knee_rate <= 0:
            continue
        at_knee = [
            latency
            for p in points
            if json.dumps(p.knob_value) == json.dumps(curve.knob_value)
            and p.rate == curve.knee_rate
            and (latency := _mean_e2e_seconds(p)) is not None
        ]
        if at_knee:
            latency = sum(at_knee) / len(at_knee)
            line = value_label(run, curve.knob_value)
            return KneeCeiling(run.id, line, curve.knee_rate, latency, sweep_time(run))
    return None


def ceiling_start(runs: Sequence[LabRun] | None, points_of) -> Start:  # type: ignore[no-untyped-def]
    """The newest finished sweep's knee as a concurrency (``points_of(run_id)`` reads its
    points), else Q39's ceiling with why."""
    if runs is None:
        return q39(Q39_CEILING, "the store keeps no knob-lab results")
    sweeps = finished_sweeps(runs)
    if not sweeps:
        return q39(Q39_CEILING, "no finished load sweep in the store (tailwatch sweep)")
    run = sweeps[0]
    knee = knee_ceiling(run, points_of(run.id))
    if knee is None:
        return q39(Q39_CEILING, f"sweep #{run.id} has no knee with a measured e2e latency")
    at = pd.Timestamp(knee.measured_at, unit="s", tz="UTC")
    return Start(
        round(knee.concurrency, 3),
        f"from sweep #{knee.run_id}'s knee ({at:%Y-%m-%d %H:%M} UTC, {knee.line}): "
        f"{knee.knee_rate:g} req/s × {knee.latency_seconds:,.3f} s mean e2e = "
        f"{knee.concurrency:,.2f} concurrent (Little's law)",
        f"sweep{knee.run_id}",
    )
