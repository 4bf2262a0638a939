"""``tailwatch sweep``'s options and ``loadgen.lab_knee``: every bad option is one ``error:``
line naming it, exit 2, before a store is opened or anything runs; the option parsers take
any text without a traceback; a small simulated sweep through the CLI stores its run and
prints the knee table; the knee is computed from points as documented."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from collectors.store import Store, sqlite_url
from collectors.store.lab_records import LabPoint, LabRunStatus
from loadgen.errors import WorkloadError
from loadgen.lab_knee import knee_curves
from loadgen.lab_knobs import knob_types, parse_engine_knobs, parse_knob_option
from loadgen.lab_plan import parse_sweep_slo
from tailwatch.cli import app

runner = CliRunner()
SIM = ["--engine", "sim:llama-3.1-8b@h100"]
OK = ["--knob", "max_num_batched_tokens=512,4096", "--rates", "2,4"]

BAD = [
    (["sweep", *SIM, "--knob", "max_tokens=1,2", "--rates", "1"], "--knob: 'max_tokens' is not an engine knob"),
    (["sweep", *SIM, "--knob", "max_num_batched_tokens=abc", "--rates", "1"], "--knob: max_num_batched_tokens='abc': expected a whole number"),
    (["sweep", *SIM, "--knob", "max_num_batched_tokens=100", "--rates", "1"], "--knob: max_num_batched_tokens=100: must be >= max_num_seqs"),
    (["sweep", *SIM, "--knob", "gpu_memory_utilization=0.5,1.5", "--rates", "1"], "--knob: gpu_memory_utilization=1.5"),
    (["sweep", *SIM, "--knob", "enable_chunked_prefill=maybe", "--rates", "1"], "--knob: enable_chunked_prefill='maybe': expected true or false"),
    (["sweep", *SIM, "--knob", "max_num_batched_tokens=", "--rates", "1"], "--knob: 'max_num_batched_tokens=': give its values"),
    (["sweep", *SIM, "--knob", "max_num_batched_tokens", "--rates", "1"], "--knob: 'max_num_batched_tokens': give its values"),
    (["sweep", *SIM, "--knob", "max_num_seqs=8,8", "--rates", "1"], "a value is repeated"),
    (["sweep", *SIM, "--knob", "model=tiny", "--rates", "1"], "--knob: 'model' is not an engine knob"),
    (["sweep", *SIM, "--knob", "max_num_seqs=8", "--rates", ""], "--rates '': give at least one rate"),
    (["sweep", *SIM, "--knob", "max_num_seqs=8", "--rates", "2,-1"], "--rates: '-1': a rate must be a finite number > 0"),
    (["sweep", *SIM, "--knob", "max_num_seqs=8", "--rates", "2,x"], "--rates: 'x' is not a number"),
    (["sweep", *SIM, *OK, "--repeats", "0"], "--repeats 0: must be >= 1"),
    (["sweep", *SIM, "--url", "http://127.0.0.1:9", *OK], "--engine / --url: give exactly one"),
    (["sweep", *OK], "--engine / --url: give exactly one"),
    (["sweep", "--url", "http://127.0.0.1:9", "--knob", "max_model_len=1,2", "--rates", "1"], "--knob: 'max_model_len' is not a live knob of a running engine"),
    (["sweep", "--url", "ftp://x", *OK], "--url: expected an http(s) URL"),
    (["sweep", "--engine", "sim:gpt-5@h100", *OK], "--engine: model='sim:gpt-5@h100': unknown simulated model"),
    (["sweep", *SIM, *OK, "--engine-knobs", "max_model_len"], "--engine-knobs: 'max_model_len': expected KNOB=VALUE"),
    (["sweep", *SIM, *OK, "--engine-knobs", "max_num_batched_tokens=8"], "--engine-knobs: 'max_num_batched_tokens' is given twice"),
    (["sweep", *SIM, *OK, "--slo", "ttft:abc"], "slo.ttft: 'abc' is not a number of ms"),
    (["sweep", *SIM, *OK, "--target", "1.5"], "--target 1.5: an SLO attainment in (0, 1]"),
    (["sweep", *SIM, *OK, "--duration", "0"], "--duration 0.0: must be > 0 seconds"),
    (["sweep", *SIM, *OK, "--prompt-tokens", "x"], "--prompt-tokens: 'x': expected N"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "message"), BAD)
def test_a_bad_option_is_one_line_naming_it_before_anything_runs(tmp_path, args, message) -> None:
    db = tmp_path / "lab.db"
    result = runner.invoke(app, [*args, "--db", sqlite_url(db), "--no-progress"])
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.output
    assert message in lines[0]
    assert not db.exists()  # the store was not even opened


def test_a_simulated_sweep_through_the_cli_stores_the_run_and_prints_the_knee(tmp_path) -> None:
    url = sqlite_url(tmp_path / "lab.db")
    args = ["sweep", *SIM, "--knob", "max_num_batched_tokens=512,4096", "--rates", "2,100",
            "--duration", "1", "--prompt-tokens", "2048", "--output-tokens", "8",
            "--engine-knobs", "max_model_len=4096", "--slo", "ttft:200", "--name", "q13 ü",
            "--db", url, "--no-progress"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "max_num_batched_tokens sweep" in result.output and "knee req/s" in result.output
    assert "stored lab run 1 (finished, 4 of 4 points)" in result.output
    store = Store(url, migrate=False)
    try:
        (run,) = store.lab_runs()
        assert (run.name, run.status, run.num_planned_points) == ("q13 ü", LabRunStatus.FINISHED, 4)
        assert run.workload["prompt_tokens"] == "2048" and run.workload["slo"] == "ttft=200"
        curves = knee_curves(store.lab_points(run.id), run.workload["target_attainment"])
        assert [(c.knob_value, c.knee_rate, c.first_failing_rate) for c in curves] == [
            (512, 2.0, 100.0), (4096, 2.0, 100.0)
        ]  # fmt: skip
    finally:
        store.close()


def test_a_failing_sweep_is_one_error_line_and_a_failed_run(tmp_path) -> None:
    url = sqlite_url(tmp_path / "lab.db")
    args = ["sweep", *SIM, "--knob", "max_num_seqs=8", "--rates", "4", "--duration", "1",
            "--prompt-tokens", "4000", "--db", url, "--no-progress"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 1, result.output
    assert result.output.strip().splitlines()[-1] == (
        "error: lab run 1 failed: RequestError: prompt has 4000 tokens, more than "
        "max_model_len=2048"
    )
    store = Store(url, migrate=False)
    try:
        assert store.lab_run(1).status is LabRunStatus.FAILED
    finally:
        store.close()


# -- the knee -----------------------------------------------------------------------------


def _point(value, rate, repeat, attainment, **more) -> LabPoint:
    summary = {"slo_attainment": attainment, "request_goodput": rate * attainment, **more}
    return LabPoint(1, value, rate, repeat, summary)


def test_the_knee_is_the_highest_rate_whose_mean_attainment_holds_the_target() -> None:
    points = [
        _point(4096, 10.0, 0, 0.5),
        _point(512, 5.0, 0, 1.0, ttft_ms={"p95": 10.0}, itl_ms={"p95": None}),
        _point(512, 5.0, 1, 0.9, ttft_ms={"p95": 30.0}),
        _point(512, 10.0, 0, 0.95),
        _point(512, 10.0, 1, 0.8),  # mean 0.875: fails
        _point(512, 20.0, 0, 0.92),  # passes again above a failure: still the knee
        _point(4096, 5.0, 0, math.nan),  # NaN attainment fails
        _point(1.0, 5.0, 0, 1.0),
        _point(True, 5.0, 0, 0.0),
    ]
    curves = knee_curves(points, target=0.9)
    assert [c.knob_value for c in curves] == [4096, 512, 1.0, True]  # 1.0 and True stay apart
    big, small, one, true = curves
    assert (small.knee_rate, small.first_failing_rate) == (20.0, None)
    assert [p.rate for p in small.points] == [5.0, 10.0, 20.0]
    five = small.points[0]
    assert (five.num_repeats, five.slo_attainment, five.ttft_p95_ms) == (2, 0.95, 20.0)
    assert five.itl_p95_ms is None and five.itl_p99_ms is None
    assert five.request_goodput == pytest.approx((5.0 + 4.5) / 2)
    assert small.points[1].slo_attainment == pytest.approx(0.875)
    assert (big.knee_rate, big.first_failing_rate) == (None, 5.0)
    assert math.isnan(big.points[0].slo_attainment)
    assert (one.knee_rate, true.knee_rate) == (5.0, None)
    assert knee_curves([]) == []
    with pytest.raises(ValueError, match="target=0"):
        knee_curves(points, target=0)


# -- the option parsers take any text -------------------------------------------------------

names = st.sampled_from([*knob_types(), "num_usable_gpu_blocks", "nope", ""])


@settings(max_examples=150, deadline=None)
@given(name=names, values=st.lists(st.text(max_size=6), max_size=4), live=st.booleans())
def test_parse_knob_option_types_its_values_or_names_the_option(name, values, live) -> None:
    text = f"{name}={','.join(values)}"
    try:
        knob, typed = parse_knob_option(text, live_only=live)
    except WorkloadError as error:
        assert str(error).startswith("--knob: ")
        return
    assert knob == name and typed and len(typed) == len({repr(v) for v in typed})
    kind = knob_types().get(knob, "int")
    for value in typed:
        if kind == "bool":
            assert isinstance(value, bool)
        elif kind.startswith("int"):
            assert value is None or (isinstance(value, int) and not isinstance(value, bool))
        elif kind == "float":
            assert isinstance(value, float) and math.isfinite(value)
        else:
            assert isinstance(value, str) and value.strip() == value and value


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-(10**20), 10**20), min_size=1, max_size=5, unique=True))
def test_integer_knob_values_round_trip(values) -> None:
    text = "max_num_seqs=" + ",".join(map(str, values))
    assert parse_knob_option(text) == ("max_num_seqs", values)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=40))
def test_parse_engine_knobs_and_the_slo_take_any_text(text) -> None:
    try:
        knobs = parse_engine_knobs(text)
    except WorkloadError as error:
        assert str(error).startswith("--engine-knobs: ")
    else:
        assert set(knobs) <= set(knob_types())
    assert "," not in text or parse_sweep_slo(text).count(",") == text.count(",")


def test_the_console_form_fills_in_the_commands_defaults():
    """``sweep_options`` (what the console's sweep form builds its plan from) fills in every
    option a plan is built from at ``tailwatch sweep``'s own default; only the command's
    store and progress options are left out."""
    from loadgen.lab_plan import SWEEP_DEFAULTS
    from tailwatch.sweep_cli import sweep
    from tests.loadgen.command_defaults import command_defaults

    assert dict(SWEEP_DEFAULTS) == command_defaults(sweep, "db", "config", "progress")
