"""``tailwatch slo propose`` end to end on a SQLite store seeded with scrape records: the
printed YAML loads as ``tailwatch.yaml`` (as ``tailwatch up --config`` loads it) with the
burn-rate rules the evaluator would build, ``--output`` writes the same text, and every bad
input is one ``error:`` line with exit code 2, never a traceback (fuzzed at the extremes)."""

from __future__ import annotations

import socket

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from collectors import canonical as c
from collectors.store import Store, sqlite_url
from slo import LatencyIndicator, LatencyMetric
from tailwatch.cli import app
from tailwatch.config import load_config, parse_config
from tests.collectors.latency_store import (
    INTERVAL_SECONDS,
    ITL_STEP,
    START,
    TTFT_BOUNDS,
    TTFT_STEP,
    per_bucket,
    scrapes,
)

runner = CliRunner()
BOTH = {c.TTFT_SECONDS: TTFT_STEP, c.ITL_SECONDS: ITL_STEP}
END = START + 40 * INTERVAL_SECONDS
WINDOW = ["--from", f"{START:.0f}", "--to", f"{END:.0f}"]


@pytest.fixture(scope="module")
def store_url(tmp_path_factory) -> str:
    """Two replicas of ``tiny`` with plenty of traffic, and ``rare`` with 40 first tokens
    (too few for a p99) but plenty of inter-token gaps."""
    url = sqlite_url(tmp_path_factory.mktemp("slo-cli") / "store.db")
    store = Store(url)
    few_ttft = {c.TTFT_SECONDS: per_bucket(TTFT_BOUNDS, {0.1: 1}), c.ITL_SECONDS: ITL_STEP}
    records = [
        *scrapes("replica-0", "tiny", 41, BOTH),
        *scrapes("replica-1", "tiny", 41, BOTH),
        *scrapes("rare-0", "rare", 41, few_ttft),
    ]
    assert all(store.write_scrapes(records))
    store.close()
    return url


def _propose(store_url: str, *args: str):
    return runner.invoke(app, ["slo", "propose", "--db", store_url, *args])


def _one_error_line(result) -> str:
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert result.exit_code == 2, result.output
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    return lines[0]


def test_the_printed_yaml_loads_as_tailwatch_yaml_with_its_burn_rate_rules(store_url) -> None:
    result = _propose(store_url, *WINDOW)
    assert result.exit_code == 0, result.output
    config = parse_config(yaml.safe_load(result.stdout))
    specs = {spec.name: spec for spec in config.slos}
    assert sorted(specs) == ["rare-itl", "tiny-itl", "tiny-ttft"]
    assert specs["tiny-ttft"].indicator == LatencyIndicator(LatencyMetric.TTFT, 0.25)
    assert specs["tiny-itl"].indicator == LatencyIndicator(LatencyMetric.ITL, 0.05)
    assert {spec.target for spec in specs.values()} == {0.99}
    rules = {rule.name for rule in config.alerts.rules}
    assert {f"slo-burn-rate:{name}:page" for name in specs} <= rules
    # The attainment and observation count of each, and why rare-ttft has none.
    assert "# tiny-ttft: 99.80% of 80,000 observations at or below 0.25 s" in result.stdout
    assert "# rare-ttft: no proposal: 40 observations in the window" in result.stdout


def test_output_writes_a_file_that_tailwatch_up_config_accepts(
    store_url, tmp_path, monkeypatch
) -> None:
    path = tmp_path / "slos.yaml"
    result = _propose(store_url, *WINDOW, "--model", "tiny", "--output", str(path))
    assert result.exit_code == 0, result.output
    assert f"wrote 2 proposed SLO(s) to {path}" in result.output
    assert path.read_text() == _propose(store_url, *WINDOW, "--model", "tiny").stdout
    assert [spec.name for spec in load_config(path).slos] == ["tiny-ttft", "tiny-itl"]
    # `tailwatch up --config` validates the file first, then the ports: with the console's
    # port held, it gets past the config and stops at the port, before starting anything.
    monkeypatch.chdir(tmp_path)
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen()
        port = str(holder.getsockname()[1])
        up = runner.invoke(app, ["up", "--config", str(path), "--console-port", port])
    line = _one_error_line(up)
    assert f"port {port} (the console) is already in use" in line, line
    assert not (tmp_path / ".tailwatch").exists()


def test_the_config_option_names_the_store(store_url, tmp_path) -> None:
    config = tmp_path / "tailwatch.yaml"
    config.write_text(f"database_url: {store_url}\n")
    result = runner.invoke(app, ["slo", "propose", "--config", str(config), *WINDOW])
    assert result.exit_code == 0, result.output
    assert "tiny-ttft" in result.stdout


