"""Reads Prometheus's PromQL test scripts (``histograms*.test``): ``load``, ``load_with_nhcb``,
``clear`` and ``eval instant at`` / ``eval_fail`` blocks, each case with the data loaded before it.

Syntax: ``shared/peers/prometheus/README.md`` (upstream ``promql/promqltest/README.md``).
``load_with_nhcb`` also stores a native-histogram twin under the base name; it is recorded as
a native series so that cases selecting it are reported as not mapped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from slo import Sample

Labels = tuple[tuple[str, str], ...]

_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_DURATION = re.compile(r"(?:\d+(?:ms|[smhdwy]))+")
_LABEL = re.compile(r'\s*([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"\s*,?')
_SERIES = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)?(\{[^}]*\})?\s+(.*)")
_EXPANDING = re.compile(r"([-+]?[\d.]+(?:[eE][-+]?\d+)?)(?:([-+])([\d.]+(?:[eE][-+]?\d+)?))?x(\d+)")


class NotMapped(Exception):
    """The case uses something outside the classic-bucket subset; the message says what."""


@dataclass(frozen=True)
class Series:
    labels: Labels  # __name__ included
    samples: tuple[Sample, ...]
    is_native: bool

    @property
    def label_dict(self) -> dict[str, str]:
        return dict(self.labels)


@dataclass(frozen=True)
class EvalCase:
    file: str
    line: int
    at_seconds: float
    expr: str
    expected: tuple[tuple[Labels, str], ...]
    expect_fail: bool
    annotations: frozenset[str]  # "warn", "no_warn", "info", "no_info"
    storage: tuple[Series, ...]

    @property
    def case_id(self) -> str:
        return f"{self.file}:{self.line}"


def parse_duration(text: str) -> float:
    if text == "0":
        return 0.0
    if not _DURATION.fullmatch(text):
        raise ValueError(f"bad duration {text!r}")
    return sum(int(n) * _UNITS[u] for n, u in re.findall(r"(\d+)(ms|[smhdwy])", text))


def parse_labels(text: str | None) -> list[tuple[str, str, str]]:
    """``{a="x", b=~"y"}`` → ``[(name, op, value)]`` with PromQL string escapes undone."""
    if not text:
        return []
    body, matchers, position = text.strip()[1:-1], [], 0
    while position < len(body.rstrip()):
        match = _LABEL.match(body, position)
        if not match:
            raise NotMapped(f"label matchers {text!r}")
        name, op, value = match.groups()
        matchers.append((name, op, re.sub(r"\\(.)", r"\1", value)))
        position = match.end()
    return matchers


def expand_values(text: str, step_seconds: float) -> tuple[Sample, ...]:
    samples, step = [], 0
    for token in text.split():
        if token == "_":
            step += 1
            continue
        if token.startswith("_x"):
            step += int(token[2:])
            continue
        expanding = _EXPANDING.fullmatch(token)
        if expanding:
            start, sign, delta, times = expanding.groups()
            increment = float(delta or 0) * (-1 if sign == "-" else 1)
            for k in range(int(times) + 1):
                samples.append(Sample(step * step_seconds, float(start) + k * increment))
                step += 1
            continue
        if token == "stale":
            raise NotMapped("staleness markers")
        samples.append(Sample(step * step_seconds, float(token)))
        step += 1
    return tuple(samples)


def parse_script(path: Path) -> list[EvalCase]:
    """Every ``eval`` case of a script, with the storage it sees."""
    lines = path.read_text(encoding="utf-8").splitlines()
    storage: dict[Labels, Series] = {}
    cases: list[EvalCase] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line.strip() or line.lstrip().startswith("#") or line[0].isspace():
            continue
        block_start = i
        body: list[str] = []
        while i < len(lines) and (not lines[i].strip() or lines[i][0].isspace()):
            if lines[i].strip() and not lines[i].lstrip().startswith("#"):
                body.append(lines[i].strip())
            i += 1
        words = line.split()
        if words[0] == "clear":
            storage = {}
        elif words[0] in ("load", "load_with_nhcb"):
            _load(storage, body, parse_duration(words[1]), with_nhcb=words[0] == "load_with_nhcb")
        elif words[0] in ("eval", "eval_fail") and words[1] == "instant" and words[2] == "at":
            expected, annotations, expect_fail = [], set(), words[0] == "eval_fail"
            for entry in body:
                if entry.startswith("expect "):
                    kind = entry.split()[1]
                    expect_fail |= kind == "fail"
                    annotations.add(kind)
                else:
                    expected.append(_expected_line(entry))
            cases.append(
                EvalCase(
                    path.name,
                    block_start,
                    parse_duration(words[3]),
                    line.split(None, 4)[4],
                    tuple(expected),
                    expect_fail,
                    frozenset(annotations & {"warn", "no_warn", "info", "no_info"}),
                    tuple(storage.values()),
                )
            )
        else:
            raise ValueError(f"{path.name}:{block_start}: unknown command {words[0]!r}")
    return cases


def _load(storage: dict[Labels, Series], body: list[str], step: float, with_nhcb: bool) -> None:
    for entry in body:
        match = _SERIES.fullmatch(entry)
        if not match:
            raise ValueError(f"bad series line {entry!r}")
        name, label_text, values = match.groups()
        labels = {k: v for k, _, v in parse_labels(label_text)}
        if name:
            labels["__name__"] = name
        key = tuple(sorted(labels.items()))
        native = "{{" in values
        samples = () if native else expand_values(values, step)
        old = storage.get(key)
        storage[key] = Series(key, (old.samples if old else ()) + samples, native)
        if with_nhcb and name and name.endswith("_bucket"):
            twin = {k: v for k, v in labels.items() if k != "le"} | {"__name__": name[:-7]}
            twin_key = tuple(sorted(twin.items()))
            storage[twin_key] = Series(twin_key, (), True)


def _expected_line(entry: str) -> tuple[Labels, str]:
    if "{{" in entry:
        head, value = entry.split("{{", 1)
        value = "{{" + value
    else:
        head, value = entry.rsplit(None, 1)
    match = re.fullmatch(r"([A-Za-z_:][A-Za-z0-9_:]*)?(\{.*\})?", head.strip())
    if not match:
        raise ValueError(f"bad expected line {entry!r}")
    labels = {k: v for k, _, v in parse_labels(match.group(2))}
    if match.group(1):
        labels["__name__"] = match.group(1)
    return tuple(sorted(labels.items())), value.strip()
