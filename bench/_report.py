"""Figures and tables for benchmark output: SLO checks, percentiles, markdown tables."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bench._driver import RequestRecord, RunResult


@dataclass(frozen=True)
class Slo:
    """A request is good when both its TTFT and its TPOT are within these bounds."""

    ttft_seconds: float
    tpot_seconds: float

    def is_met_by(self, record: RequestRecord) -> bool:
        ttft, tpot = record.ttft_seconds, record.tpot_seconds
        return (
            ttft is not None
            and tpot is not None
            and ttft <= self.ttft_seconds
            and tpot <= self.tpot_seconds
        )

    def describe(self) -> str:
        return f"TTFT <= {self.ttft_seconds * 1000:.0f} ms and TPOT <= {self.tpot_seconds * 1000:.0f} ms"


def goodput_per_second(result: RunResult, slo: Slo) -> float:
    """Finished requests that met ``slo``, per second of the run (vLLM's goodput); 0 for a
    run that took no time."""
    if not result.elapsed_seconds:
        return 0.0
    return sum(1 for r in result.records if slo.is_met_by(r)) / result.elapsed_seconds


def nearest_rank(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0-100) by nearest rank: always one of ``values``."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q / 100 * len(ordered)) - 1)]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.0f}" if not math.isnan(seconds) else "-"


def print_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    """A markdown table, columns padded so it also reads as plain text."""
    cells = [[str(h) for h in headers], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: Sequence[str]) -> str:
        return "| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |"

    print(line(cells[0]))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in cells[1:]:
        print(line(row))


def verdict(value: float, target: float) -> str:
    return "met" if value >= target else "MISSED"