def test_relative_times_read_the_window_before_now(store_url) -> None:
    """The seeded traffic is in 2026-01-01; the last hour before now holds none of it."""
    line = _one_error_line(_propose(store_url, "--from", "-1h30m", "--to", "now"))
    assert "no TTFT or ITL observations" in line


@pytest.mark.parametrize(
    ("args", "words"),
    [
        ([*WINDOW, "--model", "nope"], "no latency series for model 'nope'; models in the store"),
        ([*WINDOW, "--model", ""], "--model ''"),
        ([*WINDOW, "--model", "  "], "--model"),
        ([*WINDOW, "--margin", "nan"], "--margin nan"),
        ([*WINDOW, "--margin", "-0.1"], "--margin -0.1"),
        ([*WINDOW, "--margin", "1"], "--margin 1.0"),
        ([*WINDOW, "--margin", "inf"], "--margin inf"),
        ([*WINDOW, "--margin", "1e308"], "--margin 1e+308"),
        (["--from", "yesterday"], "--from 'yesterday'"),
        (["--from", f"{END:.0f}", "--to", f"{START:.0f}"], "must be after --from"),
        (["--from", f"{START:.0f}", "--to", f"{START:.0f}"], "must be after --from"),
        (["--from", "now", "--to", "-1m"], "must be after --from"),
        (["--from", f"{END + 3600:.0f}", "--to", f"{END + 7200:.0f}"], "no TTFT or ITL"),
        ([*WINDOW, "--output", "/nonexistent/dir/slos.yaml"], "--output /nonexistent/dir"),
    ],
)
def test_bad_input_is_one_error_line(store_url, args, words) -> None:
    line = _one_error_line(_propose(store_url, *args))
    assert words in line, line


def test_a_window_that_supports_no_proposal_prints_why_and_no_slos(store_url) -> None:
    """Not a mistake in the input: the window answers "none", and each comment says why."""
    result = _propose(store_url, *WINDOW, "--margin", "0.5")
    assert result.exit_code == 0, result.output
    assert parse_config(yaml.safe_load(result.stdout)).slos == ()
    assert "slos: []" in result.stdout
    assert result.stdout.count("is below the lowest target 0.9; use a smaller margin") == 3


def test_an_unreadable_store_is_one_error_line(tmp_path) -> None:
    empty = sqlite_url(tmp_path / "never-migrated.db")
    line = _one_error_line(_propose(empty, *WINDOW))
    assert "cannot open the store" in line and "tailwatch store migrate" in line
    not_a_database = tmp_path / "garbage.db"
    not_a_database.write_bytes(b"this is not SQLite" * 100)
    line = _one_error_line(_propose(sqlite_url(not_a_database), *WINDOW))
    assert line.startswith("error: cannot ")
    line = _one_error_line(_propose("nosuchdriver://x", *WINDOW))
    assert "cannot open the store" in line


def test_a_store_with_no_latency_series_says_nothing_was_scraped(tmp_path) -> None:
    url = sqlite_url(tmp_path / "fresh.db")
    Store(url).close()  # migrated, empty
    line = _one_error_line(_propose(url, *WINDOW))
    assert "no ttft_seconds or itl_seconds series" in line


text_options = st.one_of(
    st.text(max_size=30),
    st.sampled_from(["", " ", "now", "-0", "-1e308", "nan", "inf", "-inf", "1e400", "\x00"]),
)
margins = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "-nan", "inf", "-1", "1", "0.9999999999999999", "1e-320", "0"]),
    st.text(max_size=10),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(margin=margins, model=st.one_of(st.none(), text_options), start=text_options)
def test_any_options_give_yaml_or_one_error_line_never_a_traceback(
    store_url, margin, model, start
) -> None:
    args = ["--from", start, "--to", f"{END:.0f}", "--margin", margin]
    if model is not None:
        args += ["--model", model]
    result = _propose(store_url, *args)
    if result.exit_code == 0:
        parse_config(yaml.safe_load(result.stdout))
        return
    assert result.exit_code == 2, (args, result.output, result.exception)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    # click's own usage errors (a margin that is not a number) are its "Error:" block.
    assert "error: " in result.output or "Error: Invalid value" in result.output, result.output


def test_help_lists_the_command() -> None:
    result = runner.invoke(app, ["slo", "--help"])
    assert result.exit_code == 0 and "propose" in result.output
