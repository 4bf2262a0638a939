"""Traces: find a request by trace id or request id, or list a tenant's and the window's
slowest requests; the waterfall of one request (queue, each prefill chunk, decode,
preemptions) from its stored span. The URL's ``trace`` or ``request`` opens one directly."""

from __future__ import annotations

import streamlit as st

from console import charts, data
from console.page_kit import TRACES_PAGE, empty, escape, ms, page_context, section, show_chart
from console.request_frames import (
    REQUEST_ID,
    TRACE_ID,
    replica_name,
    request_frame,
    slowest,
    waterfall_frame,
)

ctx = page_context()
f = ctx.filters
st.title("Traces")

trace_param = st.query_params.get("trace", "")
request_param = st.query_params.get("request", "")
query = st.text_input(
    "Trace id or request id",
    value=trace_param or request_param,
    placeholder="32 hex digits, or chatcmpl-…",
    key="trace_query",
).strip()

trace_id = ""
if query:
    if TRACE_ID.fullmatch(query):
        trace_id = query.lower()
    elif REQUEST_ID.fullmatch(query):
        record = data.request_by_id(ctx.url, query)
        if record is None:
            st.warning(f"No stored request has the id {escape(query)!s}.")
        else:
            trace_id = record.trace_id
    else:
        st.warning(
            "Not a trace id (32 hex digits) or a request id (letters, digits and . _ : -, "
            "at most 128): " + escape(query[:80])
        )

if trace_id:
    if st.query_params.get("trace") != trace_id:
        st.query_params["trace"] = trace_id
    spans = data.trace(ctx.url, trace_id)
    section("Waterfall", f"trace {trace_id}")
    if not spans:
        empty(
            "No spans stored for this trace.",
            "Spans are kept 14 days by default (`store.span_retention_days`); check that the "
            "engine exports OTLP to the collector (`--otlp-endpoint`).",
        )
    else:
        frame = waterfall_frame(spans)
        chart = charts.waterfall_chart(frame)
        show_chart(chart, width="stretch")
        record = next((r for r in data.records(ctx.url, f) if r.trace_id == trace_id), None) or (
            data.request_by_id(ctx.url, request_param) if request_param else None
        )
        if record is not None:
            names = data.replica_names(ctx.url)
            shown = replica_name(record, names)
            instance = (
                f" · engine instance id {escape(record.replica)} (service.instance.id)"
                if record.replica and record.replica != shown
                else ""
            )
            st.caption(f"Replica **{escape(shown or 'unknown')}**{instance}")
            cols = st.columns(5)
            cols[0].metric("Queue", ms(record.queue_seconds), border=True)
            cols[1].metric("TTFT", ms(record.ttft_seconds), border=True)
            cols[2].metric("E2E", ms(record.e2e_seconds), border=True)
            cols[3].metric("Output tokens", f"{record.output_tokens or 0:,}", border=True)
            cols[4].metric("Preemptions", f"{record.preemptions or 0}", border=True)
        st.dataframe(frame, hide_index=True, width="stretch")

section(
    "Slowest requests in the window",
    "by end-to-end latency; tenant, model and target from the sidebar filters",
)
records = data.records(ctx.url, f)
if not records:
    empty(
        "No request records in this window.",
        "Request records come from engine traces: start engines with "
        "`--otlp-endpoint http://127.0.0.1:4318/v1/traces` and `tailwatch collect`, send traffic "
        "(`tailwatch load run`), or widen the time range.",
    )
else:
    top = slowest(records, 20)
    st.dataframe(
        request_frame(top, data.replica_names(ctx.url)),
        hide_index=True,
        width="stretch",
        column_config={
            "replica": st.column_config.TextColumn(
                "replica", help="the scrape target, as every other page names it"
            ),
            "instance_id": st.column_config.TextColumn(
                "engine instance id", help="the spans' service.instance.id"
            ),
            "arrival": st.column_config.DatetimeColumn(
                "arrival (UTC)", format="YYYY-MM-DD HH:mm:ss.SSS"
            ),
        },
    )
    st.caption("Open a trace:")
    cols = st.columns(4)
    for i, record in enumerate(top[:8]):
        cols[i % 4].page_link(
            TRACES_PAGE,
            label=f"{record.trace_id[:12]}… · {ms(record.e2e_seconds)}",
            query_params={"trace": record.trace_id},
        )
