"""Token-length distributions: fixed, uniform, lognormal, or replayed (prompt, output) pairs.

Every distribution is validated when built and draws integers >= 1 from a caller's
``random.Random``, so one seed fixes the whole schedule.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.errors import WorkloadError


@dataclass(frozen=True)
class Fixed:
    tokens: int

    def sample(self, rng: random.Random) -> int:
        return self.tokens


@dataclass(frozen=True)
class Uniform:
    """Inclusive on both ends."""

    low: int
    high: int

    def sample(self, rng: random.Random) -> int:
        return rng.randint(self.low, self.high)


@dataclass(frozen=True)
class LogNormal:
    """Median ``median`` tokens, shape ``sigma``; clipped to ``[1, max_tokens]``."""

    median: float
    sigma: float
    max_tokens: int

    def sample(self, rng: random.Random) -> int:
        value = rng.lognormvariate(math.log(self.median), self.sigma)
        return max(1, min(self.max_tokens, round(value)))


LengthDistribution = Fixed | Uniform | LogNormal


def _positive_int(field: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise WorkloadError(field, f"must be a positive integer, got {value!r}")
    return value


def _positive_float(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise WorkloadError(field, f"must be a positive number, got {value!r}")
    if not math.isfinite(value):
        raise WorkloadError(field, f"must be finite, got {value!r}")
    return float(value)


def parse_length(field: str, raw: Any) -> LengthDistribution:
    """An int is ``Fixed``; a mapping has ``kind`` (fixed | uniform | lognormal) and its
    parameters, e.g. ``{kind: lognormal, median: 200, sigma: 0.6, max: 1000}``."""
    if isinstance(raw, int) and not isinstance(raw, bool):
        return Fixed(_positive_int(field, raw))
    if not isinstance(raw, Mapping):
        raise WorkloadError(field, f"must be an integer or a mapping with 'kind', got {raw!r}")
    kind = raw.get("kind")
    allowed = {
        "fixed": {"tokens"},
        "uniform": {"min", "max"},
        "lognormal": {"median", "sigma", "max"},
    }
    if kind not in allowed:
        raise WorkloadError(f"{field}.kind", f"must be one of {sorted(allowed)}, got {kind!r}")
    unknown = set(raw) - allowed[kind] - {"kind"}
    if unknown:
        raise WorkloadError(field, f"unknown keys {sorted(unknown)} for kind {kind!r}")
    missing = allowed[kind] - set(raw)
    if missing:
        raise WorkloadError(field, f"kind {kind!r} needs {sorted(missing)}")
    if kind == "fixed":
        return Fixed(_positive_int(f"{field}.tokens", raw["tokens"]))
    if kind == "uniform":
        low = _positive_int(f"{field}.min", raw["min"])
        high = _positive_int(f"{field}.max", raw["max"])
        if high < low:
            raise WorkloadError(field, f"max={high} is below min={low}")
        return Uniform(low, high)
    return LogNormal(
        _positive_float(f"{field}.median", raw["median"]),
        _positive_float(f"{field}.sigma", raw["sigma"]),
        _positive_int(f"{field}.max", raw["max"]),
    )


@dataclass(frozen=True)
class Replay:
    """(prompt_tokens, output_tokens) pairs read from a JSONL file, drawn at random."""

    pairs: tuple[tuple[int, int], ...]

    def sample(self, rng: random.Random) -> tuple[int, int]:
        return rng.choice(self.pairs)


def load_replay(path: str | Path) -> Replay:
    """Each line is ``{"prompt_tokens": int, "output_tokens": int}``; blank lines are skipped.
    A bad line raises ``WorkloadError`` naming the file, the line and the field."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as error:
        raise WorkloadError("replay", f"cannot read {path}: {error.strerror or error}") from None
    pairs: list[tuple[int, int]] = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        where = f"replay {path}:{number}"
        try:
            row = json.loads(line)
        except ValueError as error:
            raise WorkloadError(where, f"not valid JSON ({error})") from None
        if not isinstance(row, dict):
            raise WorkloadError(where, f"must be a JSON object, got {line.strip()[:60]!r}")
        pair = []
        for key in ("prompt_tokens", "output_tokens"):
            if key not in row:
                raise WorkloadError(f"{where}.{key}", "is missing")
            pair.append(_positive_int(f"{where}.{key}", row[key]))
        pairs.append((pair[0], pair[1]))
    if not pairs:
        raise WorkloadError("replay", f"{path} holds no (prompt_tokens, output_tokens) pairs")
    return Replay(tuple(pairs))
