"""Incidents: the stored incident records (one per firing episode of an alert), open first,
with severity and duration, and a warning when alert rules are failing or the evaluator has
stopped. The detail view (URL ``?id=<incident id>``) answers first (verdict, recommended
knob, hypotheses), then shows the evidence, the slowest requests linking to Traces and the
timeline, triaged over the same windows as ``tailwatch incident show``. Silencing and
acknowledging need the admin token (``TAILWATCH_ADMIN_TOKEN``)."""

from __future__ import annotations

import math
import os

import pandas as pd
import streamlit as st

from alerts.views import age
from console import data
from console.incidents import rule_health
from console.incidents import sections as incident_sections
from console.incidents.frames import check_token, parse_incident_param, silence_for, timeline_frame
from console.page_kit import (
    INCIDENTS_PAGE,
    empty,
    escape,
    live_filters,
    page_context,
    section,
)
from console.settings import ADMIN_TOKEN_ENV

ctx = page_context()
now = data.now()
raw_id = st.query_params.get("id", "")
TIME = "YYYY-MM-DD HH:mm:ss"


def _stamp(seconds: float) -> str:
    return f"{pd.Timestamp(seconds, unit='s', tz='UTC'):%Y-%m-%d %H:%M:%S}"


def _rule_health(detailed: bool) -> None:
    """Rules failing now, or a stale evaluator: alerting that is broken must be seen."""
    found = rule_health.problems(data.evaluation_health(ctx.url), now)
    if not found.any:
        return
    lines = [rule_health.headline(found)]
    if detailed:
        lines += rule_health.failure_lines(found, now)
    if found.failing:
        lines.append("\nDetails: `tailwatch alerts errors`.")
    st.warning("\n".join(lines), icon=":material/error:")


@st.fragment(run_every=ctx.live_seconds)
def _list() -> None:
    st.title("Incidents")
    _rule_health(detailed=True)
    g = live_filters(ctx)
    frame = data.incident_list(ctx.url, g.start_seconds, g.end_seconds, g.end_seconds)
    if frame.empty:
        empty(
            f"No incidents in the last {g.range_key}.",
            "Incidents are alerts that fired: run the evaluator with `tailwatch alerts run` "
            "(rules from tailwatch.yaml or the built-ins), or widen the time range.",
        )
        return
    firing = frame[frame["state"] == "firing"]
    cols = st.columns(4)
    cols[0].metric("Firing now", f"{len(firing)}", border=True)
    cols[1].metric("Paging", f"{int((firing['severity'] == 'page').sum())}", border=True)
    cols[2].metric("Resolved", f"{len(frame) - len(firing)}", border=True)
    cols[3].metric("Longest", age(float(frame["duration_s"].max())), border=True)
    st.caption(
        f"Open incidents, then those resolved in the last {g.range_key}; newest first. "
        "Times in UTC."
    )
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={
            "id": st.column_config.NumberColumn("#", format="%d", width="small"),
            "duration_s": st.column_config.NumberColumn("duration (s)", format="%.0f"),
            "pending_since": st.column_config.DatetimeColumn("pending since", format=TIME),
            "started": st.column_config.DatetimeColumn("fired", format=TIME),
            "resolved": st.column_config.DatetimeColumn("resolved", format=TIME),
            "acknowledged_by": st.column_config.TextColumn("acknowledged by"),
        },
    )
    st.caption("Open an incident:")
    cols = st.columns(3)
    for i, row in enumerate(frame.head(12).itertuples()):
        icon = ":material/notifications_active:" if row.state == "firing" else ":material/check:"
        fired = f"{row.started:%H:%M:%S}"
        cols[i % 3].page_link(
            INCIDENTS_PAGE,
            label=f"#{row.id} · {escape(row.alert)} · {row.state} · fired {fired}",
            icon=icon,
            query_params={"id": str(row.id)},
        )


def _detail(incident_id: int) -> None:
    st.page_link(
        INCIDENTS_PAGE, label="All incidents", icon=":material/arrow_back:", query_params={}
    )
    problem = data.alert_rules(ctx.settings.config_path).problem
    detail = data.incident_detail(ctx.url, ctx.settings.config_path, incident_id, _at())
    if detail is None:
        st.warning(f"No incident has id {incident_id}: pick one from the list.")
        _list()
        return
    incident_sections.header(detail, now)
    incident_sections.latency_chart(ctx.url, detail)
    _rule_health(detailed=False)
    if problem:
        st.warning("Alert rules: " + escape(problem))
    report = detail.report
    if report is None:
        st.error("Triage could not read the store: " + escape(detail.error))
    else:
        incident_sections.triage(report)
        incident_sections.breakdowns(ctx.url, detail)
        incident_sections.client_gap(ctx.url, detail)
    section(
        "Timeline",
        "the alert's transitions in this incident and what changed around it, from the "
        "baseline's start (UTC; changes as triage groups them)",
    )
    st.dataframe(
        timeline_frame(detail.transitions, detail.changes),
        hide_index=True,
        width="stretch",
        column_config={
            "at": st.column_config.DatetimeColumn("at (UTC)", format="YYYY-MM-DD HH:mm:ss.SSS"),
            "what": st.column_config.TextColumn("what happened"),
            "value": st.column_config.NumberColumn("rule value", format="%.4g"),
        },
    )
    _silence(detail.incident.alert)
    incident_sections.acknowledge_form(
        ctx.url, detail.incident, now, os.environ.get(ADMIN_TOKEN_ENV)
    )


def _silence(alert) -> None:
    section("Silence", "mutes this alert's notifications; needs the admin token")
    with st.form("silence", border=True):
        cols = st.columns(4)
        hours = cols[0].number_input("Hours", 0.25, 168.0, 2.0, step=0.25, key="sil_hours")
        author = cols[1].text_input("Your name", max_chars=100, key="sil_author")
        comment = cols[2].text_input("Why", max_chars=500, key="sil_comment")
        token = cols[3].text_input("Admin token", type="password", max_chars=512, key="sil_token")
        if not st.form_submit_button("Silence this alert"):
            return
    if not check_token(token, os.environ.get(ADMIN_TOKEN_ENV)):
        st.error(
            "Not silenced: the admin token is wrong, or the console was started without "
            f"one ({ADMIN_TOKEN_ENV})."
        )
        return
    try:
        silence = silence_for(alert, float(hours), author, comment, now)
    except ValueError as error:
        st.error("Not silenced: " + escape(str(error)))
        return
    data.save_silence(ctx.url, silence)
    st.success(f"Silenced until {_stamp(silence.ends_at_seconds)} UTC (id {silence.id}).")


def _at() -> float:
    """``now`` floored to 5 s: an open incident's triage is reused for a few seconds."""
    return math.floor(now / 5) * 5


def _open(raw: str) -> None:
    ref = parse_incident_param(raw)
    if ref.problem:
        st.warning(escape(ref.problem) + "; showing all incidents.")
        _list()
        return
    wanted = ref.incident_id
    config = ctx.settings.config_path
    if ref.fingerprint is not None and (
        wanted is None or data.incident_detail(ctx.url, config, wanted, _at()) is None
    ):
        wanted = data.latest_incident_of(ctx.url, ref.fingerprint)
        if wanted is None:
            st.warning(
                f"No incident of the alert with fingerprint {ref.fingerprint}; "
                "showing all incidents."
            )
            _list()
            return
        st.caption(f"An old link (alert fingerprint {ref.fingerprint}): its latest incident.")
    assert wanted is not None
    _detail(wanted)


if raw_id:
    _open(raw_id)
else:
    _list()
