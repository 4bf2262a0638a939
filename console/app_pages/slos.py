"""SLOs and goodput: per SLO its attainment over the range (exact, or estimated from the
histogram with its bounds), the budget remaining over its period, and the multi-window
multi-burn-rate table with the rows that fire; goodput over time from request records."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from alerts.rules.records import metric_token
from alerts.views import iso
from collectors import canonical as c
from console import charts, data
from console.page_kit import (
    empty,
    escape,
    page_context,
    percent,
    section,
    show_chart,
    span,
    span_text,
    utc_minute,
    versus_target,
)
from console.request_frames import exact_attainment, good_flags

ctx = page_context()
f = ctx.filters
start, end = span(f)
st.title("SLOs & goodput")

if ctx.slo_problem:
    st.error("The SLOs in the configuration cannot be read: " + escape(ctx.slo_problem))
if not ctx.slos:
    empty(
        "No SLOs configured.",
        "Add an `slos:` section to tailwatch.yaml (see docs/slo.md) and start the console "
        "with `tailwatch console --config tailwatch.yaml`.",
    )
    st.stop()


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{seconds / size:g}{unit}"
    return f"{seconds:g}s"


def _number(x: float, fmt: str = "{:.3g}") -> str:
    return "—" if x is None or not math.isfinite(x) else fmt.format(x)


def _backtest(spec) -> None:  # type: ignore[no-untyped-def]
    """On demand: when the SLO's burn-rate alerts would have paged or ticketed over the
    range, so a proposed objective is judged on the fleet's own past before anyone is paged."""
    with st.expander(f"Backtest: when {spec.name}'s burn-rate alerts would have fired"):
        step = data.slo_backtest_step(f.start_seconds, f.end_seconds)
        st.caption(
            f"The SLO's page and ticket rules evaluated every {_duration(step)} over the "
            f"last {f.range_key} (as `tailwatch rules backtest` does), on the metrics this "
            "console reads. Nothing is saved and nobody is notified."
        )
        if not st.button("Run the backtest", key=f"backtest-{spec.name}"):
            return
        result = data.slo_backtest(
            ctx.url, ctx.settings.config_path, spec.name, f.start_seconds, f.end_seconds
        )
        if result is None:
            st.info("The configuration gives this SLO no burn-rate rules to backtest.")
            return
        rows = [
            {
                "severity": r.severity,
                "fired": iso(firing.start),
                "resolved": "still firing" if firing.end is None else iso(firing.end),
                "for": _duration(round(((f.end_seconds if firing.end is None else firing.end) - firing.start) / 60) * 60.0),
                "peak burn rate": _number(firing.peak),
            }
            for r in result.rules
            for firing in r.firings
        ]  # fmt: skip
        errors = [f"{r.rule}: {r.errors} evaluations failed ({r.first_error})" for r in result.rules if r.errors]  # fmt: skip
        counts = result.counts()
        summary = ", ".join(f"{n} {severity}" for severity, n in sorted(counts.items()))
        st.markdown(f"**{summary}** over {result.evaluations:,} evaluations.")
        if rows:
            st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
        else:
            st.success("Neither rule would have fired over this range.")
        for line in errors:
            st.warning(escape(line))


