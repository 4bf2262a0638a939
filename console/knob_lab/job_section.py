"""The knob lab's *Start a sweep* form: with the console's admin token, the tuner starts
``tailwatch sweep`` against this store from the page (:mod:`console.knob_lab.jobs`); the
sweep's progress bar and knee chart then appear under *Sweeps* as its points are stored.
Without a token configured the form is not offered and the page says what to run instead.

:func:`admin_allowed` and :func:`jobs_status` are shared with *Start a replay*
(:mod:`console.knob_lab.replay_job_section`)."""

from __future__ import annotations

import os

import streamlit as st

import console.knob_lab.jobs as lab_jobs
from console import data
from console.incidents.frames import check_token
from console.knob_lab.sections import SWEEP_HINT
from console.page_kit import PageContext, escape, section
from console.settings import ADMIN_TOKEN_ENV

#: The session's started sweeps (their processes), newest last.
JOBS_KEY = "lab_jobs"
DEFAULT_ENGINE = "sim:llama-3.1-8b@h100"


def start_sweep_section(ctx: PageContext, token: str) -> None:
    section(
        "Start a sweep",
        "Runs `tailwatch sweep` against this store as its own process; its points appear "
        "under Sweeps as they are measured, and it runs to its end if the console stops.",
    )
    if not admin_allowed(token, "sweep", SWEEP_HINT):
        return
    with st.form("lab_sweep_form", border=True):
        cols = st.columns([3, 3, 2])
        target = cols[0].text_input(
            "Engine", value=DEFAULT_ENGINE, key="lab_job_engine",
            help="sim:<model>@<gpu> (virtual time, seconds), a bundled model such as tiny "
            "(started for each point), or a running engine's http(s) URL (its knob is set "
            "through /admin/config with the admin token and put back afterwards)",
        ).strip()  # fmt: skip
        knob = (
            cols[1]
            .text_input(
                "Knob and values", value="max_num_batched_tokens=512,4096", key="lab_job_knob"
            )
            .strip()
        )
        rates = cols[2].text_input("Rates (req/s)", value="5,10,20", key="lab_job_rates")
        cols = st.columns(5)
        duration = cols[0].number_input(
            "Seconds per point", value=60.0, min_value=0.001, key="lab_job_duration"
        )
        repeats = int(cols[1].number_input("Repeats", value=1, min_value=1, key="lab_job_repeats"))  # fmt: skip
        prompt = cols[2].text_input("Prompt tokens", value="128", key="lab_job_prompt").strip()
        output = cols[3].text_input("Output tokens", value="64", key="lab_job_output").strip()
        slo = cols[4].text_input("SLOs (ms)", value="", key="lab_job_slo", help="e.g. ttft:500,itl:50").strip()  # fmt: skip
        name = st.text_input("Name", value="", key="lab_job_name").strip()
        started = st.form_submit_button("Start the sweep")
    if started:
        is_url = target.startswith(("http://", "https://"))
        options = {
            "knob": knob,
            "rates": rates,
            "engine": None if is_url else target,
            "url": target if is_url else None,
            "duration": float(duration),
            "repeats": repeats,
            "prompt_tokens": prompt,
            "output_tokens": output,
            "slo": slo,
            "name": name or f"console: {knob}",
        }
        try:
            job = lab_jobs.start_sweep(lab_jobs.SweepRequest(ctx.url, options))
        except ValueError as error:
            st.error("Not started: " + escape(str(error)))
        except OSError as error:
            st.error(f"Could not start tailwatch sweep: {escape(str(error))}")
        else:
            st.session_state.setdefault(JOBS_KEY, []).append(job)
    jobs_status(JOBS_KEY, "Sweep", "its progress is under Sweeps", "its knee is under Sweeps")


def admin_allowed(token: str, what: str, hint: str) -> bool:
    """Whether the console has an admin token and ``token`` matches it; else the page says
    what is missing and what to run instead (``hint``), and nothing of ``what`` is offered."""
    expected = os.environ.get(ADMIN_TOKEN_ENV, "")
    if not expected:
        st.info(
            f"Starting a {what} from the console needs {ADMIN_TOKEN_ENV} set where the "
            "console runs (the same token edits live knobs). " + hint
        )
        return False
    if not check_token(token, expected):
        st.info(f"Type the admin token above to start a {what} from here. " + hint)
        return False
    return True


def note_ended_jobs(keys: tuple[str, ...]) -> None:
    """Drop the cached lab reads once any job this session started under ``keys`` has
    ended: its run is now stored as final, and the page must show it on this run, not a
    ttl later. Called before the stored runs are read (on every rerun, fragment included)."""
    ended = [job.note_end() for key in keys for job in st.session_state.get(key, [])]
    if any(ended):
        data.lab_results_changed()


def jobs_status(key: str, label: str, running: str, finished: str) -> None:
    """One line per job this session started under ``key``, newest first: ``running``
    (``label`` running), ``finished`` (exit 0), or its exit code and last log lines."""
    for job in reversed(st.session_state.get(key, [])):
        code = job.exit_code()
        where = f"pid {job.pid}, log {escape(str(job.log_path))}"
        if code is None:
            st.caption(f"{label} running ({where}): {running}.")
        elif code == 0:
            st.success(f"{label} finished ({where}): {finished}.")
        else:
            tail = " · ".join(job.last_lines(2)) or "no output"
            st.error(f"{label} exited with code {code} ({where}): {escape(tail)}")
