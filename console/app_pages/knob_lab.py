"""Knob lab: one engine target's live knobs (edited with the admin token) and its latency
with every knob change marked; the headroom to the knee measured for its current knobs (and
a warning when a change since has made it stale); sweeps and replays started from the page
(admin token); the stored sweeps with the knee chart, the A/B of two measurements against
run-to-run noise, and replays against production."""

from __future__ import annotations

import os
from dataclasses import replace

import streamlit as st

from console import data
from console.knob_lab import job_section, replay_job_section, sections, study_sections
from console.knob_lab import knobs as lab_knobs
from console.page_kit import empty, escape, live_filters, page_context
from console.settings import ADMIN_TOKEN_ENV

ctx = page_context()
st.title("Knob lab")
st.caption(
    "Tune an engine: its knobs live, the knee of a sweep against the live load, and whether "
    "a change is bigger than run-to-run noise. Simulated engines are labelled as such."
)

targets = data.catalog(ctx.url)["target"]
target = None
cols = st.columns([2, 3, 2])
token = os.environ.get(ADMIN_TOKEN_ENV, "")
if token:
    cols[2].caption(f"Admin token from {ADMIN_TOKEN_ENV}")
else:
    token = cols[2].text_input("Admin token", type="password", key="lab_token")
if targets:
    default = targets.index(ctx.filters.target) if ctx.filters.target in targets else 0
    target = cols[0].selectbox("Engine target", targets, index=default, key="lab_target")
    guessed = lab_knobs.engine_url(target) or ""
    engine_url = cols[1].text_input(
        "Engine URL", value=guessed, key=f"lab_url_{target}",
        help="where /admin/config is served; from the target's host:port when it has one",
    ).strip().rstrip("/") or None  # fmt: skip
    if engine_url is not None:
        typed, engine_url = engine_url, lab_knobs.engine_url(engine_url)
        if engine_url is None:
            st.error(f"Not an http(s) URL or host:port: {escape(typed)}")
    reply = sections.knobs_section(target, engine_url, token)
    knobs = dict(reply.knobs) if reply is not None and not reply.error else None
    target_filters = replace(ctx.filters, target=target)
    sections.latency_section(ctx, target_filters)
    sections.headroom_section(ctx, ctx.filters, target, knobs)
else:
    empty(
        "No engine targets in the store.",
        "Scrape an engine with `tailwatch collect` (its targets' knobs and load appear "
        "here); stored sweeps and replays are shown below without one.",
    )

job_section.start_sweep_section(ctx, token)
replay_job_section.start_replay_section(ctx, token)


@st.fragment(run_every=ctx.live_seconds)
def studies() -> None:
    live_filters(ctx)  # NOTE: a live rerun re-reads the runs (a running sweep's progress)
    job_section.note_ended_jobs((job_section.JOBS_KEY, replay_job_section.REPLAY_JOBS_KEY))
    runs = study_sections.sweeps_section(ctx)
    study_sections.ab_section(ctx, runs)
    study_sections.replay_section(ctx)


studies()
