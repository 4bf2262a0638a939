"""The tailwatch CLI: offline generation prints tokens and timings; mistakes are one line."""

from __future__ import annotations

import json
import re

import httpx
import pytest
import typer
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from tailwatch.cli import app
from tailwatch.cli_options import check_port
from tests.fake_openai import FakeOpenAI

runner = CliRunner()


def test_engine_generate_prints_tokens_and_timings():
    result = runner.invoke(
        app,
        ["engine", "generate", "-p", "Hello", "-p", "Hi there", "--max-tokens", "4"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.output
    assert result.output.count("tokens: [") == 2
    assert "TTFT" in result.output and "per-request timings" in result.output
    assert "8 output tokens" in result.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--model", "nope"], "neither a model preset"),
        (["--max-tokens", "0"], "max_tokens=0"),
        (["--max-model-len", "100000"], "max_model_len=100000"),
        (["--scheduling-policy", "lifo"], "scheduling_policy='lifo'"),
        (["--dtype", "int4"], "unknown dtype"),
    ],
)
def test_user_mistakes_are_one_clear_line_without_traceback(extra, message):
    result = runner.invoke(app, ["engine", "generate", "-p", "x", *extra])
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "Traceback" not in result.output


def _engine_knob_params(command_name: str) -> dict[str, object]:
    """The click parameters of ``tailwatch engine <command_name>`` that are engine knobs."""
    import typer.main

    from tailwatch.engine_options import ENGINE_KNOB_OPTIONS, SERVE_KNOB_OPTIONS

    serve_knobs = {*ENGINE_KNOB_OPTIONS, *SERVE_KNOB_OPTIONS, "seed"}
    knobs = serve_knobs if command_name == "serve" else ENGINE_KNOB_OPTIONS
    command = typer.main.get_command(app).commands["engine"].commands[command_name]
    return {p.name: p for p in command.params if p.name in knobs}


@pytest.mark.parametrize("command_name", ["generate", "serve"])
def test_engine_knob_options_take_default_and_help_from_engine_config(command_name):
    import dataclasses

    from engine.config import EngineConfig
    from tailwatch.engine_options import ENGINE_KNOB_OPTIONS, SERVE_KNOB_OPTIONS

    params = _engine_knob_params(command_name)
    assert set(params) >= set(ENGINE_KNOB_OPTIONS)  # every shared knob is an option
    if command_name == "serve":
        assert set(params) >= set(SERVE_KNOB_OPTIONS)
    fields = {f.name: f for f in dataclasses.fields(EngineConfig)}
    for name, param in params.items():
        default = fields[name].default
        assert param.default == default, (name, param.default, default)
        assert type(param.default) is type(getattr(default, "value", default)), name
        assert param.help == fields[name].metadata["help"], name


def test_empty_prompt_is_refused():
    result = runner.invoke(app, ["engine", "generate", "-p", ""])
    assert result.exit_code == 2 and "prompt is empty" in result.output


# --- every command: help at 80 columns, help on every option, ports, outputs ------------


def _commands(command=None, path=()):
    """(path, click command) for the app and every group, command and subcommand."""
    import typer.main

    command = command or typer.main.get_command(app)
    yield path, command
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from _commands(sub, (*path, name))


def test_every_option_and_argument_has_help_text():
    missing = [
        f"{' '.join(path) or 'tailwatch'} {param.name}"
        for path, command in _commands()
        for param in command.params
        if not (getattr(param, "help", None) or "").strip()
    ]
    assert missing == []


_COMMANDS = dict(_commands())


def test_the_help_checks_cover_every_command():
    assert len(_COMMANDS) >= 10  # tailwatch, engine {generate,serve}, collect, load …, up


@pytest.mark.parametrize("path", _COMMANDS, ids=lambda path: " ".join(path) or "tailwatch")
def test_every_help_fits_80_columns_without_truncated_option_names(path):
    result = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    too_long = [line for line in result.output.splitlines() if len(line) > 80]
    assert too_long == []
    assert "…" not in result.output, result.output
    for param in _COMMANDS[path].params:
        for flag in [*param.opts, *param.secondary_opts]:
            if flag.startswith("-"):
                assert flag in result.output, (flag, result.output)


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    return lines[0]


