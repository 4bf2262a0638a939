"""The knob lab's charts: the knee chart (a figure against the offered rate, one line per knob
value, each value's knee a dashed rule in its colour) in the console's look."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import altair as alt
import pandas as pd

from console.charts import HEIGHT, MAX_POINTS

#: (column of ``frames.sweep_curve``, axis title) for the knee chart's panels.
KNEE_PANELS = (
    ("goodput", "goodput (req/s)"),
    ("ttft_p95_ms", "TTFT p95 (ms)"),
    ("itl_p95_ms", "ITL p95 (ms)"),
)


def _colour(order: Sequence[str], legend: bool) -> alt.Color:
    # NOTE: lines are labelled "knob=value"; the legend says the knob once, as its title,
    # and each value alone, so it fits above a third of the page's width
    knobs = {line.partition("=")[0] for line in order if "=" in line}
    shared = len(knobs) == 1 and all("=" in line for line in order)
    key = alt.Legend(
        orient="top",
        title=next(iter(knobs)) if shared else None,
        labelExpr="substring(datum.label, indexof(datum.label, '=') + 1)" if shared else None,
    )
    return alt.Color(
        "value:N",
        sort=list(order),
        scale=alt.Scale(domain=list(order), scheme="tableau10"),
        legend=key if legend else None,
    )


def knee_panel(
    curve: pd.DataFrame,
    knees: Mapping[str, float | None],
    order: Sequence[str],
    *,
    y: str,
    title: str,
    legend: bool = True,
) -> alt.LayerChart:
    """``y`` against ``rate`` (req/s offered), one line per knob value (``order``), points
    on every measured rate; each value's knee (highest rate with attainment ≥ 0.9) a dashed
    vertical rule in the line's colour. ``curve``: ``frames.sweep_curve``."""
    if len(curve) > MAX_POINTS:
        raise ValueError(f"{len(curve)} sweep points for one chart (at most {MAX_POINTS})")
    data = curve[["value", "rate", "num_repeats", y]].dropna(subset=[y])
    x = alt.X("rate:Q", title="offered rate (req/s)", scale=alt.Scale(zero=False))
    line = (
        alt.Chart(data)
        .mark_line(strokeWidth=1.8, point=alt.OverlayMarkDef(size=36, filled=True))
        .encode(
            x=x,
            y=alt.Y(f"{y}:Q", title=title, scale=alt.Scale(zero=True)),
            color=_colour(order, legend),
            tooltip=[
                "value:N",
                alt.Tooltip("rate:Q", format=",.3g", title="req/s"),
                alt.Tooltip(f"{y}:Q", format=",.4g", title=title),
                alt.Tooltip("num_repeats:Q", title="repeats"),
            ],
        )
    )
    marks = pd.DataFrame(
        [{"value": v, "knee": k} for v, k in knees.items() if k is not None],
        columns=["value", "knee"],
    )
    layers: list[alt.Chart] = [line]
    if not marks.empty:
        layers.append(
            alt.Chart(marks)
            .mark_rule(strokeDash=[6, 4], strokeWidth=1.5)
            .encode(
                x="knee:Q",
                color=_colour(order, legend=False),
                tooltip=["value:N", alt.Tooltip("knee:Q", format=",.3g", title="knee req/s")],
            )
        )
    return alt.layer(*layers).properties(height=HEIGHT)
