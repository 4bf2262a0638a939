"""Incidents: firing and resolved alerts with severity and duration; the detail view (URL
``?id=<fingerprint>``) shows the timeline, the evidence table and ranked hypotheses from
triage, the recommended knob, and the slowest requests linking to Traces. Silencing needs
the admin token (``TAILWATCH_ADMIN_TOKEN``)."""

from __future__ import annotations

import os

import pandas as pd
import streamlit as st

from alerts.triage_report import format_change, format_seconds, format_value
from console import data
from console.incidents import INCIDENT_ID, check_token, silence_for
from console.page_kit import (
    INCIDENTS_PAGE,
    TRACES_PAGE,
    empty,
    escape,
    live_filters,
    page_context,
    section,
)
from console.settings import ADMIN_TOKEN_ENV

ctx = page_context()
now = data.now()
incident_id = st.query_params.get("id", "")


@st.fragment(run_every=ctx.live_seconds)
def _list() -> None:
    st.title("Incidents")
    g = live_filters(ctx)
    frame = data.incident_list(ctx.url, g.start_seconds, g.end_seconds, g.end_seconds)
    if frame.empty:
        empty(
            f"No incidents in the last {g.range_key}.",
            "Incidents are alerts that fired: run the evaluator with `tailwatch alerts run` "
            "(rules from tailwatch.yaml or the built-ins), or widen the time range.",
        )
        return
    firing = int((frame["state"] == "firing").sum())
    cols = st.columns(3)
    cols[0].metric("Firing", f"{firing}", border=True)
    cols[1].metric("Resolved", f"{len(frame) - firing}", border=True)
    cols[2].metric("Longest (min)", f"{frame['duration_s'].max() / 60:.1f}", border=True)
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "duration_s": st.column_config.NumberColumn("duration (s)", format="%.0f"),
            "started": st.column_config.DatetimeColumn(
                "started (UTC)", format="YYYY-MM-DD HH:mm:ss"
            ),
            "ended": st.column_config.DatetimeColumn("ended (UTC)", format="YYYY-MM-DD HH:mm:ss"),
        },
    )
    st.caption("Open an incident:")
    cols = st.columns(3)
    for i, row in enumerate(frame.head(12).itertuples()):
        cols[i % 3].page_link(
            INCIDENTS_PAGE,
            label=f"{row.state} · {escape(row.alert)} · {row.id}",
            query_params={"id": row.id},
        )


