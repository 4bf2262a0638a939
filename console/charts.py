"""Altair charts for the console, in a Grafana-like look: thin lines on a dark panel, the
percentile bands carrying the bucket bounds, SLO thresholds as dashed rules, alert
transitions as vertical annotations on every time chart.

Every builder takes an already aggregated frame (one row per step and series, see
:mod:`console.metric_frames`): no chart transforms raw rows in the browser.
"""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

#: The most rows a chart's frame may hold (aggregate before charting).
MAX_POINTS = 5_000
#: Below this many steps per series a line also shows its points.
SPARSE_STEPS = 30
HEIGHT = 220
PERCENTILE_COLOURS = {"p50": "#73bf69", "p95": "#fade2a", "p99": "#f2495c"}
SLO_COLOUR = "#ff7383"
FIRING_COLOUR, RESOLVED_COLOUR, KNOB_COLOUR = "#ff9830", "#5794f2", "#b877d9"
PHASE_COLOURS = {
    "queue": "#8e8e8e",
    "prefill": "#5794f2",
    "decode": "#73bf69",
    "preempted": "#f2495c",
}


def _check(frame: pd.DataFrame) -> pd.DataFrame:
    if len(frame) > MAX_POINTS:
        raise ValueError(
            f"{len(frame)} rows for one chart (at most {MAX_POINTS}): aggregate to fewer steps"
        )
    return frame


def _sparse(frame: pd.DataFrame, series: str | None) -> bool | alt.OverlayMarkDef:
    """Points on the line when a series has few steps (a lone step draws no line)."""
    counts = frame.groupby(series).size() if series else pd.Series([len(frame)])
    return alt.OverlayMarkDef(size=28, filled=True) if counts.max() < SPARSE_STEPS else False


def _percentile_colour(*, legend: bool) -> alt.Color:
    return alt.Color(
        "percentile:N",
        scale=alt.Scale(domain=list(PERCENTILE_COLOURS), range=list(PERCENTILE_COLOURS.values())),
        legend=alt.Legend(orient="top", title=None, symbolOpacity=1) if legend else None,
    )


def _y_scale(frame: pd.DataFrame, y: str, percent: bool) -> alt.Scale:
    """From 0, and never an empty domain (an all-zero series still gets an axis)."""
    if percent:
        return alt.Scale(domain=[0, 1])
    top = frame[y].max() if len(frame) else 0.0
    return alt.Scale(domain=[0, float(top) * 1.15 if top and top > 0 else 1.0])


def _x(start: pd.Timestamp, end: pd.Timestamp) -> alt.X:
    return alt.X(
        "ts:T",
        title=None,
        scale=alt.Scale(domain=[start.isoformat(), end.isoformat()]),
        axis=alt.Axis(format="%H:%M", labelColor="#9fa7b3", grid=False),
    )


def _annotations(frame: pd.DataFrame | None, start, end) -> list[alt.Chart]:
    if frame is None or frame.empty:
        return []
    rule = (
        alt.Chart(frame)
        .mark_rule(strokeDash=[2, 3], strokeWidth=1.5)
        .encode(
            x=_x(start, end),
            color=alt.Color(
                "state:N",
                scale=alt.Scale(
                    domain=["firing", "resolved", "change"],
                    range=[FIRING_COLOUR, RESOLVED_COLOUR, KNOB_COLOUR],
                ),
                legend=None,
            ),
            tooltip=[alt.Tooltip("ts:T", format="%Y-%m-%d %H:%M:%S", title="UTC"), "alert:N",
                     "state:N"],
        )
    )  # fmt: skip
    return [rule]


def percentile_chart(
    frame: pd.DataFrame,
    start: pd.Timestamp,
    end: pd.Timestamp,
    *,
    thresholds: Sequence[tuple[str, float]] = (),
    annotations: pd.DataFrame | None = None,
) -> alt.LayerChart:
    """p50/p95/p99 lines (ms) with each value's bucket interval as a faint band; each SLO
    threshold ``(name, seconds)`` a dashed rule. ``frame``: ``console.metric_frames``'s
    percentile frame."""
    data = _check(frame).copy()
    for column in ("seconds", "lower_seconds", "upper_seconds"):
        data[column.replace("seconds", "ms")] = data[column] * 1000.0
    base = alt.Chart(data).encode(x=_x(start, end))
    band = base.mark_area(opacity=0.12, interpolate="step-before").encode(
        y=alt.Y("lower_ms:Q", title="ms"), y2="upper_ms:Q", color=_percentile_colour(legend=False)
    )
    lines = (
        base.encode(color=_percentile_colour(legend=True))
        .mark_line(strokeWidth=1.8, point=_sparse(data, "percentile"))
        .encode(
            y=alt.Y("ms:Q", title="ms"),
            tooltip=[
                alt.Tooltip("ts:T", format="%H:%M:%S", title="UTC"),
                "percentile:N",
                alt.Tooltip("ms:Q", format=",.1f", title="value ms"),
                alt.Tooltip("lower_ms:Q", format=",.1f", title="bucket from ms"),
                alt.Tooltip("upper_ms:Q", format=",.1f", title="bucket to ms"),
            ],
        )
    )
    layers: list[alt.Chart] = [band, lines]
    if thresholds:
        rules = pd.DataFrame(
            {"slo": [n for n, _ in thresholds], "ms": [s * 1000 for _, s in thresholds]}
        )
        layers.append(
            alt.Chart(rules)
            .mark_rule(strokeDash=[6, 4], color=SLO_COLOUR, strokeWidth=1.5)
            .encode(y="ms:Q", tooltip=["slo:N", alt.Tooltip("ms:Q", format=",.0f", title="SLO ms")])
        )
    layers += _annotations(annotations, start, end)
    return alt.layer(*layers).resolve_scale(color="independent").properties(height=HEIGHT)


