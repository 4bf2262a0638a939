"""The knob lab's stored studies: sweeps (progress of a running one, the knee chart, the
rows), the A/B of two measurements with bootstrap intervals and a verdict, and replays
against production. Rendered by ``app_pages/knob_lab.py``; reads go through
:mod:`console.data`."""

from __future__ import annotations

import time

import streamlit as st

import console.knob_lab.ab as lab_ab
import console.knob_lab.charts as lab_charts
import console.knob_lab.frames as lab_frames
import console.knob_lab.replay as lab_replay
from collectors.store.lab_records import LabRun, LabRunStatus
from console import data
from console.knob_lab.sections import SWEEP_HINT
from console.page_kit import PageContext, empty, escape, section, show_chart

REPLAY_HINT = (
    "Replay a production window against candidate knobs with `tailwatch replay --from … "
    "--to …` against this store (`--db`), or from *Start a replay* with the admin token; "
    "its results are stored and compared here."
)


def _simulated_note(run: LabRun) -> None:
    if run.simulated:
        st.caption(
            f"Simulated: {escape(run.target)} is a simulated engine (roofline step times), "
            "not production."
        )


def _pick_run(runs: list[LabRun], key: str, label: str = "Run", index: int = 0) -> LabRun:
    labels = {lab_frames.run_label(r): r for r in runs}
    return labels[st.selectbox(label, list(labels), index=index, key=key)]


def sweeps_section(ctx: PageContext) -> list[LabRun]:
    section("Sweeps", "Rates × one knob's values; the knee of each value is a dashed rule.")
    runs = data.lab_runs(ctx.url, "sweep")
    if runs is None:
        empty("This store keeps no knob-lab results.", "Migrate it (`tailwatch store migrate`).")
        return []
    if not runs:
        empty("No sweeps stored.", SWEEP_HINT)
        return []
    st.dataframe(lab_frames.run_frame(runs), hide_index=True, width="stretch", key="lab_sweep_runs")
    for running in (r for r in runs if r.status == LabRunStatus.RUNNING):
        done = lab_frames.progress(running, data.lab_points(ctx.url, running.id))
        st.progress(
            done.fraction, text=f"Running: {escape(lab_frames.run_label(running))}: {done.text}"
        )
    # NOTE: the newest finished sweep first (it has a knee); a running one's bars are above
    finished = [i for i, r in enumerate(runs) if r.status == LabRunStatus.FINISHED]
    run = _pick_run(runs, "lab_sweep", index=finished[0] if finished else 0)
    _simulated_note(run)
    points = data.lab_points(ctx.url, run.id)
    if run.status == LabRunStatus.FAILED:
        st.error(f"This sweep failed: {escape(run.error or 'no reason stored')}")
    elif run.status == LabRunStatus.INTERRUPTED:
        st.warning("This sweep was interrupted: the points so far are shown.")
    if not points:
        empty("No points measured yet.", "They appear here as the sweep measures them.")
        return runs
    rows = lab_frames.point_rows(run, points)
    curve = lab_frames.sweep_curve(rows)
    order = lab_frames.value_order(run, points)
    knees = lab_frames.knees(run, points, order)
    cols = st.columns(len(lab_charts.KNEE_PANELS))
    for i, (col, (y, title)) in enumerate(zip(cols, lab_charts.KNEE_PANELS, strict=True)):
        with col:
            st.markdown(f"**{title}** against rate")
            chart = lab_charts.knee_panel(curve, knees, order, y=y, title=title, legend=i == 0)
            show_chart(chart, width="stretch")
    st.dataframe(
        [
            {"line": v, "knee req/s": "none passed" if k is None else f"{k:g}"}
            for v, k in knees.items()
        ],
        hide_index=True,
        key="lab_knees",
    )
    st.dataframe(rows.round(3), hide_index=True, width="stretch", key="lab_rows")
    return runs


