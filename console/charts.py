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
HEIGHT = 220
PERCENTILE_COLOURS = {"p50": "#73bf69", "p95": "#fade2a", "p99": "#f2495c"}
SLO_COLOUR = "#ff7383"
FIRING_COLOUR, RESOLVED_COLOUR = "#ff9830", "#5794f2"
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
                    domain=["firing", "resolved"], range=[FIRING_COLOUR, RESOLVED_COLOUR]
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
    colour = alt.Color(
        "percentile:N",
        scale=alt.Scale(domain=list(PERCENTILE_COLOURS), range=list(PERCENTILE_COLOURS.values())),
        legend=alt.Legend(orient="top", title=None),
    )
    base = alt.Chart(data).encode(x=_x(start, end), color=colour)
    band = base.mark_area(opacity=0.12, interpolate="step-before").encode(
        y=alt.Y("lower_ms:Q", title="ms"), y2="upper_ms:Q"
    )
    lines = base.mark_line(strokeWidth=1.8).encode(
        y=alt.Y("ms:Q", title="ms"),
        tooltip=[
            alt.Tooltip("ts:T", format="%H:%M:%S", title="UTC"),
            "percentile:N",
            alt.Tooltip("ms:Q", format=",.1f", title="value ms"),
            alt.Tooltip("lower_ms:Q", format=",.1f", title="bucket from ms"),
            alt.Tooltip("upper_ms:Q", format=",.1f", title="bucket to ms"),
        ],
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
    return alt.layer(*layers).properties(height=HEIGHT)


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
    axis = alt.Axis(format="%" if percent else "~s", title=title)
    encoding = {
        "x": _x(start, end),
        "y": alt.Y(f"{y}:Q", axis=axis),
        "tooltip": [alt.Tooltip("ts:T", format="%H:%M:%S", title="UTC"),
                    alt.Tooltip(f"{y}:Q", format=".1%" if percent else ",.3g", title=title)],
    }  # fmt: skip
    if series is not None:
        encoding["color"] = alt.Color(f"{series}:N", legend=alt.Legend(orient="top", title=None))
        encoding["tooltip"].append(f"{series}:N")
    line = (
        alt.Chart(_check(frame)).mark_line(strokeWidth=1.8, point=len(frame) < 4).encode(**encoding)
    )
    return alt.layer(line, *_annotations(annotations, start, end)).properties(height=HEIGHT)


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


def waterfall_chart(frame: pd.DataFrame) -> alt.Chart:
    """One bar per phase (queue, each prefill chunk, decode) and a tick per preemption,
    in ms from the request's arrival."""
    data = _check(frame).copy()
    data["kind"] = data["phase"].str.split(" ").str[0]
    data["label"] = data["span"] + " · " + data["phase"]
    order = data.sort_values("start_ms")["label"].tolist()
    return (
        alt.Chart(data)
        .mark_bar(cornerRadius=2, minBandSize=3)
        .encode(
            x=alt.X("start_ms:Q", title="ms since arrival"),
            x2="end_ms:Q",
            y=alt.Y("label:N", sort=order, title=None),
            color=alt.Color(
                "kind:N",
                scale=alt.Scale(domain=list(PHASE_COLOURS), range=list(PHASE_COLOURS.values())),
                legend=alt.Legend(orient="top", title=None),
            ),
            tooltip=[
                "phase:N",
                alt.Tooltip("start_ms:Q", format=",.1f"),
                alt.Tooltip("end_ms:Q", format=",.1f"),
                "detail:N",
            ],
        )
        .properties(height=max(80, 26 * len(data)))
    )


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
        .properties(height=max(80, 28 * len(frame)))
    )
