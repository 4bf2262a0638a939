"""The knob lab's *Start a replay* form: with the console's admin token, the tuner picks a
production window (the last minutes, the page's time range, an incident's, or from/to in
``tailwatch replay``'s forms) and starts ``tailwatch replay`` of it against candidate knobs
on this store (:mod:`console.knob_lab.replay_jobs`); the replay appears under *Replays* once
it is stored. Without a token configured the form is not offered and the page says what to
run instead."""

from __future__ import annotations

import time

import pandas as pd
import streamlit as st

import console.knob_lab.replay_jobs as lab_replay_jobs
from console import data
from console.knob_lab.job_section import DEFAULT_ENGINE, admin_allowed, jobs_status
from console.knob_lab.study_sections import REPLAY_HINT
from console.page_kit import PageContext, escape, section
from loadgen.replay_fleet import ROUTES

#: The session's started replays (their processes), newest last.
REPLAY_JOBS_KEY = "lab_replay_jobs"
LAST_MINUTES, PAGE_RANGE, INCIDENT, FROM_TO = (
    "The last minutes",
    "The page's time range",
    "An incident's window",
    "From / to",
)


def _utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(seconds))


def _seconds(value: float) -> str:
    """Epoch seconds in a form ``--from``/``--to`` read back exactly (to the millisecond)."""
    return f"{value:.3f}"


def _incidents(ctx: PageContext) -> dict[str, tuple[str, str]]:
    """The incidents of the page's time range: label → (from, to), to now while open."""
    f, now = ctx.filters, data.now()
    frame = data.incident_list(ctx.url, f.start_seconds, f.end_seconds, f.end_seconds)
    windows: dict[str, tuple[str, str]] = {}
    for row in frame.itertuples(index=False):
        start = row.started.timestamp()
        end = now if pd.isna(row.resolved) else row.resolved.timestamp()
        label = f"#{row.id} {row.alert} ({_utc(start)} → {_utc(end)} UTC, {row.state})"
        windows[label] = (_seconds(start), _seconds(end))
    return windows


def _window(ctx: PageContext, choice: str) -> tuple[str, str] | None:
    """The form's window fields for ``choice``, as ``--from``/``--to`` text (``None``:
    there is no incident to choose)."""
    if choice == LAST_MINUTES:
        minutes = st.number_input(
            "Minutes before now", value=15, min_value=1, step=1, key="lab_replay_minutes"
        )
        return f"-{int(minutes)}m", "now"
    if choice == PAGE_RANGE:
        start, end = ctx.filters.start_seconds, ctx.filters.end_seconds
        st.caption(f"Window: {_utc(start)} → {_utc(end)} UTC (the page's time range)")
        return _seconds(start), _seconds(end)
    if choice == INCIDENT:
        incidents = _incidents(ctx)
        if not incidents:
            st.caption("No incidents in the page's time range: choose another window.")
            return None
        label = st.selectbox("Incident", list(incidents), key="lab_replay_incident")
        return incidents[label]
    cols = st.columns(2)
    start = cols[0].text_input(
        "From", value="-15m", key="lab_replay_from",
        help="now, Unix seconds, ISO 8601 (UTC when no offset is given) or -15m, -1h30m",
    )  # fmt: skip
    end = cols[1].text_input("To", value="now", key="lab_replay_to", help="the same forms")
    return start, end


def start_replay_section(ctx: PageContext, token: str) -> None:
    section(
        "Start a replay",
        "Runs `tailwatch replay` of a stored production window against candidate knobs as "
        "its own process; it appears under Replays once it is stored, and it runs to its "
        "end if the console stops.",
    )
    if not admin_allowed(token, "replay", REPLAY_HINT):
        return
    choice = st.selectbox(
        "Window", [LAST_MINUTES, PAGE_RANGE, INCIDENT, FROM_TO], key="lab_replay_window"
    )
    with st.form("lab_replay_form", border=True):
        window = _window(ctx, choice)
        cols = st.columns([3, 2, 1, 1])
        target = cols[0].text_input(
            "Engine", value=DEFAULT_ENGINE, key="lab_replay_engine",
            help="sim:<model>@<gpu> (virtual time: seconds), a bundled model such as tiny "
            "(started here, real time), or running engines' http(s) URLs, space-separated, "
            "one per replica (their own knobs)",
        ).strip()  # fmt: skip
        tenant = cols[1].text_input(
            "Tenant", value=ctx.filters.tenant or "", key="lab_replay_tenant",
            help="replay only this tenant's requests; empty: every tenant's",
        ).strip()  # fmt: skip
        speed = cols[2].number_input("Speed", value=1.0, key="lab_replay_speed")
        seed = cols[3].number_input("Seed", value=0, step=1, key="lab_replay_seed")
        cols = st.columns([3, 2, 2])
        knobs = cols[0].text_area(
            "Knobs", value="", key="lab_replay_knobs", height=100,
            help="NAME=VALUE, one a line (e.g. max_num_batched_tokens=512); not with a URL",
        )  # fmt: skip
        slo = cols[1].text_input("SLOs (ms)", value="", key="lab_replay_slo", help="e.g. ttft=500,tpot=50").strip()  # fmt: skip
        name = cols[2].text_input("Name", value="", key="lab_replay_name").strip()
        cols = st.columns([1, 2, 4])
        replicas = cols[0].number_input(
            "Replicas", value=0, min_value=0, step=1, key="lab_replay_replicas",
            help="0: as many as the window's records name; with URLs, the URLs are the replicas",
        )  # fmt: skip
        route = cols[1].selectbox(
            "Route", list(ROUTES), key="lab_replay_route",
            help="as-recorded: each request to the replica it went to; round-robin: in "
            "arrival order over the replicas, like a plain load balancer",
        )  # fmt: skip
        started = st.form_submit_button("Start the replay")
    if started and window is None:
        st.error("Not started: --from/--to: there is no incident to take the window from")
    elif started:
        is_url = target.startswith(("http://", "https://"))
        urls = target.split()
        options = {
            "from_": window[0],
            "to": window[1],
            "engine": None if is_url else target,
            "url": (urls[0] if len(urls) == 1 else urls) if is_url else None,
            "knob": [line.strip() for line in knobs.splitlines() if line.strip()],
            "tenant": tenant or None,
            "speed": float(speed),
            "seed": int(seed),
            "slo": slo,
            "name": name,
            "replicas": int(replicas) or None,
            "route": route,
        }
        try:
            job = lab_replay_jobs.start_replay(lab_replay_jobs.ReplayRequest(ctx.url, options))
        except ValueError as error:
            st.error("Not started: " + escape(str(error)))
        except OSError as error:
            st.error(f"Could not start tailwatch replay: {escape(str(error))}")
        else:
            st.session_state.setdefault(REPLAY_JOBS_KEY, []).append(job)
    jobs_status(
        REPLAY_JOBS_KEY, "Replay", "it appears under Replays once it is stored",
        "it is under Replays",
    )  # fmt: skip
