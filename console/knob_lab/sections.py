"""The knob lab's live sections: one engine target's knobs (read, and edited with the admin
token), its TTFT/ITL p95 over the window with each knob change a rule mark, and the headroom
to the knee measured for its current knobs, with the stale-knee warning. Rendered by
``app_pages/knob_lab.py``; reads go through :mod:`console.data`."""

from __future__ import annotations

import time
from dataclasses import replace

import pandas as pd
import streamlit as st

import console.knob_lab.frames as lab_frames
import console.knob_lab.headroom as lab_headroom
import console.knob_lab.knobs as lab_knobs
from collectors import canonical as c
from collectors.store.lab_records import LabRun
from console import charts, data
from console.filters import Filters
from console.page_kit import PageContext, empty, escape, rate, section, show_chart, span, span_text

SWEEP_HINT = (
    "Run a sweep of rates × one knob's values, e.g. `tailwatch sweep --engine "
    "sim:llama-3.1-8b@h100 --knob max_num_batched_tokens=512,4096 --rates 5,10,20 "
    "--repeats 3` (or `--url` for a running engine, `--engine tiny` for a bundled one) "
    "against this store (`--db`); its points are drawn here as they are measured."
)


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


def knobs_section(target: str, engine_url: str | None, token: str) -> lab_knobs.KnobReply | None:
    """The knobs in force and the edit form; returns the engine's reply (``None``: no URL)."""
    section(
        "Live knobs",
        "GET /admin/config on the target's engine; edits are PATCH /admin/config with the "
        "admin token, applied between two engine steps, counted in "
        "tailwatch:knob_changes_total and stored by the collector at its next scrape.",
    )
    if engine_url is None:
        empty(
            f"No engine URL for target {escape(target)}.",
            "Targets named host:port (the collector's default) are reached at "
            "`http://host:port`; type the engine's URL above for any other name.",
        )
        return None
    reply = data.engine_knobs(engine_url, token)
    if reply.error:
        st.error("Cannot read the knobs: " + escape(reply.error))
        return reply
    simulated = str(reply.knobs.get("model", "")).startswith("sim:")
    if simulated:
        st.caption("Simulated engine (" + escape(str(reply.knobs["model"])) + "): not production")
    rows = [
        {"knob": k, "value": str(v), "live edit": "yes" if k in lab_knobs.EDITABLE_KNOBS else ""}
        for k, v in sorted(reply.knobs.items())
    ]
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch", key="lab_knob_table")
    editable = [k for k in lab_knobs.EDITABLE_KNOBS if k in reply.knobs]
    with st.form("lab_edit", border=True):
        cols = st.columns([2, 2, 1])
        knob = cols[0].selectbox("Knob", editable, key="lab_edit_knob")
        value_text = cols[1].text_input(
            "New value", key="lab_edit_value", help="JSON: 512, true, null (unbounded), 0.05"
        )
        submitted = cols[2].form_submit_button("Apply")
    if submitted and knob is not None:
        value, problem = lab_knobs.parse_value(value_text, reply.knobs.get(knob))
        if problem:
            st.error(f"Not changed: {escape(knob)}: {escape(problem)}")
        elif not token:
            st.error("Not changed: an admin token is needed (TAILWATCH_ADMIN_TOKEN or above)")
        else:
            changed = data.set_engine_knobs(engine_url, token, {knob: value})
            if changed.error:
                st.error("Not changed: " + escape(changed.error))
            else:
                done = ", ".join(
                    f"{e.get('knob')} {e.get('old')!r} → {e.get('new')!r}" for e in changed.changes
                )
                st.success("Changed: " + escape(done or "nothing (the value was already so)"))
                reply = changed
    return reply