PORT_CASES = [
    (["engine", "serve", "--port", "99999"], "99999"),
    (["engine", "serve", "--port", "-1"], "-1"),
    (["engine", "serve", "--port", "65536"], "65536"),
    (["up", "--collector-port", "99999"], "99999"),
    (["up", "--console-port", "0"], "0"),  # up connects to its ports: 0 cannot work
    (["up", "--engine-port", "-3"], "-3"),
    (["collect", "--listen", "127.0.0.1:99999"], "99999"),
    (["collect", "--listen", "127.0.0.1:-1"], "-1"),
    (["collect", "--target", "http://127.0.0.1:99999/metrics"], "99999"),
    (["load", "run", "--url", "http://127.0.0.1:99999", "--rate", "1"], "99999"),
    (["load", "sweep", "--url", "http://127.0.0.1:8000,http://127.0.0.1:-5"], "-5"),
    (["scenario", "run", "overload", "--url", "http://127.0.0.1:0"], "127.0.0.1:0"),
]


@pytest.mark.parametrize(("args", "value"), PORT_CASES)
def test_a_bad_port_is_refused_before_anything_starts(args, value):
    line = _one_error_line(runner.invoke(app, args))  # nothing started prints a line
    assert value in line and "port" in line


@settings(max_examples=60, deadline=None)
@given(port=st.integers(min_value=-(2**70), max_value=2**70), allow_zero=st.booleans())
def test_check_port_accepts_exactly_the_tcp_ports(port, allow_zero):
    low = 0 if allow_zero else 1
    if low <= port <= 65535:
        assert check_port(port, "--port", allow_zero=allow_zero) == port
    else:
        with pytest.raises(ValueError, match=re.escape(f"--port={port}:")):
            check_port(port, "--port", allow_zero=allow_zero)


def test_scenario_run_of_a_missing_file_or_a_directory_is_one_error_line(tmp_path):
    missing = tmp_path / "nope.yaml"
    assert str(missing) in _one_error_line(runner.invoke(app, ["scenario", "run", str(missing)]))
    line = _one_error_line(runner.invoke(app, ["scenario", "run", str(tmp_path)]))
    assert str(tmp_path) in line and "directory" in line.lower()
    binary = tmp_path / "binary.yaml"
    binary.write_bytes(b"\xff\xfe\x00garbage")
    assert "UTF-8" in _one_error_line(runner.invoke(app, ["scenario", "run", str(binary)]))


def test_scenario_run_into_a_missing_directory_fails_before_starting_replicas(tmp_path):
    out = tmp_path / "missing" / "drill"
    result = runner.invoke(app, ["scenario", "run", "overload", "--output", str(out)])
    line = _one_error_line(result)
    assert "--output" in line and "does not exist" in line


LOAD = ["--rate", "20", "--duration", "0.5", "--arrivals", "constant", "--no-progress"]


def test_load_run_into_a_missing_directory_fails_before_sending_load(tmp_path):
    with FakeOpenAI() as server:
        out = tmp_path / "missing" / "run"
        result = runner.invoke(
            app, ["load", "run", "--url", server.url, *LOAD, "--output", str(out)]
        )
        line = _one_error_line(result)
        assert "--output" in line and str(tmp_path / "missing") in line
        assert server.num_requests == 0
        directory = tmp_path / "run.json"
        directory.mkdir()
        result = runner.invoke(
            app, ["load", "run", "--url", server.url, *LOAD, "--output", str(tmp_path / "run")]
        )
        assert "is a directory" in _one_error_line(result)
        assert server.num_requests == 0


