"""Starting a sweep from the knob lab page (``console.knob_lab.jobs``, ``job_section``): the
form's fields are checked as ``tailwatch sweep`` checks its options (one line naming the
option, nothing started), the form is offered only with the console's admin token, and a
started sweep is a real ``tailwatch sweep`` process whose run lands in the store."""

from __future__ import annotations

import math
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs

from collectors.store import Store
from collectors.store.lab_records import LabRunStatus
from console.knob_lab import jobs as lab_jobs
from console.knob_lab.job_section import JOBS_KEY
from console.settings import ADMIN_TOKEN_ENV
from tests.console.knob_lab_page import console_env, open_page, page_texts, plain

SIM = "sim:llama-3.1-8b@h100"
GOOD = {"knob": "max_num_batched_tokens=512,4096", "rates": "5", "engine": SIM, "duration": 2.0}
#: How long a started two-point simulated sweep may take on a busy machine (it is seconds).
SWEEP_WAIT_SECONDS = 180.0


def test_a_good_request_checks_and_each_option_is_one_argument():
    request = lab_jobs.SweepRequest("sqlite:///x.db", {**GOOD, "name": "--db=elsewhere"})
    assert lab_jobs.check_sweep(request) is None
    argv = lab_jobs.sweep_argv(request)
    assert argv[2:4] == ["tailwatch", "sweep"]
    # NOTE: a value that looks like an option stays the value of its own --flag=
    assert "--name=--db=elsewhere" in argv
    assert [a for a in argv if a.startswith("--db=")] == ["--db=sqlite:///x.db"]


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"knob": "nope=1"}, "--knob"),
        ({"rates": "fast"}, "--rates"),
        ({"rates": ""}, "--rates"),
        ({"engine": "sim:nope@h100"}, "--engine"),
        ({"engine": None}, "--engine / --url"),
        ({"engine": None, "url": "ftp://host"}, "--url"),
        ({"duration": 0.0}, "--duration"),
        ({"duration": math.inf}, "--duration"),
        ({"repeats": 0}, "--repeats"),
        ({"target": 1.5}, "--target"),
        ({"slo": "ttft:abc"}, "slo"),
        ({"prompt_tokens": "uniform:9"}, "--prompt-tokens"),
        ({"output_tokens": "x"}, "--output-tokens"),
    ],
)
def test_each_mistake_is_one_line_naming_the_option(change, names):
    problem = lab_jobs.check_sweep(lab_jobs.SweepRequest("sqlite:///x.db", {**GOOD, **change}))
    assert problem is not None and names in problem and "\n" not in problem


def test_a_field_the_form_does_not_have_is_refused():
    problem = lab_jobs.check_sweep(lab_jobs.SweepRequest("sqlite:///x", {**GOOD, "db": "y"}))
    assert problem is not None and "db" in problem


def test_a_refused_request_starts_nothing(tmp_path):
    with pytest.raises(ValueError, match="--rates"):
        lab_jobs.start_sweep(
            lab_jobs.SweepRequest("sqlite:///x.db", {**GOOD, "rates": "-1"}), log_dir=tmp_path
        )
    assert not any(tmp_path.iterdir())


_text = hs.text(max_size=40)
_number = hs.one_of(hs.floats(allow_nan=True, allow_infinity=True), hs.integers(-(10**12), 10**12))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    knob=_text,
    rates=_text,
    engine=hs.one_of(hs.none(), _text, hs.just(SIM)),
    url=hs.one_of(hs.none(), _text),
    duration=_number,
    repeats=hs.integers(-(10**9), 10**9),
    target=_number,
    prompt=_text,
    output=_text,
    slo=_text,
    name=_text,
)
def test_any_field_values_are_an_answer_never_a_traceback(
    knob, rates, engine, url, duration, repeats, target, prompt, output, slo, name
):
    options = {"knob": knob, "rates": rates, "engine": engine, "url": url,
               "duration": duration, "repeats": repeats, "target": target,
               "prompt_tokens": prompt, "output_tokens": output, "slo": slo, "name": name}  # fmt: skip
    problem = lab_jobs.check_sweep(lab_jobs.SweepRequest("sqlite:///x.db", options))
    assert problem is None or (isinstance(problem, str) and problem)


def test_a_job_end_is_noted_once_and_only_after_it_ended(tmp_path):
    gate = tmp_path / "go"
    wait = f"import os, time\nwhile not os.path.exists({str(gate)!r}): time.sleep(0.01)"
    job = lab_jobs.start_job("sweep", [sys.executable, "-c", wait], tmp_path)
    try:
        assert job.note_end() is False  # still running: nothing it wrote is final
        gate.touch()
        job.process.wait(timeout=60)
        assert job.note_end() is True
        assert job.note_end() is False  # the caches were dropped once; not on every rerun
    finally:
        if job.exit_code() is None:
            job.process.kill()


@pytest.fixture
def page_env(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    Store(url).close()
    yield from console_env(url, tmp_path, monkeypatch)


def test_without_a_configured_token_there_is_no_form_and_the_page_says_why(page_env):
    at = open_page()
    assert "Start the sweep" not in [b.label for b in at.button]
    assert ADMIN_TOKEN_ENV in page_texts(at) and "tailwatch sweep" in page_texts(at)


def test_a_mistake_in_the_form_is_shown_and_nothing_is_stored(page_env, monkeypatch):
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "s3cret")
    at = open_page()
    at.text_input(key="lab_job_rates").input("5,fast")
    next(b for b in at.button if b.label == "Start the sweep").click().run()
    assert not at.exception
    assert any("Not started: --rates: 'fast' is not a number" in plain(e.value) for e in at.error)
    assert JOBS_KEY not in at.session_state or not at.session_state[JOBS_KEY]
    store = Store(page_env, migrate=False)
    try:
        assert store.lab_runs() == []
    finally:
        store.close()


def test_a_sweep_started_from_the_page_runs_and_lands_in_the_store(page_env, monkeypatch):
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "s3cret")
    at = open_page()
    at.text_input(key="lab_job_rates").input("4")
    at.number_input(key="lab_job_duration").set_value(2.0)
    at.text_input(key="lab_job_name").input("from the page")
    next(b for b in at.button if b.label == "Start the sweep").click().run()
    assert not at.exception, [e.value for e in at.exception]
    (job,) = at.session_state[JOBS_KEY]
    deadline = time.monotonic() + SWEEP_WAIT_SECONDS
    while job.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if job.exit_code() is None:
        job.process.kill()
        pytest.fail(f"the sweep did not end in {SWEEP_WAIT_SECONDS:.0f} s: {job.last_lines()}")
    assert job.exit_code() == 0, job.last_lines()
    store = Store(page_env, migrate=False)
    try:
        (run,) = store.lab_runs()
        points = store.lab_points(run.id)
    finally:
        store.close()
    assert run.name == "from the page" and run.status is LabRunStatus.FINISHED
    assert sorted({str(p.knob_value) for p in points}) == ["4096", "512"]
    at.run()
    assert any("Sweep finished" in e.value for e in at.success)
    # NOTE: the Sweeps section was read (and cached) while the sweep ran; its end drops that
    assert "No sweeps stored" not in page_texts(at)
    assert "from the page" in at.selectbox(key="lab_sweep").value
