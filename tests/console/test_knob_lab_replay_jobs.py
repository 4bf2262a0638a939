"""Starting a replay from the knob lab page (``console.knob_lab.replay_jobs``,
``replay_job_section``): the form's fields are checked as ``tailwatch replay`` checks its
options (one line naming the option, nothing started or stored), the form is offered only
with the console's admin token, and a started replay is a real ``tailwatch replay`` process
whose lab run (kind ``replay``) lands in the store."""

from __future__ import annotations

import math
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as hs
from streamlit.testing.v1 import AppTest

from alerts import Alert, AlertState, Transition
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from collectors.store.lab_records import LabRunKind, LabRunStatus
from console.knob_lab import replay_jobs as lab_replay_jobs
from console.knob_lab.replay_job_section import FROM_TO, INCIDENT, PAGE_RANGE, REPLAY_JOBS_KEY
from console.settings import ADMIN_TOKEN_ENV
from engine.config import EngineConfig
from engine.sim.offline import VIRTUAL_EPOCH
from engine.sim.workload import RequestShape, poisson_schedule
from slo.window import format_utc
from tests.console.knob_lab_page import console_env, open_page, page_texts, plain
from tests.loadgen.test_replay_sim import SIM, sim_records

FROM, TO = str(int(VIRTUAL_EPOCH)), str(int(VIRTUAL_EPOCH) + 5)
GOOD = {"from_": FROM, "to": TO, "engine": SIM}
#: How long a started simulated replay of a few seconds may take on a busy machine.
REPLAY_WAIT_SECONDS = 180.0


def _seed(url: str) -> None:
    """Request records of a short sim run in ``[FROM, TO]`` (what a collector would store)."""
    arrivals = poisson_schedule(6, 4, [RequestShape(300, 24)], seed=2)
    store = Store(url)
    try:
        store.write_requests(sim_records(arrivals, EngineConfig(model=SIM)))
    finally:
        store.close()


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    url = sqlite_url(tmp_path_factory.mktemp("replay-form") / "tw.db")
    _seed(url)
    return url


def _check(db_url: str, options: dict) -> str | None:
    return lab_replay_jobs.check_replay(lab_replay_jobs.ReplayRequest(db_url, options))


def test_a_good_request_checks_and_each_option_is_one_argument(db):
    options = {**GOOD, "knob": ["block_size=32", "max_num_seqs=8"], "name": "--db=elsewhere"}
    request = lab_replay_jobs.ReplayRequest(db, options)
    assert lab_replay_jobs.check_replay(request) is None
    argv = lab_replay_jobs.replay_argv(request)
    assert argv[2:4] == ["tailwatch", "replay"]
    assert argv[4:6] == [f"--from={FROM}", f"--to={TO}"]
    assert "--knob=block_size=32" in argv and "--knob=max_num_seqs=8" in argv
    # NOTE: a value that looks like an option stays the value of its own --flag=
    assert "--name=--db=elsewhere" in argv
    assert [a for a in argv if a.startswith("--db=")] == [f"--db={db}"]
    assert argv[-1] == "--no-progress"
    fleet = {**GOOD, "replicas": 2, "route": "round-robin"}
    request = lab_replay_jobs.ReplayRequest(db, fleet)
    assert lab_replay_jobs.check_replay(request) is None
    argv = lab_replay_jobs.replay_argv(request)
    assert "--replicas=2" in argv and "--route=round-robin" in argv
    urls = {"from_": FROM, "to": TO, "url": ["http://127.0.0.1:9", "http://127.0.0.1:10"]}
    argv = lab_replay_jobs.replay_argv(lab_replay_jobs.ReplayRequest(db, urls))
    assert [a for a in argv if a.startswith("--url=")] == [
        "--url=http://127.0.0.1:9",
        "--url=http://127.0.0.1:10",
    ]


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"from_": "yesterday"}, "--from 'yesterday': expected now"),
        ({"from_": "-15x"}, "--from '-15x'"),
        ({"from_": TO, "to": FROM}, "--to "),
        ({"to": "2026-13-01"}, "--to '2026-13-01'"),
        ({"from_": "1", "to": "2"}, "--from/--to: no request records between"),
        ({"tenant": "nobody"}, "--from/--to: no request records of tenant 'nobody'"),
        ({"tenant": " "}, "--tenant"),
        ({"knob": ["max_num_batched_token=512"]}, "--knob max_num_batched_token: is not"),
        ({"knob": ["max_num_seqs=0"]}, "--knob max_num_seqs: "),
        ({"knob": ["max_num_seqs"]}, "--knob 'max_num_seqs': expected NAME=VALUE"),
        ({"knob": ["block_size=16", "block_size=32"]}, "--knob block_size: given twice"),
        ({"knob": ["model=tiny"]}, "--knob model: the engine is chosen with --engine"),
        ({"engine": "sim:gpt-5@h100"}, "--engine: "),
        ({"engine": ""}, "--engine '': give an engine"),
        ({"url": "http://127.0.0.1:9"}, "--engine and --url: give one"),
        ({"engine": None, "url": "ftp://x"}, "--url: "),
        ({"engine": None, "url": "http://127.0.0.1:9", "knob": ["max_num_seqs=4"]}, "--knob: "),
        ({"speed": 0.0}, "--speed: must be a finite number > 0"),
        ({"speed": math.nan}, "--speed: "),
        ({"speed": -math.inf}, "--speed: "),
        ({"slo": "itl=50"}, "--slo: production's records carry no inter-token gaps"),
        ({"slo": "ttft=fast"}, "--slo: 'fast' is not a number of ms"),
        ({"name": "a\x00b"}, "--name: contains a NUL character"),
        ({"tenant": "\ud800"}, "--tenant: "),
        ({"replicas": 3}, "--replicas: 3 given, but the window's records name no replica"),
        ({"replicas": 0}, "--replicas: must be a whole number ≥ 1"),
        ({"replicas": 2.5, "route": "round-robin"}, "--replicas: must be a whole number"),
        ({"replicas": 10**30, "route": "round-robin"}, "--replicas: "),
        ({"replicas": "x"}, "--replicas 'x': expected a whole number"),
        ({"route": "random"}, "--route: must be one of as-recorded, round-robin"),
        ({"engine": None, "url": "http://127.0.0.1:9", "replicas": 2}, "--replicas: a running"),
        (
            {"engine": None, "url": ["http://127.0.0.1:9", "http://127.0.0.1:10"]},
            "--url: 2 given, but the window's records name no replica",
        ),
    ],
)
def test_each_mistake_is_one_line_naming_the_option(db, change, names):
    problem = _check(db, {**GOOD, **change})
    assert problem is not None and problem.startswith(names) and "\n" not in problem, problem


