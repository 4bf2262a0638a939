"""``tailwatch replay`` against a SQLite store: a sim-recorded window replayed end to end
and kept as a lab run, and every bad option one ``error:`` line naming it (exit 2)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from collectors.store import Store, sqlite_url
from collectors.store.lab_records import LabRunKind, LabRunStatus
from engine.config import EngineConfig
from engine.sim.offline import VIRTUAL_EPOCH
from engine.sim.workload import RequestShape, poisson_schedule
from loadgen.replay_options import parse_knobs, parse_time
from tailwatch.cli import app
from tests.loadgen.test_replay_sim import SIM, sim_records

runner = CliRunner()
FROM, TO = str(int(VIRTUAL_EPOCH)), str(int(VIRTUAL_EPOCH) + 5)


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> str:
    url = sqlite_url(tmp_path_factory.mktemp("replay") / "tw.db")
    arrivals = poisson_schedule(6, 4, [RequestShape(300, 24)], seed=2)
    store = Store(url)
    store.write_requests(sim_records(arrivals, EngineConfig(model=SIM)))
    store.close()
    return url


def _run(*args: str):
    return runner.invoke(app, ["replay", *args], env={"COLUMNS": "200"})


def _runs(url: str):
    store = Store(url, migrate=False)
    try:
        return store.lab_runs(LabRunKind.REPLAY), store
    finally:
        store.close()


def test_a_window_replays_end_to_end_into_the_store(db):
    args = ["--from", FROM, "--to", TO, "--db", db, "--engine", SIM, "--no-progress"]
    result = _run(*args, "--slo", "ttft=50", "--knob", "max_num_batched_tokens=1024", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    difference = report["difference"]["ttft_ms.p50"]
    assert difference["replay"] == pytest.approx(difference["production"], abs=1e-3)
    store = Store(db, migrate=False)
    try:
        run = store.lab_run(report["run_id"])
        (point,) = store.lab_points(report["run_id"])
    finally:
        store.close()
    assert (run.kind, run.status, run.target, run.simulated) == (
        LabRunKind.REPLAY,
        LabRunStatus.FINISHED,
        SIM,
        True,
    )
    assert run.knobs == {"max_num_batched_tokens": 1024}
    assert run.window == (float(FROM), float(TO))
    assert point.summary["production"]["slo_ms"] == {"ttft": 50.0}
    assert point.summary["num_scheduled"] == run.workload["num_replayed"] > 0
    table = _run(*args)
    assert table.exit_code == 0, table.output
    assert "TTFT p50 ms" in table.stdout and "attainment" in table.stdout
    assert f"replaying {run.workload['num_replayed']} of" in table.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--from", TO, "--to", FROM], "error: --to '"),
        (["--from", "yesterday"], "error: --from 'yesterday': expected now, Unix seconds"),
        (["--from", "-15x"], "error: --from '-15x'"),
        (["--from", FROM, "--to", "2026-13-01"], "error: --to '2026-13-01'"),
        (["--from", "1", "--to", "2"], "error: --from/--to: no request records between"),
        (["--knob", "max_num_batched_token=512"], "error: --knob max_num_batched_token: is not"),
        (["--knob", "max_num_seqs=0"], "error: --knob max_num_seqs: max_num_seqs=0"),
        (["--knob", "max_num_seqs"], "error: --knob 'max_num_seqs': expected NAME=VALUE"),
        (["--knob", "block_size=16", "--knob", "block_size=32"], "error: --knob block_size: given"),
        (["--knob", "model=tiny"], "error: --knob model: the engine is chosen with --engine"),
        (["--url", "http://127.0.0.1:9"], "error: --engine and --url: give one"),
        (["--speed", "0"], "error: --speed: must be a finite number > 0"),
        (["--slo", "itl=50"], "error: --slo: production's records carry no inter-token gaps"),
        (["--slo", "ttft=fast"], "error: --slo: 'fast' is not a number of ms"),
        (["--engine", "sim:gpt-5@h100"], "error: --engine: model='sim:gpt-5@h100'"),
        (["--tenant", " "], "error: --tenant"),
        (["--engine", ""], "error: --engine '': give an engine"),
        (["--replicas", "3"], "error: --replicas: 3 given, but the window's records name no"),
        (["--replicas", "0"], "error: --replicas: must be a whole number ≥ 1, got 0"),
        (["--replicas", "two"], "error: --replicas 'two': expected a whole number"),
        (["--replicas", "1.5"], "error: --replicas '1.5': expected a whole number"),
        (["--replicas", "-1"], "error: --replicas '-1': expected a whole number"),
        (["--replicas", "9" * 5000], "error: --replicas '999"),
        (["--replicas", "1025", "--route", "round-robin"], "error: --replicas: 1025 replicas"),
        (["--engine", "tiny", "--replicas", "17"], "error: --replicas: 17 replicas: at most 16"),
        (["--route", "random"], "error: --route: must be one of as-recorded, round-robin"),
    ],
)
def test_bad_options_are_one_line_naming_the_option(db, args, message):
    base = {"--from": FROM, "--to": TO, "--engine": SIM}
    given_flags = set(args[::2])
    full = [*args, "--db", db, "--no-progress"]
    for flag, value in base.items():
        if flag not in given_flags and not (flag == "--engine" and "--url" in given_flags):
            full += [flag, value]
    if "--url" in given_flags:
        full += ["--engine", SIM]
    result = _run(*full)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), lines
    assert "Traceback" not in result.output


def test_a_url_is_checked_and_runs_nothing(db):
    result = _run("--from", FROM, "--to", TO, "--db", db, "--url", "ftp://x", "--no-progress")
    assert result.exit_code == 2 and result.stderr.startswith("error: --url")
    knobbed = _run(
        "--from", FROM, "--to", TO, "--db", db, "--url", "http://127.0.0.1:9",
        "--knob", "max_num_seqs=4", "--no-progress",
    )  # fmt: skip
    assert knobbed.exit_code == 2
    assert knobbed.stderr.startswith("error: --knob: a running server (--url) replays under")
    base = ["--from", FROM, "--to", TO, "--db", db, "--no-progress"]
    for args, message in (
        (["--url", "http://127.0.0.1:9", "--replicas", "2"], "error: --replicas: a running"),
        (["--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:9/"], "error: --url: http"),
        (["--url", "http://127.0.0.1:9", "--url", "http://127.0.0.1:10"], "error: --url: 2 given"),
    ):
        result = _run(*base, *args)
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 2 and len(lines) == 1, result.output
        assert lines[0].startswith(message), lines


@pytest.fixture(scope="module")
def fleet_db(tmp_path_factory) -> tuple[str, list[str]]:
    from tests.loadgen.test_replay_fleet import fleet_records

    url = sqlite_url(tmp_path_factory.mktemp("replay-fleet") / "tw.db")
    records, (start, end) = fleet_records(num_requests=24)
    store = Store(url)
    store.write_requests(records)
    store.close()
    return url, ["--from", f"{start:.3f}", "--to", f"{end:.3f}", "--db", url, "--no-progress"]


def test_a_fleets_window_replays_on_its_replicas(fleet_db):
    url, base = fleet_db
    result = _run(*base, "--engine", SIM, "--knob", "max_model_len=4096", "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    fleet = report["fleet"]
    assert (fleet["replicas"], fleet["route"]) == (2, "as-recorded")
    assert [e["num_requests"] for e in fleet["per_replica"]] == [
        e["production"]["num_requests"] for e in fleet["per_replica"]
    ]
    runs, _ = _runs(url)
    assert runs[-1].workload["replicas"] == 2
    table = _run(*base, "--engine", SIM, "--route", "round-robin", "--replicas", "3")
    assert table.exit_code == 0, table.output
    assert "3 replicas, round-robin" in table.stdout and "requests per replica" in table.stdout
    refused = _run(*base, "--engine", SIM, "--replicas", "3")
    assert refused.exit_code == 2
    assert refused.stderr.startswith(
        "error: --replicas: 3 given, but the window's records name 2 replicas "
        "(engine-a:8000, engine-b:8000)"
    )
    assert len(_runs(url)[0]) == len(runs) + 1  # the refused one stored nothing


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.integers(-(10**30), 10**30).map(str),
        st.text(max_size=12),
        st.sampled_from(["0", "1", "1024", "1025", "+3", " 2 ", "0002", "9" * 5000, "1e3"]),
    )
)
def test_any_replicas_text_is_a_plan_or_one_error(text):
    from loadgen.replay_options import build_replay_plan, replay_options

    options = replay_options(from_=FROM, to=TO, engine=SIM, replicas=text, route="round-robin")
    try:
        spec = build_replay_plan(options, NOW)
    except ValueError as error:
        assert str(error).startswith("--replicas") and "\n" not in str(error), error
    else:
        assert 1 <= spec.plan.replicas <= 1024 and spec.plan.replicas == int(text)


NOW = 1_800_000_000.0


def test_time_forms():
    assert parse_time("--from", "now", NOW) == NOW
    assert parse_time("--from", "-15m", NOW) == NOW - 900
    assert parse_time("--from", "-1h30m", NOW) == NOW - 5400
    assert parse_time("--from", "1767225600", NOW) == 1767225600.0
    assert parse_time("--from", "1767225600.25", NOW) == 1767225600.25
    assert parse_time("--from", "2026-01-01T00:00:00Z", NOW) == 1767225600.0
    assert parse_time("--from", "2026-01-01T01:00:00+01:00", NOW) == 1767225600.0
    assert parse_time("--from", "2026-01-01 00:00", NOW) == 1767225600.0  # UTC when no offset
    assert parse_knobs(["a=512", "b=true", "c=fcfs", "d=0.5"]) == {
        "a": 512,
        "b": True,
        "c": "fcfs",
        "d": 0.5,
    }


@settings(max_examples=80, deadline=None)
@given(st.text(max_size=50))
def test_any_time_text_is_a_time_or_one_error(text):
    try:
        value = parse_time("--from", text, NOW)
    except ValueError as error:
        assert str(error).startswith("--from ") and "\n" not in str(error)
    else:
        assert isinstance(value, float)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=3))
def test_any_knob_text_is_knobs_or_one_error(values):
    try:
        knobs = parse_knobs(values)
    except ValueError as error:
        assert str(error).startswith("--knob ") and "\n" not in str(error)
    else:
        assert all(name.isidentifier() for name in knobs)


def test_refused_runs_store_nothing(db):
    before, _ = _runs(db)
    for args in (["--from", "1", "--to", "2"], ["--knob", "max_num_seqs=0"], ["--speed", "-1"]):
        result = _run("--from", FROM, "--to", TO, "--db", db, "--engine", SIM, *args)
        assert result.exit_code == 2, result.output
    after, _ = _runs(db)
    assert [run.id for run in after] == [run.id for run in before]


def test_the_plan_builder_checks_what_the_command_checks_and_stores_nothing(db):
    from loadgen.replay_options import build_replay_plan, check_window, replay_options

    spec = build_replay_plan(replay_options(from_="-15m", engine=SIM, knob=["block_size=32"]), NOW)
    assert (spec.start, spec.end, spec.tenant) == (NOW - 900, NOW, None)
    assert spec.plan.engine == SIM and dict(spec.plan.knobs) == {"block_size": 32}
    with pytest.raises(ValueError, match=r"^--knob max_num_seqs: "):
        build_replay_plan(replay_options(from_=FROM, knob=["max_num_seqs=0"]), NOW)
    with pytest.raises(ValueError, match=r"^not options of tailwatch replay: \['nope'\]"):
        replay_options(from_=FROM, nope=1)
    with pytest.raises(ValueError, match=r"^--from: give"):
        replay_options(to=TO)
    before, _ = _runs(db)
    store = Store(db, migrate=False)
    try:
        check_window(store, build_replay_plan(replay_options(from_=FROM, to=TO), NOW))
        with pytest.raises(ValueError, match=r"^--from/--to: no request records between"):
            check_window(store, build_replay_plan(replay_options(from_="1", to="2"), NOW))
    finally:
        store.close()
    after, _ = _runs(db)
    assert [run.id for run in after] == [run.id for run in before]


def test_the_console_form_fills_in_the_commands_defaults():
    """``replay_options`` (what the console's replay form builds its plan from) fills in every
    option a plan is built from at ``tailwatch replay``'s own default; only the command's
    store and output options are left out."""
    from loadgen.replay_options import REPLAY_DEFAULTS
    from tailwatch.replay_cli import replay
    from tests.loadgen.command_defaults import command_defaults

    assert dict(REPLAY_DEFAULTS) == command_defaults(replay, "db", "as_json", "progress")
