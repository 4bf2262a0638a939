"""Cost: what a million output tokens cost at the real utilisation (effective), at the
measured knee (at capacity) and on good tokens only; utilisation; showback per tenant and
model; the comparison with a managed API's per-token price; CSV and FOCUS downloads."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

from collectors import canonical as c
from console import charts, data
from console.cost_frames import billed_time, cost_summary, managed_api_cost, showback_rows
from console.page_kit import (
    duration_text,
    empty,
    escape,
    page_context,
    percent,
    section,
    show_chart,
)
from console.request_frames import good_flags
from slo import Pricing, SLOError, focus_csv, showback_totals

ctx = page_context()
f = ctx.filters
st.title("Cost")

with st.container(border=True):
    cols = st.columns(6)
    currency = cols[0].text_input(
        "Currency (ISO 4217)", value="USD", max_chars=3, key="cost_currency"
    )
    price = cols[1].number_input(
        "GPU-hour price", min_value=0.0, value=2.5, step=0.1, key="cost_price"
    )
    num_gpus = cols[2].number_input(
        "GPUs (0: from the targets)", min_value=0, value=0, step=1, key="cost_gpus",
        help="0 counts them from the targets: the GPUs NVML reports, else one per replica",
    )  # fmt: skip
    knee = cols[3].number_input(
        "Measured knee (output tok/s)",
        min_value=0.0,
        value=0.0,
        step=10.0,
        key="cost_knee",
        help="capacity at the SLO, from `tailwatch load sweep`; 0: unknown",
    )
    api_price = cols[4].number_input(
        "Managed API price / 1M output tokens", min_value=0.0, value=0.0, step=0.1, key="cost_api"
    )
    cols[5].caption("Prices are per GPU-hour in the chosen currency.")  # fmt: skip

try:
    pricing = Pricing(currency.strip().upper(), float(price))
except SLOError as error:
    st.error(f"Currency: {escape(str(error))}")
    st.stop()

records = data.records(ctx.url, f)
served = data.counter_total(ctx.url, c.GENERATION_TOKENS_TOTAL, f)
if served is None:
    served = float(sum(r.output_tokens or 0 for r in records))
flags = good_flags(records, ctx.slos)
good_tokens = float(sum((r.output_tokens or 0) for r, g in zip(records, flags, strict=True) if g))
billed = billed_time(
    data.observed_spans(ctx.url, f), data.nvml_gpus(ctx.url), int(num_gpus) or None
)
summary = cost_summary(
    pricing, billed.num_gpus, billed.observed_seconds, served, good_tokens,
    knee if knee > 0 else None,
)  # fmt: skip
if billed.observed_seconds > 0:
    st.caption(
        f"GPU time billed: {billed.gpu_seconds / 3600:,.3g} GPU-hours, {billed.basis}, "
        f"over the {duration_text(billed.observed_seconds)} the targets were observed in the "
        f"last {f.range_key}; tokens from the engines' counters, good tokens and showback from "
        "request records."
    )
else:
    st.caption(f"No target was observed in the last {f.range_key}: nothing is billed.")


def money(x: float) -> str:
    return "—" if not math.isfinite(x) else f"{x:,.2f} {pricing.currency}"


def amount(x: float) -> str:
    return "—" if not math.isfinite(x) else f"{x:,.2f}"


section("Cost per 1M output tokens")
cols = st.columns(5)
cols[0].metric(f"Effective ({pricing.currency})", amount(summary.effective), border=True,
               help="billed GPU time over the output tokens served")  # fmt: skip
cols[1].metric(f"At capacity ({pricing.currency})", amount(summary.at_capacity), border=True,
               help="serving at the measured knee all the time; enter the knee above")  # fmt: skip
cols[2].metric(f"Good tokens only ({pricing.currency})", amount(summary.good_only), border=True,
               help="over the output tokens of requests that met their SLOs")  # fmt: skip
cols[3].metric("Utilisation", percent(summary.utilisation, 1), border=True,
               help="output tokens served per second over the knee")  # fmt: skip
cols[4].metric("Billed in window", money(summary.billed_cost), border=True)
if api_price > 0:
    api = managed_api_cost(served, api_price)
    ratio = summary.billed_cost / api if api > 0 else math.nan
    st.info(
        f"The same {served:,.0f} output tokens at the managed API: {money(api)} "
        f"(self-hosted costs {ratio:.2f}× that)."
        if math.isfinite(ratio)
        else "No output tokens served in this window to compare."
    )

section("Showback", "GPU time shared among requests in proportion to their tokens, per hour")
if not records:
    empty(
        "No request records in this window.",
        "Showback needs request records (engine traces to `tailwatch collect`); widen the range.",
    )
    st.stop()
rows = showback_rows(records, pricing, billed.gpu_seconds)
if not rows:
    empty("The window's requests carry no token counts.", "Check the engines' trace attributes.")
    st.stop()
left, right = st.columns(2)
for col, by in ((left, "tenant"), (right, "model")):
    totals = showback_totals(rows, by)  # type: ignore[arg-type]
    frame = pd.DataFrame(
        {
            by: [t.key for t in totals],
            "gpu_hours": [t.gpu_hours for t in totals],
            "input_tokens": [t.input_tokens for t in totals],
            "output_tokens": [t.output_tokens for t in totals],
            "cost": [t.billed_cost for t in totals],
            "cost_per_1M_output": [t.cost_per_million_output_tokens for t in totals],
        }
    )
    with col:
        st.markdown(f"**Per {by}** ({pricing.currency})")
        chart = charts.bar_chart(frame, x="cost", y=by, title=f"cost ({pricing.currency})")
        show_chart(chart, width="stretch")
        # NOTE: a short window bills fractions of a cent: four decimals, not the default two
        # that showed 0.00 per tenant; short headers (the currency is in the title above) and
        # a narrow key column, so every figure stays on screen beside the other table
        st.dataframe(
            frame,
            hide_index=True,
            width="stretch",
            column_config={
                by: st.column_config.TextColumn(by, width="small"),
                "gpu_hours": st.column_config.NumberColumn("GPU-h", format="%.4f"),
                "input_tokens": st.column_config.NumberColumn("in tok", format="%d"),
                "output_tokens": st.column_config.NumberColumn("out tok", format="%d"),
                "cost": st.column_config.NumberColumn("cost", format="%.4f"),
                "cost_per_1M_output": st.column_config.NumberColumn(
                    "per 1M out", format="%.2f",
                    help=f"{pricing.currency} per million output tokens",
                ),
            },
        )  # fmt: skip
table = pd.DataFrame([r._asdict() if hasattr(r, "_asdict") else r.__dict__ for r in rows])
cols = st.columns(2)
cols[0].download_button(
    "Download showback CSV", table.to_csv(index=False), file_name="tailwatch-showback.csv",
    mime="text/csv", key="dl_csv",
)  # fmt: skip
cols[1].download_button(
    "Download FOCUS CSV", focus_csv(rows), file_name="tailwatch-focus.csv", mime="text/csv",
    key="dl_focus",
)  # fmt: skip