def test_a_field_the_form_does_not_have_or_a_store_it_cannot_read_is_refused(db):
    assert _check(db, {**GOOD, "db": "y"}) == "not a field of the replay form: db"
    assert (_check("nope://x", GOOD) or "").startswith("--db: cannot open the store")
    assert (_check(" ", GOOD) or "").startswith("the console has no store URL")


def test_a_refused_request_starts_nothing_and_stores_nothing(db, tmp_path):
    for change in ({"speed": -1.0}, {"from_": "1", "to": "2"}):
        with pytest.raises(ValueError, match=r"^--"):
            lab_replay_jobs.start_replay(
                lab_replay_jobs.ReplayRequest(db, {**GOOD, **change}), log_dir=tmp_path
            )
    assert not any(tmp_path.iterdir())
    store = Store(db, migrate=False)
    try:
        assert store.lab_runs() == []
    finally:
        store.close()


_text = hs.text(max_size=40)
_time = hs.one_of(_text, hs.sampled_from([FROM, TO, "now", "-15m", "-1h30m", "2026-01-01"]))
_number = hs.one_of(
    hs.floats(allow_nan=True, allow_infinity=True), hs.integers(-(10**12), 10**12), hs.booleans()
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    from_=_time,
    to=_time,
    engine=hs.one_of(hs.none(), _text, hs.sampled_from([SIM, "tiny", ""])),
    url=hs.one_of(hs.none(), _text, hs.just("http://127.0.0.1:9")),
    knob=hs.lists(hs.one_of(_text, hs.just("max_num_seqs=8")), max_size=3),
    tenant=hs.one_of(hs.none(), _text),
    speed=_number,
    seed=hs.integers(-(10**30), 10**30),
    slo=_text,
    name=_text,
    replicas=hs.one_of(hs.none(), _number, hs.integers(-(10**30), 10**30), _text),
    route=hs.one_of(hs.sampled_from(["as-recorded", "round-robin"]), _text),
)
def test_any_field_values_are_an_answer_never_a_traceback(
    db, from_, to, engine, url, knob, tenant, speed, seed, slo, name, replicas, route
):
    options = {"from_": from_, "to": to, "engine": engine, "url": url, "knob": knob,
               "tenant": tenant, "speed": speed, "seed": seed, "slo": slo, "name": name,
               "replicas": replicas, "route": route}  # fmt: skip
    problem = lab_replay_jobs.check_replay(lab_replay_jobs.ReplayRequest(db, options))
    assert problem is None or (isinstance(problem, str) and problem and "\n" not in problem)


@pytest.fixture
def page_env(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'lab.db'}"
    _seed(url)
    yield from console_env(url, tmp_path, monkeypatch)


def _start(at: AppTest) -> None:
    next(b for b in at.button if b.label == "Start the replay").click().run()
    assert not at.exception, [e.value for e in at.exception]