def test_a_finished_load_run_is_saved_elsewhere_when_its_output_cannot_be_written(
    tmp_path, monkeypatch
):
    import shutil
    import tempfile

    out_dir, fallback = tmp_path / "out", tmp_path / "fallback"
    out_dir.mkdir()
    fallback.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(fallback))
    # NOTE: the output directory goes away while the load runs, after the up-front check.
    with FakeOpenAI(on_request=lambda: shutil.rmtree(out_dir, ignore_errors=True)) as server:
        result = runner.invoke(
            app, ["load", "run", "--url", server.url, *LOAD, "--output", str(out_dir / "run")]
        )
    assert result.exit_code == 0, result.output
    assert "cannot write" in result.output and str(out_dir / "run.jsonl") in result.output
    (summary_path,) = fallback.glob("*run.json")
    (records_path,) = fallback.glob("*run.jsonl")
    assert f"wrote {records_path} and {summary_path}" in result.output
    summary = json.loads(summary_path.read_text())
    assert summary["num_scheduled"] == 10 == summary["num_succeeded"]
    assert len(records_path.read_text().splitlines()) == 10


@pytest.mark.parametrize(
    ("rates", "value"), [("1,abc", "'abc'"), ("2,0", "'0'"), ("-1", "'-1'"), ("nan", "nan")]
)
def test_sweep_rates_that_are_not_positive_numbers_name_the_flag_and_value(tmp_path, rates, value):
    with FakeOpenAI() as server:
        result = runner.invoke(
            app,
            [
                "load",
                "sweep",
                "--url",
                server.url,
                "--rates",
                rates,
                "--output",
                str(tmp_path / "s"),
            ],
        )
        line = _one_error_line(result)
        assert "--rates" in line and value in line
        assert server.num_requests == 0


def test_sweep_into_a_missing_directory_fails_before_sending_load(tmp_path):
    with FakeOpenAI() as server:
        out = tmp_path / "missing" / "sweep"
        result = runner.invoke(
            app, ["load", "sweep", "--url", server.url, "--rates", "1", "--output", str(out)]
        )
        assert "--output" in _one_error_line(result)
        assert server.num_requests == 0


def test_save_output_falls_back_to_the_temporary_directory_and_says_so_when_both_fail(
    tmp_path, monkeypatch, capsys
):
    import tempfile

    from tailwatch.cli_options import save_output

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    written = save_output(tmp_path / "gone" / "x.json", lambda path: path.write_text("{}"))
    assert written.parent == tmp_path and written.read_text() == "{}"
    assert f"wrote {written} instead" in capsys.readouterr().err
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "also-gone"))
    with pytest.raises(typer.Exit) as exit_info:
        save_output(tmp_path / "gone" / "x.json", lambda path: path.write_text("{}"))
    assert exit_info.value.exit_code == 1
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: cannot write") and "also-gone" in line


@settings(max_examples=150, deadline=None)
@given(text=st.text(max_size=40) | st.text(max_size=30).map(lambda t: "http://" + t))
def test_rates_and_urls_from_any_text_parse_or_fail_naming_the_flag(text):
    from loadgen.errors import WorkloadError
    from loadgen.load_options import parse_rates_option
    from tailwatch.cli_options import parse_urls

    try:
        rates = parse_rates_option(text)
    except WorkloadError as error:
        assert str(error).startswith("--rates: ")
    else:
        assert all(rate > 0 and rate != float("inf") for rate in rates)
    try:
        urls = parse_urls(text, "--url")
    except ValueError as error:
        assert str(error).startswith("--url: ")
    else:
        assert urls and all(u.startswith(("http://", "https://")) for u in urls)
        for url in urls:
            httpx.URL(url)  # the client the load generator uses takes it


@settings(max_examples=60, deadline=None)
@given(port=st.integers(min_value=-(10**6), max_value=10**6))
def test_a_url_port_is_accepted_exactly_when_it_is_a_tcp_port(port):
    from loadgen.load_options import check_url

    url = f"http://127.0.0.1:{port}/v1"
    if 1 <= port <= 65535:
        assert check_url(url, "--url") == url
    else:
        with pytest.raises(ValueError, match="--url"):
            check_url(url, "--url")
