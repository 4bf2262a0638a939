"""The incident's own chart: the alert's latency percentiles over the baseline and the triage
window, with the two windows shaded, the firing span marked and each change (what changed,
grouped as triage groups it) a rule at its time, so "p99 tripled at 10:02, a minute after
max_num_seqs went from 16 to 1" is seen before it is read. Pure: frames in, an Altair chart
out."""

from __future__ import annotations

from collections.abc import Sequence

import altair as alt
import pandas as pd

from alerts.rules import LATENCY_FAMILIES
from alerts.triage import ChangeGroup
from collectors import canonical as c
from console.charts import FIRING_COLOUR, KNOB_COLOUR, percentile_chart
from console.incidents.frames import IncidentDetail, change_label
from slo import LatencyMetric

#: Alert labels that are also series labels: the chart reads the alert's own series.
SERIES_LABELS = (c.LABEL_MODEL, c.LABEL_TARGET)
SPAN_COLOURS = {"baseline": "#5794f2", "triage window": "#fade2a", "firing": FIRING_COLOUR}


def latency_family(detail: IncidentDetail) -> tuple[str, str]:
    """``(family, name)`` the chart shows: the alert's ``metric`` label (a latency rule's),
    else TTFT."""
    metric = detail.incident.labels.get("metric", "")
    try:
        chosen = LatencyMetric(metric)
    except ValueError:
        chosen = LatencyMetric.TTFT
    if chosen not in LATENCY_FAMILIES:  # NOTE: TPOT has no histogram (request records only)
        chosen = LatencyMetric.TTFT
    return LATENCY_FAMILIES[chosen], chosen.value.upper()


def series_selector(detail: IncidentDetail) -> dict[str, str]:
    labels = detail.incident.labels
    return {k: labels[k] for k in SERIES_LABELS if labels.get(k)}


def span_frame(detail: IncidentDetail) -> pd.DataFrame:
    """``span, from, to``: the baseline, the triage window and the firing span."""
    inc, w, b = detail.incident, detail.window, detail.baseline
    fired_until = inc.resolved_at_seconds if inc.resolved_at_seconds is not None else w.end_seconds
    rows = [
        ("baseline", b.start_seconds, b.end_seconds),
        ("triage window", w.start_seconds, w.end_seconds),
        ("firing", inc.started_at_seconds, max(fired_until, inc.started_at_seconds)),
    ]
    return pd.DataFrame(
        [(s, pd.Timestamp(a, unit="s", tz="UTC"), pd.Timestamp(z, unit="s", tz="UTC"))
         for s, a, z in rows],
        columns=["span", "from", "to"],
    )  # fmt: skip


def change_frame(changes: Sequence[ChangeGroup]) -> pd.DataFrame:
    """``ts, change``: each group of changes at its first reading."""
    return pd.DataFrame(
        [(pd.Timestamp(g.first_seconds, unit="s", tz="UTC"), change_label(g)) for g in changes],
        columns=["ts", "change"],
    )


def _change_rules(changes: pd.DataFrame, x: alt.X) -> list[alt.Chart]:
    if changes.empty:
        return []
    rule = (
        alt.Chart(changes)
        .mark_rule(color=KNOB_COLOUR, strokeWidth=2)
        .encode(
            x=x,
            tooltip=[alt.Tooltip("ts:T", format="%Y-%m-%d %H:%M:%S", title="UTC"), "change:N"],
        )
    )
    return [rule]


def incident_chart(
    frame: pd.DataFrame,
    spans: pd.DataFrame,
    start: pd.Timestamp,
    end: pd.Timestamp,
    changes: pd.DataFrame | None = None,
) -> alt.LayerChart:
    """The percentile chart of ``frame`` over ``[start, end]`` above the shaded spans, with
    a rule for each change of ``changes`` (:func:`change_frame`)."""
    shade = (
        alt.Chart(spans)
        .mark_rect(opacity=0.13)
        .encode(
            x=alt.X(
                "from:T",
                title=None,
                scale=alt.Scale(domain=[start.isoformat(), end.isoformat()]),
                axis=alt.Axis(
                    format="%H:%M",
                    labelColor="#9fa7b3",
                    grid=False,
                    tickCount=8,
                ),
            ),
            x2="to:T",
            color=alt.Color(
                "span:N",
                scale=alt.Scale(domain=list(SPAN_COLOURS), range=list(SPAN_COLOURS.values())),
                legend=alt.Legend(orient="top", title=None, symbolOpacity=0.6),
            ),
            tooltip=[
                "span:N",
                alt.Tooltip("from:T", format="%H:%M:%S", title="from UTC"),
                alt.Tooltip("to:T", format="%H:%M:%S", title="to UTC"),
            ],
        )
    )
    x = alt.X("ts:T", scale=alt.Scale(domain=[start.isoformat(), end.isoformat()]))
    marks = _change_rules(changes if changes is not None else change_frame(()), x)
    layers = alt.layer(shade, percentile_chart(frame, start, end), *marks)
    return layers.resolve_scale(color="independent")
