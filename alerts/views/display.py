"""How the alert views write what they show (:mod:`alerts.views.alerts`,
:mod:`alerts.views.incidents`, :mod:`alerts.views.rule_errors`, and the console's alert and
incident pages): a time in UTC, how long ago, a value for JSON, label text a terminal cannot be
garbled by. Pure functions of their arguments."""

from __future__ import annotations

import math
import unicodedata
from datetime import UTC, datetime

#: Unicode categories shown escaped: control, format, line and paragraph separators.
_HIDDEN = ("Cc", "Cf", "Zl", "Zp")


def iso(seconds: float | None) -> str | None:
    if seconds is None:
        return None
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    except (OverflowError, OSError, ValueError):  # NOTE: past year 9999 or before year 1
        return f"{seconds:g}"


def clock(seconds: float | None) -> str:
    """``04:11:32 UTC``: a time of day in UTC, for a time inside a window whose date is shown
    beside it (an incident's evidence); never the raw Unix seconds. ``—`` when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    try:
        return datetime.fromtimestamp(seconds, UTC).strftime("%H:%M:%S UTC")
    except (OverflowError, OSError, ValueError):  # NOTE: past year 9999 or before year 1
        return iso(seconds) or "—"


def age(seconds: float) -> str:
    """``45s``, ``12m``, ``3h 5m``, ``2d 4h``: how long ago, to two units at most."""
    if not math.isfinite(seconds) or seconds < 0:
        return "in the future" if seconds < 0 else "?"
    whole = int(seconds)
    for unit, size, smaller, smaller_size in (("d", 86400, "h", 3600), ("h", 3600, "m", 60)):
        if whole >= size:
            rest = (whole % size) // smaller_size
            return f"{whole // size}{unit} {rest}{smaller}" if rest else f"{whole // size}{unit}"
    return f"{whole // 60}m" if whole >= 60 else f"{whole}s"


def json_value(value: float | None) -> float | str | None:
    """A value for JSON: a number, or Prometheus's text for NaN and infinities."""
    if value is None or math.isfinite(value):
        return value
    return "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")


def printable(text: str) -> str:
    """``text`` with control and format characters (NUL, escape, newline, bidi overrides)
    written as escapes, so a label value cannot garble the terminal."""
    out = []
    for char in text:
        code = ord(char)
        if unicodedata.category(char) not in _HIDDEN:
            out.append(char)
        elif code < 0x100:
            out.append(f"\\x{code:02x}")
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return "".join(out)