def _detail(fingerprint: str) -> None:
    detail = data.incident_detail(ctx.url, fingerprint, now)
    st.page_link(INCIDENTS_PAGE, label="← all incidents", query_params={})
    if detail is None:
        st.warning(f"No stored alert has the fingerprint {fingerprint}.")
        return
    alert = detail.alert
    st.title(f"{alert.name} · {alert.state.value}")
    st.text(", ".join(f"{k}={v}" for k, v in sorted(alert.labels.items())))
    if alert.annotations.get("summary"):
        st.text(alert.annotations["summary"])
    inc, base = detail.incident, detail.baseline
    stamp = lambda t: f"{pd.Timestamp(t, unit='s', tz='UTC'):%Y-%m-%d %H:%M:%S}"  # noqa: E731
    st.caption(
        f"incident {stamp(inc.start_seconds)} – {stamp(inc.end_seconds)} UTC; baseline "
        f"{stamp(base.start_seconds)} – {stamp(base.start_seconds + base.duration_seconds)} UTC"
    )
    section("Timeline")
    st.dataframe(
        pd.DataFrame(
            [
                (
                    pd.Timestamp(t.at_seconds, unit="s", tz="UTC"),
                    t.from_state.value,
                    t.to_state.value,
                    t.alert.value,
                )
                for t in detail.transitions
            ],
            columns=["at (UTC)", "from", "to", "value"],
        ),
        hide_index=True,
        width="stretch",
        column_config={
            "at (UTC)": st.column_config.DatetimeColumn(format="YYYY-MM-DD HH:mm:ss.SSS")
        },
    )
    report = detail.report
    if report is None:
        st.error("Triage could not read the store: " + escape(detail.error))
        return
    section("Verdict and recommended knob")
    rec = report.recommendation
    if rec is None:
        st.info(f"Verdict: {report.verdict}.")
    else:
        knob = rec.action.knob or "(outside the engine)"
        where = f" on {rec.target}" if rec.target else ""
        st.success(f"Cause: {rec.cause.value}{where}. Recommended: {rec.action.summary}")
        st.text(f"knob: {knob}; {rec.action.why}")
    section("Evidence", "incident window against the baseline before it")
    st.dataframe(
        pd.DataFrame(
            [
                (
                    r.what.strip(),
                    r.scope,
                    format_value(r.key, r.incident) if r.is_known else "not enough data",
                    format_value(r.key, r.baseline),
                    format_change(r),
                    r.source.value,
                    r.note,
                )
                for r in report.evidence
            ],
            columns=["signal", "scope", "incident", "baseline", "change", "source", "note"],
        ),
        hide_index=True,
        width="stretch",
    )
    section("Hypotheses", "ranked; each score is the product of its ramps (docs/alerts.md)")
    st.dataframe(
        pd.DataFrame(
            [
                (
                    h.cause.value,
                    round(h.score, 3),
                    h.scope,
                    "yes" if h.has_enough_data else "not enough data",
                    h.note,
                )
                for h in report.hypotheses
            ],
            columns=["cause", "score", "scope", "data", "note"],
        ),
        hide_index=True,
        width="stretch",
    )
    section("Slowest requests")
    if not report.slowest_requests:
        empty(
            "No slow request was linked.", "Exemplars or request records link them: enable tracing."
        )
    else:
        st.dataframe(
            pd.DataFrame(
                [
                    (
                        r.trace_id,
                        r.request_id or "",
                        r.target or "",
                        format_seconds(r.e2e_seconds),
                        format_seconds(r.ttft_seconds),
                        format_seconds(r.queue_seconds),
                    )
                    for r in report.slowest_requests
                ],
                columns=["trace_id", "request_id", "target", "e2e", "ttft", "queue"],
            ),
            hide_index=True,
            width="stretch",
        )
        cols = st.columns(5)
        for i, r in enumerate(report.slowest_requests[:10]):
            cols[i % 5].page_link(
                TRACES_PAGE, label=f"trace {r.trace_id[:12]}…", query_params={"trace": r.trace_id}
            )
    section("Silence", "mutes this alert's notifications; needs the admin token")
    with st.form("silence", border=True):
        cols = st.columns(4)
        hours = cols[0].number_input("Hours", 0.25, 168.0, 2.0, step=0.25, key="sil_hours")
        author = cols[1].text_input("Your name", max_chars=100, key="sil_author")
        comment = cols[2].text_input("Why", max_chars=500, key="sil_comment")
        token = cols[3].text_input("Admin token", type="password", max_chars=512, key="sil_token")
        if st.form_submit_button("Silence this alert"):
            if not check_token(token, os.environ.get(ADMIN_TOKEN_ENV)):
                st.error(
                    "Not silenced: the admin token is wrong, or the console was started without "
                    f"one ({ADMIN_TOKEN_ENV})."
                )
            else:
                try:
                    silence = silence_for(alert, float(hours), author, comment, now)
                except ValueError as error:
                    st.error("Not silenced: " + escape(str(error)))
                else:
                    data.save_silence(ctx.url, silence)
                    st.success(
                        f"Silenced until {stamp(silence.ends_at_seconds)} UTC (id {silence.id})."
                    )


if incident_id:
    if INCIDENT_ID.fullmatch(incident_id):
        _detail(incident_id)
    else:
        st.warning(
            f"id={escape(incident_id[:40])} is not an incident id (16 hex digits); "
            "showing all incidents."
        )
        _list()
else:
    _list()