def _replays(url: str) -> list:
    store = Store(url, migrate=False)
    try:
        return store.lab_runs(LabRunKind.REPLAY)
    finally:
        store.close()


def _errors(at: AppTest) -> list[str]:
    return [plain(e.value) for e in at.error]


def test_without_a_configured_token_there_is_no_form_and_the_page_says_why(page_env):
    at = open_page()
    assert "Start the replay" not in [b.label for b in at.button]
    assert ADMIN_TOKEN_ENV in page_texts(at) and "tailwatch replay --from" in page_texts(at)


def test_a_mistake_in_the_form_is_shown_and_nothing_is_stored(page_env, monkeypatch):
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "s3cret")
    at = open_page()
    _start(at)  # NOTE: the default window, the last 15 minutes, holds no records
    assert any(e.startswith("Not started: --from/--to: no request records") for e in _errors(at))
    at.selectbox(key="lab_replay_window").select(FROM_TO).run()
    at.text_input(key="lab_replay_from").input(FROM)
    at.text_input(key="lab_replay_to").input(TO)
    at.text_area(key="lab_replay_knobs").input("max_num_batched_tokens=1024\nmax_num_seqs=0")
    _start(at)
    assert any(e.startswith("Not started: --knob max_num_seqs: ") for e in _errors(at))
    assert REPLAY_JOBS_KEY not in at.session_state or not at.session_state[REPLAY_JOBS_KEY]
    assert _replays(page_env) == []


def test_the_page_range_and_an_incident_are_windows_of_the_form(page_env, monkeypatch):
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "s3cret")
    now = float(int(time.time()))  # NOTE: whole seconds: the error shows milliseconds
    fired, resolved = now - 600.0, now - 300.0
    store = Store(page_env, migrate=False)
    try:
        alert = Alert.pending({"alertname": "TTFTHigh"}, fired - 60.0).fire(fired, value=2.0)
        alert_state_of(store).save_evaluation(
            [alert], [Transition(fired, alert.fingerprint, AlertState.PENDING, alert.state, alert)]
        )
        gone = alert.resolve(resolved, value=0.1)
        alert_state_of(store).save_evaluation(
            [], [Transition(resolved, gone.fingerprint, AlertState.FIRING, gone.state, gone)]
        )
    finally:
        store.close()
    at = open_page()
    at.selectbox(key="lab_replay_window").select(INCIDENT).run()
    assert "#1 TTFTHigh" in at.selectbox(key="lab_replay_incident").value
    _start(at)
    expected = f"no request records between {format_utc(fired)} and {format_utc(resolved)}"
    assert any(expected in e for e in _errors(at)), _errors(at)
    at.selectbox(key="lab_replay_window").select(PAGE_RANGE).run()
    _start(at)
    assert any("Not started: --from/--to: no request records between" in e for e in _errors(at))
    assert _replays(page_env) == []


def test_a_replay_started_from_the_page_runs_and_lands_in_the_store(page_env, monkeypatch):
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "s3cret")
    at = open_page()
    at.selectbox(key="lab_replay_window").select(FROM_TO).run()
    at.text_input(key="lab_replay_from").input(FROM)
    at.text_input(key="lab_replay_to").input(TO)
    at.text_area(key="lab_replay_knobs").input("max_num_batched_tokens=1024\n\n")
    at.text_input(key="lab_replay_slo").input("ttft=50")
    at.text_input(key="lab_replay_name").input("from the page")
    at.number_input(key="lab_replay_replicas").set_value(2)
    at.selectbox(key="lab_replay_route").select("round-robin")
    _start(at)
    assert not _errors(at), _errors(at)
    (job,) = at.session_state[REPLAY_JOBS_KEY]
    assert "Replay running" in page_texts(at) or job.exit_code() is not None
    deadline = time.monotonic() + REPLAY_WAIT_SECONDS
    while job.exit_code() is None and time.monotonic() < deadline:
        time.sleep(0.2)
    if job.exit_code() is None:
        job.process.kill()
        pytest.fail(f"the replay did not end in {REPLAY_WAIT_SECONDS:.0f} s: {job.last_lines()}")
    assert job.exit_code() == 0, job.last_lines()
    (run,) = _replays(page_env)
    assert (run.name, run.status, run.target, run.simulated) == (
        "from the page",
        LabRunStatus.FINISHED,
        SIM,
        True,
    )
    assert run.knobs == {"max_num_batched_tokens": 1024}
    assert run.window == (float(FROM), float(TO))
    assert (run.workload["replicas"], run.workload["route"]) == (2, "round-robin")
    at.run()
    assert any("Replay finished" in e.value for e in at.success)
    assert "Production window replayed: 2026-01-01 00:00:00" in page_texts(at)
