"""The sections of one incident's page (``?id=``): the header (what, where, when, who
acknowledged it), the chart of the alert's latency around it, the verdict with the
recommended knob, the ranked hypotheses, the evidence, the slowest requests linking to
Traces, and the acknowledge form. Stored strings are
written as text: dataframes, or markdown with every punctuation character escaped."""

from __future__ import annotations

import math

import pandas as pd
import streamlit as st

import console.incidents.breakdowns as incident_breakdowns
import console.incidents.charts as incident_charts
from alerts import MAX_ACK_BY, MAX_ACK_COMMENT, Acknowledgement, Incident
from alerts.triage import (
    NO_CAUSE,
    NOT_ENOUGH_DATA,
    SCORE_FLOOR,
    TriageReport,
    format_change,
    format_seconds,
    format_value,
    recent_change_text,
)
from alerts.views import age
from console import data
from console.incidents.frames import IncidentDetail, check_token
from console.page_kit import TRACES_PAGE, empty, escape, section, show_chart
from slo.window import format_utc

SEVERITY_COLOUR = {"page": "red", "ticket": "orange"}


def _stamp(seconds: float) -> str:
    return f"{pd.Timestamp(seconds, unit='s', tz='UTC'):%Y-%m-%d %H:%M:%S}"


def _rows_height(rows: int) -> int:
    """A dataframe's height showing every row (up to 30) without an inner scroll."""
    return 38 + 35 * min(max(rows, 1), 30)


def header(detail: IncidentDetail, now: float) -> None:
    """Title, severity and state, labels, summary, the key times and the triage windows."""
    inc = detail.incident
    st.title(f"#{inc.id} · {escape(inc.alertname)} · {inc.state}")
    colour = SEVERITY_COLOUR.get(inc.severity, "gray")
    badges = [f":{colour}-badge[{escape(inc.severity or 'no severity')}]"]
    badges.append(":red-badge[firing]" if inc.is_open else ":blue-badge[resolved]")
    st.markdown(
        " ".join(badges)
        + "  "
        + escape(
            ", ".join(
                f"{k}={v}"
                for k, v in sorted(inc.labels.items())
                if k not in ("alertname", "severity")
            )
        )
    )
    if inc.summary:
        st.markdown(f"**{escape(inc.summary)}**")
    st.markdown(ack_line(inc.ack))
    end = inc.resolved_at_seconds
    cols = st.columns(5)
    cols[0].metric("Pending since (UTC)", _stamp(inc.pending_since_seconds)[11:], border=True)
    cols[1].metric("Fired (UTC)", _stamp(inc.started_at_seconds)[11:], border=True)
    cols[2].metric(
        "Resolved (UTC)", "still firing" if end is None else _stamp(end)[11:], border=True
    )
    cols[3].metric(
        "Duration", age((now if end is None else end) - inc.started_at_seconds), border=True
    )
    value = inc.value
    shown = "—" if value is None or not math.isfinite(value) else f"{value:.4g}"
    if shown != "—" and inc.labels.get("metric") in ("ttft", "itl", "e2e"):
        shown = format_seconds(value)  # NOTE: a latency rule's value is in seconds
    cols[4].metric("Rule value", shown, border=True, help="the rule's value when last evaluated")
    w, b = detail.window, detail.baseline
    st.caption(
        f"Triage window {format_utc(w.start_seconds)} – {format_utc(w.end_seconds)} (from one "
        f"rule window before pending) against the baseline {format_utc(b.start_seconds)} – "
        f"{format_utc(b.end_seconds)}, as `tailwatch incident show {inc.id}` · alert "
        f"fingerprint {inc.fingerprint}"
    )


def latency_chart(url: str, detail: IncidentDetail) -> None:
    """The alert's latency percentiles over the baseline and the triage window (shaded)."""
    family, name = incident_charts.latency_family(detail)
    selector = incident_charts.series_selector(detail)
    start, end = detail.baseline.start_seconds, detail.window.end_seconds
    frame = data.percentile_frame_between(url, family, selector, start, end)
    scope = ", ".join(f"{k}={v}" for k, v in selector.items()) or "all series"
    st.markdown(f"**{name} percentiles around the incident** (ms) · {escape(scope)}")
    if frame.empty:
        st.caption(f"No {name} histograms stored around the incident.")
        return
    spans = incident_charts.span_frame(detail)
    ts = lambda t: pd.Timestamp(t, unit="s", tz="UTC")  # noqa: E731
    changes = incident_charts.change_frame(detail.changes)
    chart = incident_charts.incident_chart(frame, spans, ts(start), ts(end), changes)
    show_chart(chart, width="stretch")


