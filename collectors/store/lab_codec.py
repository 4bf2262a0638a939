"""Checks and JSON text of the knob lab's records, shared by the SQL store and ``FakeLab`` so
both refuse the same input and give back the same values.

NOTE: knobs, workloads, knob values, rates, summaries and samples are kept as JSON *text*
(``Text`` columns), not the database's JSON type: a summary of a point with no finished
request holds NaN quantiles, and PostgreSQL's ``json``/``jsonb`` refuse NaN and Infinity.
Python's JSON (``NaN``, ``Infinity``, ``-Infinity``) writes them and reads them back exactly;
every other float round-trips through its shortest repr, ints stay ints. Non-ASCII is
escaped (``\\uXXXX``), so PostgreSQL's ``text``, which cannot hold U+0000, never sees a NUL.
The plain columns (``name``, ``target``, ``sweep_knob``, ``error``) refuse NUL instead.
Times and rates must be finite: SQLite stores a NaN ``REAL`` as NULL.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

from collectors.store.lab_records import JsonScalar, LabPoint, LabRun, LabRunKind, LabRunStatus


def encode(value: Any, field: str) -> str:
    """``value`` as JSON text; a ``ValueError`` naming ``field`` when it is not JSON."""
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{field}: not JSON ({exc})") from None


def decode(text: str) -> Any:
    return json.loads(text)


def _json_copy(value: Any, field: str) -> Any:
    # NOTE: what the SQL store gives back (tuples as lists, keys as strings)
    return decode(encode(value, field))


def check_run(run: LabRun) -> LabRun:
    """``run`` with its values as the store gives them back (enums, JSON copies, tuples of
    floats); a ``ValueError`` naming the field for anything the store cannot keep exactly."""
    kind = _enum(LabRunKind, run.kind, "kind")
    status = _enum(LabRunStatus, run.status, "status")
    for name in ("name", "target"):
        _text(getattr(run, name), name)
    if run.sweep_knob is not None:
        _text(run.sweep_knob, "sweep_knob")
    if run.error is not None:
        _text(run.error, "error")
    if not isinstance(run.simulated, bool):
        raise ValueError(f"simulated={run.simulated!r}: must be a bool")
    created_at = _finite(run.created_at, "created_at")
    finished_at = None if run.finished_at is None else _finite(run.finished_at, "finished_at")
    _count(run.num_repeats, "num_repeats", minimum=1)
    _count(run.num_planned_points, "num_planned_points", minimum=0)
    window = None
    if run.window is not None:
        if len(run.window) != 2:
            raise ValueError(f"window={run.window!r}: must be (start, end) epoch seconds")
        window = (_finite(run.window[0], "window"), _finite(run.window[1], "window"))
        if window[0] > window[1]:
            raise ValueError(f"window={run.window!r}: start is after end")
    for name in ("knobs", "workload"):
        if not isinstance(getattr(run, name), Mapping):
            raise ValueError(f"{name}={getattr(run, name)!r}: must be a mapping")
    return dataclasses.replace(
        run,
        kind=kind,
        status=status,
        created_at=created_at,
        finished_at=finished_at,
        knobs=_json_copy(dict(run.knobs), "knobs"),
        workload=_json_copy(dict(run.workload), "workload"),
        knob_values=tuple(_scalar(v, "knob_values") for v in run.knob_values),
        rates=tuple(_rate(r, "rates") for r in run.rates),
        window=window,
    )


def check_point(point: LabPoint) -> LabPoint:
    """``point`` as the store gives it back, or a ``ValueError`` naming the field."""
    _count(point.run_id, "run_id", minimum=0)
    _count(point.repeat, "repeat", minimum=0)
    if not isinstance(point.summary, Mapping):
        raise ValueError(f"summary={point.summary!r}: must be a mapping")
    if not isinstance(point.samples, Mapping):
        raise ValueError(f"samples={point.samples!r}: must be a mapping of lists of numbers")
    samples: dict[str, list[float]] = {}
    for key, values in point.samples.items():
        if not isinstance(key, str):
            raise ValueError(f"samples key {key!r}: must be a string")
        if isinstance(values, str | bytes) or not isinstance(values, Sequence):
            raise ValueError(f"samples[{key!r}]: must be a list of numbers")
        samples[key] = [_number(x, f"samples[{key!r}]") for x in values]
    return dataclasses.replace(
        point,
        knob_value=_scalar(point.knob_value, "knob_value"),
        rate=_rate(point.rate, "rate"),
        summary=_json_copy(dict(point.summary), "summary"),
        samples=samples,
        measured_at=_finite(point.measured_at, "measured_at"),
    )


def check_end(status: LabRunStatus | str, error: str | None) -> LabRunStatus:
    if error is not None:
        _text(error, "error")
    return _enum(LabRunStatus, status, "status")


def check_limit(limit: int) -> int:
    return _count(limit, "limit", minimum=0)


def _enum(kind: type, value: Any, field: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(m.value for m in kind)
        raise ValueError(f"{field}={value!r}: not one of {known}") from None


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{field}={value!r}: must be a string")
    if "\x00" in value:
        raise ValueError(f"{field}={value!r}: contains NUL (U+0000), which the store cannot keep")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError(f"{field}={value!r}: holds a lone surrogate (not UTF-8)") from None
    return value


def _number(value: Any, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{field}: {value!r} is not a number")
    return float(value)


def _finite(value: Any, field: str) -> float:
    number = _number(value, field)
    if not math.isfinite(number):
        raise ValueError(f"{field}={value!r}: must be finite")
    return number


def _rate(value: Any, field: str) -> float:
    rate = _finite(value, field)
    if rate < 0:
        raise ValueError(f"{field}: {value!r} req/s is negative")
    return rate


def _count(value: Any, field: str, *, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{field}={value!r}: must be an int >= {minimum}")
    return value


def _scalar(value: Any, field: str) -> JsonScalar:
    if value is not None and not isinstance(value, str | int | float | bool):
        raise ValueError(f"{field}: {value!r} is not a JSON scalar (str, int, float, bool, None)")
    return value