def series_chart(
    frame: pd.DataFrame,
    start: pd.Timestamp,
    end: pd.Timestamp,
    *,
    y: str,
    title: str,
    series: str | None = None,
    annotations: pd.DataFrame | None = None,
    percent: bool = False,
) -> alt.LayerChart:
    """Lines of ``y`` over time, one per ``series`` value when given."""
    # NOTE: plain numbers, not SI prefixes: "100m" requests waiting reads as millions or
    # minutes at 3 a.m., where it means 0.1
    axis = alt.Axis(format="%" if percent else ",.3~r", title=title)
    encoding = {
        "x": _x(start, end),
        "y": alt.Y(f"{y}:Q", axis=axis, scale=_y_scale(frame, y, percent)),
        "tooltip": [alt.Tooltip("ts:T", format="%H:%M:%S", title="UTC"),
                    alt.Tooltip(f"{y}:Q", format=".1%" if percent else ",.3g", title=title)],
    }  # fmt: skip
    if series is not None:
        encoding["color"] = alt.Color(f"{series}:N", legend=alt.Legend(orient="top", title=None))
        encoding["tooltip"].append(f"{series}:N")
    line = (
        alt.Chart(_check(frame))
        .mark_line(strokeWidth=1.8, point=_sparse(frame, series))
        .encode(**encoding)
    )
    return (
        alt.layer(line, *_annotations(annotations, start, end))
        .resolve_scale(color="independent")
        .properties(height=HEIGHT)
    )


def heatmap_chart(
    frame: pd.DataFrame, start: pd.Timestamp, end: pd.Timestamp, *, step_seconds: float, unit: str
) -> alt.Chart:
    """A Grafana-style heatmap from stored buckets: one cell per step and bucket, coloured by
    the observations in it. ``frame``: ``console.metric_frames``'s heatmap frame."""
    data = _check(frame).copy()
    data["ts_end"] = data["ts"]
    data["ts"] = data["ts"] - pd.Timedelta(seconds=step_seconds)
    order = data.drop_duplicates("bucket").sort_values("lower", ascending=False)["bucket"].tolist()
    return (
        alt.Chart(data)
        .mark_rect()
        .encode(
            x=_x(start, end),
            x2="ts_end:T",
            y=alt.Y("bucket:O", sort=order, title=unit),
            color=alt.Color("count:Q", scale=alt.Scale(scheme="inferno"), legend=None),
            tooltip=[
                alt.Tooltip("ts_end:T", format="%H:%M:%S", title="UTC"),
                "bucket:N",
                alt.Tooltip("count:Q", format=",.0f", title="observations"),
            ],
        )
        .properties(height=HEIGHT)
    )


def waterfall_chart(frame: pd.DataFrame) -> alt.LayerChart:
    """One bar per phase (queue, each prefill chunk, decode) and a tick per preemption,
    in ms from the request's arrival, one row per phase in time order."""
    data = _check(frame).copy()
    data["kind"] = data["phase"].str.split(" ").str[0]
    order = data.sort_values(["start_ms", "end_ms"])["phase"].drop_duplicates().tolist()
    y = alt.Y("phase:N", sort=order, title=None, axis=alt.Axis(labelLimit=240))
    colour = alt.Color(
        "kind:N",
        scale=alt.Scale(domain=list(PHASE_COLOURS), range=list(PHASE_COLOURS.values())),
        legend=alt.Legend(orient="top", title=None),
    )
    tooltip = ["span:N", "phase:N", alt.Tooltip("start_ms:Q", format=",.2f"),
               alt.Tooltip("end_ms:Q", format=",.2f"), "detail:N"]  # fmt: skip
    base = alt.Chart(data).encode(y=y, color=colour, tooltip=tooltip)
    bars = base.mark_bar(cornerRadius=2, height=16).encode(
        x=alt.X("start_ms:Q", title="ms since arrival"), x2="end_ms:Q"
    )
    ticks = (
        base.transform_filter("datum.kind == 'preempted'")
        .mark_tick(thickness=3, size=20)
        .encode(x="start_ms:Q")
    )
    # NOTE: a discrete axis sized by step: a fixed height collapses it under Streamlit's theme
    return alt.layer(bars, ticks).properties(height=alt.Step(30))


def bar_chart(frame: pd.DataFrame, *, x: str, y: str, title: str) -> alt.Chart:
    """Horizontal bars of ``x`` per ``y`` category (e.g. cost per tenant)."""
    return (
        alt.Chart(_check(frame))
        .mark_bar(color="#5794f2", cornerRadius=2)
        .encode(
            x=alt.X(f"{x}:Q", title=title),
            y=alt.Y(f"{y}:N", sort="-x", title=None),
            tooltip=[f"{y}:N", alt.Tooltip(f"{x}:Q", format=",.4g")],
        )
        .properties(height=alt.Step(28))
    )
