"""The summary table ``tailwatch sweep`` prints: per knob value, its knee and, at each rate,
attainment, goodput and TTFT/ITL tails (means over repeats, ``loadgen.lab_knee``)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from loadgen.lab_knee import KneeCurve


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:,.1f}"


def knee_table(knob: str, curves: Sequence[KneeCurve], target: float) -> Table:
    table = Table(title=f"{knob} sweep (knee: highest rate with attainment >= {target:g})")
    for header in (knob, "req/s", "repeats", "attainment", "goodput req/s", "TTFT p95 ms",
                   "TTFT p99 ms", "ITL p95 ms", "ITL p99 ms", "knee req/s"):  # fmt: skip
        table.add_column(header, justify="left" if header == knob else "right")
    for curve in curves:
        knee = "none" if curve.knee_rate is None else f"{curve.knee_rate:g}"
        for i, point in enumerate(curve.points):
            mark = " *" if point.rate == curve.knee_rate else ""
            table.add_row(
                str(curve.knob_value) if i == 0 else "",
                f"{point.rate:g}{mark}",
                str(point.num_repeats),
                f"{point.slo_attainment:.3f}",
                "-" if point.request_goodput is None else f"{point.request_goodput:.2f}",
                _ms(point.ttft_p95_ms),
                _ms(point.ttft_p99_ms),
                _ms(point.itl_p95_ms),
                _ms(point.itl_p99_ms),
                knee if i == 0 else "",
                end_section=i == len(curve.points) - 1,
            )
    return table