def latency_section(ctx: PageContext, f: Filters) -> None:
    section(
        "Latency and knob changes",
        "TTFT and ITL p95 over the window for this target; each live knob change is a purple "
        "dashed rule (alert transitions orange and blue).",
    )
    start, end = span(f)
    notes = data.annotations(ctx.url, f.start_seconds, f.end_seconds)
    cols = st.columns(2)
    for col, (family, name) in zip(
        cols, ((c.TTFT_SECONDS, "TTFT"), (c.ITL_SECONDS, "ITL")), strict=True
    ):
        frame = data.percentile_frame(ctx.url, family, f)
        frame = frame[frame["percentile"] == "p95"] if not frame.empty else frame
        with col:
            st.markdown(f"**{name} p95**")
            if frame.empty:
                empty(f"No {name} histograms for this target in the window.", "")
            else:
                show_chart(
                    charts.percentile_chart(frame, start, end, annotations=notes),
                    width="stretch",
                )
    changes = [k for k in data.knob_changes(ctx.url, f.start_seconds, f.end_seconds)]
    if changes:
        table = pd.DataFrame(
            [
                {"target": k.target, "knob": k.knob, "changes": int(k.num_changes),
                 "first seen": _utc(k.at_seconds) if k.at_seconds else "—"}
                for k in changes
            ]
        )  # fmt: skip
        st.dataframe(table, hide_index=True, width="stretch", key="lab_changes")


def _knee_of(url: str, run: LabRun, value) -> float | None:
    line = lab_frames.value_label(run, value)
    return lab_frames.knees(run, data.lab_points(url, run.id), [line])[line]


def headroom_section(ctx: PageContext, f: Filters, target: str, knobs: dict | None) -> None:
    section(
        "Headroom to the knee",
        "The live request rate over the window against the knee (highest rate with SLO "
        "attainment ≥ 0.9) of the newest finished sweep that measured the current knobs.",
    )
    runs = data.lab_runs(ctx.url, "sweep") or []
    sweeps = lab_headroom.finished_sweeps(runs)
    if not sweeps:
        empty("No finished sweep to take a knee from.", SWEEP_HINT)
        return
    if knobs:
        found = lab_headroom.newest_matching(sweeps, knobs)
        if found is None:
            why = "; ".join(lab_headroom.mismatches(sweeps[0], knobs)[:3])
            empty(
                "No finished sweep measured this target's current knobs.",
                "The newest differs in " + escape(why or "the swept knob's value") + ". "
                "Re-run the sweep with the current knobs (`tailwatch sweep`).",
            )
            return
        run, value = found
        basis = "matches the current knobs"
    else:
        run, value = sweeps[0], None
        basis = "the newest finished sweep (the knobs could not be read to match them)"
        if run.sweep_knob is not None and run.knob_values:
            value = run.knob_values[0]
            basis += f"; its line {lab_frames.value_label(run, value)}"
    knee = _knee_of(ctx.url, run, value)
    on_target = replace(f, target=target)
    live = data.request_rate(ctx.url, on_target)
    over = span_text(data.data_span(ctx.url, c.REQUESTS_TOTAL, on_target), on_target)
    room = lab_headroom.Headroom(live, knee)
    cols = st.columns(3)
    cols[0].metric(
        f"Live request rate, last {f.range_key}", rate(live, " req/s"), border=True,
        help=f"finished requests per second {over}",
    )  # fmt: skip
    cols[1].metric(
        "Knee", "none passed" if knee is None else rate(knee, " req/s"), border=True,
        help="the sweep's highest rate with mean attainment ≥ 0.9",
    )  # fmt: skip
    cols[2].metric("Headroom", room.text, border=True)
    label = lab_frames.run_label(run)
    st.caption(f"Knee from {escape(label)}: {escape(basis)}")
    measured = lab_headroom.sweep_time(run)
    changes = data.knob_changes(ctx.url, measured, max(data.now(), f.end_seconds))
    for change in lab_headroom.stale_changes(changes, target, measured):
        st.warning(
            f"The knee is stale: {escape(change.knob)} changed at {_utc(change.at_seconds)} "
            f"after the sweep at {_utc(measured)}; re-run the sweep."
        )