records = data.records(ctx.url, f)
for spec in ctx.slos:
    status = data.slo_status(ctx.url, spec, f)
    section(spec.name, escape(spec.description) if spec.description else "")
    firing = status.firing_severities
    exact = exact_attainment(records, spec)
    cols = st.columns(5)
    cols[0].metric("Target", percent(spec.target, 3), border=True)
    bounds = (
        ""
        if status.attainment_low == status.attainment_high
        else f" (true value in [{percent(status.attainment_low)}, {percent(status.attainment_high)}])"
    )
    cols[1].metric(
        f"Attainment, last {f.range_key}",
        percent(status.attainment),
        delta=versus_target(status.attainment, spec.target),
        help=status.basis + bounds,
        border=True,
    )
    cols[2].metric(
        "Exact (records)",
        "—" if exact is None else percent(exact[0]),
        help="exact: every request judged" + ("" if exact is None else f" ({exact[1]:,} records)")
        if exact is not None
        else "no matching request records (or an error-ratio or ITL SLO)",
        border=True,
    )
    budget_from = (
        f"from the server's record `{status.budget_record}` (its 5-minute rates) since "
        f"{utc_minute(status.budget_since_seconds, f.end_seconds)}"
        if status.budget_record
        else "from the engines' own series over the period"
    )
    cols[3].metric(
        f"Budget remaining ({spec.period_days} d)",
        percent(status.budget_remaining, 1),
        help=budget_from,
        border=True,
    )
    cols[4].metric("Burn-rate alerts", ", ".join(firing) if firing else "none firing", border=True)
    st.caption(escape(status.basis + bounds + (f"; {status.note}" if status.note else "")))
    table = pd.DataFrame(
        [
            {
                "severity": check.window.severity,
                "long window": _duration(check.window.long_window_seconds),
                "short window": _duration(check.window.short_window_seconds),
                "budget spent": f"{check.window.budget_fraction:.0%}",
                "factor": round(check.window.burn_rate_factor, 4),
                "long burn rate": _number(check.long_burn_rate),
                "short burn rate": _number(check.short_burn_rate),
                "threshold error ratio": _number(check.threshold_error_ratio, "{:.4%}"),
                "fires": "🔥 yes" if check.is_firing else "no",
            }
            for check in status.checks
        ]
    )
    st.dataframe(table, hide_index=True, width="stretch")
    if status.windows_from == "recorded":
        st.caption(
            "Burn rates from the server's SLI recording rules "
            f"(`tailwatch:slo_{metric_token(spec.name)}:error_ratio_rate<window>`, written by "
            "`tailwatch rules export`), as the burn-rate alerts read them."
        )
    _backtest(spec)

section(
    "Goodput over time",
    "exact, from request records: a request is good when it succeeded and met every latency "
    "SLO (TTFT, TPOT, e2e) that applies to its model and tenant",
)
if not records:
    empty(
        "No request records in this window.",
        "Goodput needs request records from engine traces (`--otlp-endpoint` to `tailwatch "
        "collect`); the SLO figures above come from the metrics.",
    )
else:
    flags = good_flags(records, ctx.slos)
    rows = [(r.arrival, g) for r, g in zip(records, flags, strict=True)]
    frame = pd.DataFrame(rows, columns=["t", "good"])
    frame["t"] = (frame["t"] // f.step_seconds + 1) * f.step_seconds
    per_step = frame.groupby("t")["good"].agg(["sum", "count"]).reset_index()
    per_step["ts"] = pd.to_datetime(per_step["t"], unit="s", utc=True)
    per_step["goodput"] = per_step["sum"] / f.step_seconds
    per_step["attainment"] = per_step["sum"] / per_step["count"]
    notes = data.annotations(ctx.url, f.start_seconds, f.end_seconds)
    total_good = int(frame["good"].sum())
    cols = st.columns(3)
    cols[0].metric("Requests", f"{len(frame):,}", border=True)
    cols[1].metric("Good requests", f"{total_good:,}", border=True)
    # NOTE: over the part of the range that holds data, as the Overview's rates
    goodput_rate = data.rate_over_data(ctx.url, c.REQUESTS_TOTAL, f, float(total_good))
    over = span_text(data.data_span(ctx.url, c.REQUESTS_TOTAL, f), f)
    if goodput_rate is None:  # no finished-request counter: the records' own range
        goodput_rate, over = total_good / f.range_seconds, f"over the last {f.range_key}"
    cols[2].metric("Goodput", f"{goodput_rate:.3f} req/s", border=True, help=over)
    st.caption(f"Goodput {over}.")
    left, right = st.columns(2)
    with left:
        st.markdown("**Goodput** (good requests per second)")
        show_chart(
            charts.series_chart(
                per_step, start, end, y="goodput", title="req/s", annotations=notes
            ),
            width="stretch",
        )
    with right:
        st.markdown("**Attainment** (good / all per step)")
        show_chart(
            charts.series_chart(per_step, start, end, y="attainment", title="attainment",
                                annotations=notes, percent=True),
            width="stretch",
        )  # fmt: skip