def verdict(report: TriageReport) -> None:
    """The answer first: the likely cause and what to do, or why there is none."""
    rec = report.recommendation
    if rec is None:
        why = {
            NO_CAUSE: "every hypothesis scores below the floor",
            NOT_ENOUGH_DATA: "the incident window has too little data to rank causes",
        }.get(report.verdict, "")
        st.info(f"**Verdict: {escape(report.verdict)}.** {why}")
        return
    where = f" on {escape(rec.target)}" if rec.target else ""
    action = rec.action
    knob = (
        f"{action.direction.value} `{action.knob}`"
        if action.knob and action.direction
        else "no engine knob"
    )
    lines = [
        f"**Likely cause: {escape(rec.cause.value)}{where}.**",
        f"**Do:** {escape(action.summary)} ({knob}).",
        f"Why: {escape(action.why)}",
    ]
    lines += [f"Or: {escape(a.summary)}" for a in rec.alternatives]
    if rec.change is not None:
        lines.insert(1, f"**Change:** {escape(rec.change.describe())}.")
    lines += [f"Recent change: {escape(recent_change_text(h))}." for h in rec.recent_changes]
    st.success("  \n".join(lines), icon=":material/lightbulb:")


def triage(report: TriageReport) -> None:
    """Verdict, hypotheses, evidence and the slowest requests."""
    section("Verdict and recommended knob")
    verdict(report)
    section(
        "Hypotheses",
        "most likely first; each score is the product of its ramps (docs/alerts.md, Triage)",
    )
    assessed = [(rank, h) for rank, h in enumerate(report.hypotheses, 1) if h.has_enough_data]
    unassessed = [(rank, h) for rank, h in enumerate(report.hypotheses, 1) if not h.has_enough_data]
    if assessed:
        st.dataframe(
            pd.DataFrame(
                [(rank, h.cause.value, f"{h.score:.2f}", h.scope, "yes", h.note)
                 for rank, h in assessed],
                columns=["#", "cause", "score", "scope", "data", "note"],
            ),
            hide_index=True,
            width="stretch",
            height=_rows_height(len(assessed)),
        )  # fmt: skip
    else:
        st.caption("No cause had the data to be assessed.")
    if unassessed:
        # NOTE: a cause without its signals (no LoRA, no speculation, no tracing) scores 0;
        # listed apart so the causes that were weighed lead, and nothing is hidden
        with st.expander(f"{len(unassessed)} causes not assessed: not enough data"):
            st.dataframe(
                pd.DataFrame(
                    [(rank, h.cause.value, h.scope, h.note) for rank, h in unassessed],
                    columns=["#", "cause", "scope", "missing"],
                ),
                hide_index=True,
                width="stretch",
                height=_rows_height(len(unassessed)),
            )
    section("Evidence", "incident window against the baseline before it")
    known = [r for r in report.evidence if r.is_known]
    unknown = [r for r in report.evidence if not r.is_known]
    st.dataframe(
        pd.DataFrame(
            [
                (
                    r.what.strip(),
                    r.scope,
                    format_value(r.key, r.incident),
                    format_value(r.key, r.baseline),
                    format_change(r),
                    r.source.value,
                    r.note,
                )
                for r in known
            ],
            columns=["signal", "scope", "incident", "baseline", "change", "source", "note"],
        ),
        hide_index=True,
        width="stretch",
        height=_rows_height(len(known)),
    )
    if unknown:
        with st.expander(f"{len(unknown)} signals without data in the incident window"):
            st.dataframe(
                pd.DataFrame(
                    [(r.what.strip(), r.scope, format_value(r.key, r.baseline), r.source.value, r.note)
                     for r in unknown],
                    columns=["signal", "scope", "baseline", "source", "note"],
                ),
                hide_index=True,
                width="stretch",
                height=_rows_height(len(unknown)),
            )  # fmt: skip
    section("Slowest requests", "in the incident window; open one in Traces")
    if not report.slowest_requests:
        empty(
            "No slow request was linked.", "Exemplars or request records link them: enable tracing."
        )
        return
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
        height=_rows_height(len(report.slowest_requests)),
    )
    cols = st.columns(5)
    for i, r in enumerate(report.slowest_requests[:10]):
        cols[i % 5].page_link(
            TRACES_PAGE,
            label=f"{format_seconds(r.e2e_seconds)} · trace {r.trace_id[:12]}…",
            icon=":material/timeline:",
            query_params={"trace": r.trace_id},
        )


def ack_line(ack: Acknowledgement | None) -> str:
    """Who is on it, since when (UTC) and why, as escaped markdown."""
    if ack is None:
        return ":gray-badge[not acknowledged]"
    why = f" · {escape(ack.comment)}" if ack.comment else ""
    return (
        f":green-badge[acknowledged] by **{escape(ack.by)}** at {_stamp(ack.at_seconds)} UTC{why}"
    )


