"""Headroom to the knee: which stored sweep measured the knee for a target's current knobs,
the live arrival rate as a share of it, and whether a knob change since that sweep made it
stale. Pure: no Streamlit, no store, no HTTP.

A sweep *matches* the current knobs when every knob it shares across points (``run.knobs``)
that the engine also reports has the same value, and the engine's value of the swept knob
is one of the sweep's values (that value's line gives the knee). Knobs the engine does not
report (a load-generator setting, say) are not compared.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from alerts.triage import KnobChange
from collectors.store.lab_records import JsonScalar, LabRun, LabRunKind, LabRunStatus


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=0.0)
    return a == b


def mismatches(run: LabRun, knobs: Mapping[str, Any]) -> list[str]:
    """``knob: sweep value vs current`` for each shared knob that differs."""
    return [
        f"{name}: {value!r} in the sweep, {knobs[name]!r} now"
        for name, value in sorted(run.knobs.items())
        if name in knobs and name != run.sweep_knob and not _same(value, knobs[name])
    ]


def matching_value(run: LabRun, knobs: Mapping[str, Any]) -> tuple[bool, JsonScalar]:
    """``(matches, the sweep's value equal to the current one)``; a rates-only sweep has
    the one value ``None``."""
    if mismatches(run, knobs):
        return False, None
    if run.sweep_knob is None:
        return True, None
    if run.sweep_knob not in knobs:
        return False, None
    for value in run.knob_values:
        if _same(value, knobs[run.sweep_knob]):
            return True, value
    return False, None


def finished_sweeps(runs: Sequence[LabRun]) -> list[LabRun]:
    """Finished sweeps, newest first (by when they finished, else began)."""
    done = [r for r in runs if r.kind == LabRunKind.SWEEP and r.status == LabRunStatus.FINISHED]
    return sorted(done, key=lambda r: -(r.finished_at or r.created_at))


def newest_matching(
    runs: Sequence[LabRun], knobs: Mapping[str, Any]
) -> tuple[LabRun, JsonScalar] | None:
    """The newest finished sweep matching ``knobs`` and its matching value."""
    for run in finished_sweeps(runs):
        matches, value = matching_value(run, knobs)
        if matches:
            return run, value
    return None


@dataclass(frozen=True)
class Headroom:
    """``live_rate`` (req/s over the window) against ``knee_rate``; ``fraction`` of the knee
    in use (NaN when either is unknown or the knee is 0)."""

    live_rate: float | None
    knee_rate: float | None

    @property
    def fraction(self) -> float:
        if self.live_rate is None or not self.knee_rate or not math.isfinite(self.live_rate):
            return math.nan
        return self.live_rate / self.knee_rate

    @property
    def text(self) -> str:
        f = self.fraction
        if math.isnan(f):
            return "—"
        # NOTE: one decimal below 1%, so a trickle of traffic does not read as "0%"
        return f"at {f * 100:.0f}% of the knee" if f >= 0.01 else f"at {f * 100:.1f}% of the knee"


def sweep_time(run: LabRun) -> float:
    """When a sweep's knee was measured: its end, else its start."""
    return run.finished_at if run.finished_at is not None else run.created_at


def stale_changes(changes: Sequence[KnobChange], target: str, since: float) -> list[KnobChange]:
    """``target``'s knob changes first seen after ``since`` (the sweep), oldest first."""
    found = [
        k
        for k in changes
        if k.target == target and k.at_seconds is not None and k.at_seconds > since
    ]
    return sorted(found, key=lambda k: k.at_seconds or 0.0)
