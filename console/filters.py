"""The console's shared filters as plain data, and their validation from the URL.

Every query parameter is untrusted: a value is used only when it is one of the known choices
(ranges, models, targets, tenants seen in the store) or parses as a time; anything else is
dropped with a warning that names the parameter and the value. Nothing here imports Streamlit.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

#: Time ranges offered, in seconds; the URL's ``range`` must be one of these keys.
RANGES: dict[str, float] = {
    "15m": 900.0,
    "1h": 3600.0,
    "6h": 6 * 3600.0,
    "24h": 86400.0,
    "7d": 7 * 86400.0,
}
DEFAULT_RANGE = "1h"
#: Step sizes a chart may use; the smallest giving at most :data:`MAX_STEPS` steps is chosen.
NICE_STEPS = (5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800)
#: Points per series per chart: with three percentiles or ~20 heatmap buckets a chart stays
#: well under the ~5k points a browser draws smoothly.
MAX_STEPS = 120
#: From this range on, steps are whole minutes: the store answers those from its 1-minute
#: roll-ups, while a 30 s step over an hour reads every raw snapshot (the Overview's 1 h
#: render took 1.0-1.3 s that way: docs/benchmarks.md, section 11).
MINUTE_STEPS_FROM_SECONDS = 3600.0
#: The URL parameters the shared filters own (pages own the others, e.g. ``id``, ``trace``).
RANGE_PARAM, UNTIL_PARAM = "range", "until"
MODEL_PARAM, TARGET_PARAM, TENANT_PARAM = "model", "target", "tenant"
FILTER_PARAMS = (RANGE_PARAM, UNTIL_PARAM, MODEL_PARAM, TARGET_PARAM, TENANT_PARAM)
#: Longest label value accepted from the URL (longer ones cannot be a stored label we list).
MAX_PARAM_CHARS = 256
_DIGITS = re.compile(r"\d{9,11}(\.\d{1,6})?")


@dataclass(frozen=True)
class Filters:
    """What every page shows: ``[end - range, end]`` (Unix seconds, ``end`` floored to the
    step so cache keys repeat), for one model, target (replica) and tenant or all (``None``)."""

    range_key: str
    end_seconds: float
    model: str | None = None
    target: str | None = None
    tenant: str | None = None

    @property
    def range_seconds(self) -> float:
        return RANGES[self.range_key]

    @property
    def start_seconds(self) -> float:
        return self.end_seconds - self.range_seconds

    @property
    def step_seconds(self) -> float:
        return step_for(self.range_seconds)

    def selector(self) -> dict[str, str]:
        """The metric label selector: ``model``, ``target`` and ``tenant`` where chosen."""
        chosen = {"model": self.model, "target": self.target, "tenant": self.tenant}
        return {k: v for k, v in chosen.items() if v is not None}


def step_for(range_seconds: float) -> float:
    """The smallest of :data:`NICE_STEPS` giving at most :data:`MAX_STEPS` steps (whole
    minutes from :data:`MINUTE_STEPS_FROM_SECONDS` on)."""
    for step in NICE_STEPS:
        if range_seconds >= MINUTE_STEPS_FROM_SECONDS and step % 60:
            continue
        if range_seconds / step <= MAX_STEPS:
            return float(step)
    return float(NICE_STEPS[-1])


def floor_to_step(t: float, step: float) -> float:
    """``t`` rounded down to a multiple of ``step`` and then up one step, so the last step
    ends at or after ``t`` and its window still holds the newest scrape."""
    return (math.floor(t / step) + 1) * step


def parse_range(raw: str | None) -> tuple[str, str | None]:
    """``(range key, warning)``: the URL's ``range`` if known, else the default and why."""
    if raw is None or raw == "":
        return DEFAULT_RANGE, None
    if raw in RANGES:
        return raw, None
    known = ", ".join(RANGES)
    return (
        DEFAULT_RANGE,
        f"{RANGE_PARAM}={_shown(raw)} is not one of {known}; showing {DEFAULT_RANGE}",
    )


def parse_until(raw: str | None) -> tuple[float | None, str | None]:
    """``(Unix seconds or None, warning)`` from ``until``: Unix seconds or ISO 8601 UTC
    (``2026-12-02T10:02:00Z``). ``None`` means "now" (the live view)."""
    if raw is None or raw == "":
        return None, None
    text = raw.strip()
    value: float | None = None
    if _DIGITS.fullmatch(text):
        value = float(text)
    elif len(text) <= 40:
        try:
            parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            value = parsed.timestamp()
    if value is None or not math.isfinite(value):
        return None, (
            f"{UNTIL_PARAM}={_shown(raw)} is not a time (Unix seconds or ISO 8601 UTC such as "
            "2026-12-02T10:02:00Z); showing up to now"
        )
    return value, None


def parse_choice(
    name: str, raw: str | None, choices: Sequence[str]
) -> tuple[str | None, str | None]:
    """``(value or None for all, warning)``: the URL's value only when it is a known choice."""
    if raw is None or raw == "":
        return None, None
    if len(raw) <= MAX_PARAM_CHARS and raw in choices:
        return raw, None
    return None, f"{name}={_shown(raw)} is not a {name} in the store; showing all"


def _shown(raw: str) -> str:
    """A URL value for a warning: quoted, clipped (it is shown as text, never as markup)."""
    return repr(raw if len(raw) <= 60 else raw[:57] + "...")