#: What the last acknowledge or unacknowledge did, shown after the page reruns with it.
_ACK_DONE = "ack_done"


def acknowledge_form(url: str, incident: Incident, now: float, expected_token: str | None) -> None:
    """Acknowledge (someone is on it; mutes nothing) or undo it, beside the silence form; the
    admin token is needed, as for silencing. A resolved incident cannot be acknowledged."""
    section(
        "Acknowledge", "says you are on it; mutes nothing (a silence does); needs the admin token"
    )
    done = st.session_state.pop(_ACK_DONE, None)
    if done:
        st.success(done)
    if not incident.is_open:
        st.caption("Resolved: a resolved incident cannot be acknowledged or unacknowledged.")
        return
    with st.form("acknowledge", border=True):
        cols = st.columns(3)
        by = cols[0].text_input("Your name", max_chars=MAX_ACK_BY, key="ack_by")
        comment = cols[1].text_input(
            "Comment (optional)", max_chars=MAX_ACK_COMMENT, key="ack_comment"
        )
        token = cols[2].text_input("Admin token", type="password", max_chars=512, key="ack_token")
        buttons = st.columns(2)
        acking = buttons[0].form_submit_button("Acknowledge")
        undoing = buttons[1].form_submit_button("Unacknowledge", disabled=incident.ack is None)
    if not (acking or undoing):
        return
    verb = "acknowledged" if acking else "unacknowledged"
    if not check_token(token, expected_token):
        st.error(f"Not {verb}: the admin token is wrong, or the console was started without one.")
        return
    try:
        ack = Acknowledgement.create(by, now, comment if acking else "")
        if acking:
            before = data.acknowledge(url, incident.id, ack)
            text = f"Acknowledged by {ack.by} at {_stamp(now)} UTC"
            text += "" if before is None else f" (updated: it was {before.by}'s)"
        else:
            before = data.unacknowledge(url, incident.id)
            text = f"Unacknowledged by {ack.by} at {_stamp(now)} UTC (it was {before.by}'s)"
    except ValueError as error:
        st.error(f"Not {verb}: " + escape(str(error)))
        return
    st.session_state[_ACK_DONE] = escape(text)
    st.rerun()


def breakdowns(url: str, detail: IncidentDetail) -> None:
    """Per tenant and per adapter, when a hypothesis worth reading points there: who the
    incident fell on, its share of the requests before and during, and its latency."""
    report = detail.report
    if report is None:
        return
    causes = [h.cause for h in report.hypotheses if h.score >= SCORE_FLOOR]
    window = (detail.window.start_seconds, detail.window.end_seconds)
    baseline = (detail.baseline.start_seconds, detail.baseline.end_seconds)
    for dimension in incident_breakdowns.DIMENSIONS:
        if not incident_breakdowns.points_here(dimension, causes):
            continue
        p95 = f"{dimension.latency_name} p95"
        section(
            f"By {dimension.name}",
            f"each {dimension.name}'s requests and share, incident window against the "
            f"baseline, and its {p95}; the largest rise first",
        )
        frame = data.incident_breakdown(url, dimension.name, window, baseline)
        if frame.empty:
            st.caption(f"No per-{dimension.name} series stored for these windows.")
            continue
        percent = st.column_config.NumberColumn(format="percent")
        st.dataframe(
            frame,
            hide_index=True,
            width="stretch",
            column_config={
                "share": percent,
                "share before": percent,
                f"{p95} (ms)": st.column_config.NumberColumn(format="%.1f"),
                f"{p95} before (ms)": st.column_config.NumberColumn(format="%.1f"),
                "change": st.column_config.NumberColumn(format="×%.2f"),
            },
        )


def client_gap(url: str, detail: IncidentDetail) -> None:
    """Where client timings are stored (a gateway's, a load generator's): the first token
    as the clients saw it against the engines' own, p95 before and during, and the gap."""
    window = (detail.window.start_seconds, detail.window.end_seconds)
    baseline = (detail.baseline.start_seconds, detail.baseline.end_seconds)
    frame = data.incident_client_gap_frame(url, window, baseline)
    if frame.empty:
        return
    section(
        "Clients against engines",
        "the first token's p95 as the clients saw it (through the gateway) and as the engines "
        "report it, baseline against the incident window: a gap that grew while the engines "
        "held is time spent in front of them",
    )
    ms = st.column_config.NumberColumn(format="%.1f")
    st.dataframe(
        frame,
        hide_index=True,
        width="stretch",
        column_config={name: ms for name in frame.columns[1:]},
    )