def _side(ctx: PageContext, runs: list[LabRun], name: str, default_value: int) -> lab_ab.Side:
    finished = [i for i, r in enumerate(runs) if r.status == LabRunStatus.FINISHED]
    run = _pick_run(runs, f"lab_ab_run_{name}", f"{name}: run", finished[0] if finished else 0)
    points = data.lab_points(ctx.url, run.id)
    # NOTE: by rate first, so A and B default to two knob values at the lowest rate
    order = lab_frames.value_order(run, points)
    pairs = sorted(
        {(lab_frames.value_label(run, p.knob_value), p.rate) for p in points},
        key=lambda pair: (pair[1], order.index(pair[0])),
    )
    if not pairs:
        return lab_ab.Side(f"{name}: no points", (), run.simulated)
    index = min(default_value, len(pairs) - 1)
    label, rate = pairs[
        st.selectbox(
            f"{name}: knob value and rate",
            range(len(pairs)),
            index=index,
            format_func=lambda i: f"{pairs[i][0]} at {pairs[i][1]:g} req/s",
            key=f"lab_ab_point_{name}_{run.id}",
        )
    ]
    chosen = tuple(
        p for p in points if lab_frames.value_label(run, p.knob_value) == label and p.rate == rate
    )
    sim = " (simulated)" if run.simulated else ""
    return lab_ab.Side(
        f"#{run.id} {label} at {rate:g} req/s{sim}", chosen, run.simulated, (run.id, label, rate)
    )


def ab_section(ctx: PageContext, runs: list[LabRun]) -> None:
    section(
        "A/B",
        "Two measurements side by side: B − A with its 95% bootstrap interval (requests "
        "resampled within repeats, and the repeats themselves).",
    )
    if not runs:
        empty("Nothing to compare.", SWEEP_HINT)
        return
    left, right = st.columns(2)
    with left:
        a = _side(ctx, runs, "A", 0)
    with right:
        b = _side(ctx, runs, "B", 1)
    if not a.points or not b.points:
        empty("A side has no measured points.", "Pick a run that has points.")
        return
    frame = data.lab_ab(ctx.url, a.key, b.key)
    verdict, figures = lab_ab.headline(frame)
    text = f"B vs A: **{escape(verdict)}**" + (
        f" ({escape(', '.join(figures))})" if figures else ""
    )
    if verdict == lab_ab.EXCEEDS_RUN_TO_RUN:
        st.success(text)
    elif verdict == lab_ab.WITHIN_NOISE:
        st.info(text)
    else:
        st.warning(text)
    st.caption(f"A = {escape(a.label)}; B = {escape(b.label)}")
    st.dataframe(frame.round(3), hide_index=True, width="stretch", key="lab_ab_table")


def replay_section(ctx: PageContext) -> None:
    section("Replays", "A production window replayed against candidate knobs.")
    runs = data.lab_runs(ctx.url, "replay")
    if not runs:
        empty("No replays stored.", REPLAY_HINT)
        return
    run = _pick_run(runs, "lab_replay")
    _simulated_note(run)
    if run.window is not None:
        start, end = (time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(t)) for t in run.window)
        st.caption(f"Production window replayed: {start} → {end} UTC")
    compared = lab_replay.replay_frame(run, data.lab_points(ctx.url, run.id))
    if compared.problem:
        st.warning(escape(compared.problem))
    for note in compared.notes:
        st.caption("How it ran: " + escape(note))
    itl = compared.frame[compared.frame["figure"].str.startswith("ITL")]
    if not itl.empty and itl["production"].isna().all():
        st.caption(
            "Production's ITL is unknown: its request records keep no inter-token gaps; "
            "compare TPOT."
        )
    if compared.frame.empty:
        empty("No replay points to compare yet.", REPLAY_HINT)
        return
    st.dataframe(compared.frame.round(3), hide_index=True, width="stretch", key="lab_replay_table")
