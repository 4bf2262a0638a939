"""``tailwatch rules backtest``: the real evaluator over a past window of a SQLite store holding
a planted overload, and of a backfilled Prometheus 2.42 through the configured ``prometheus:``
section (issue 24, item 2); its error lines; the evaluation times as a property."""

from __future__ import annotations

import itertools
import json
import math
from datetime import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from alerts import MAX_EVALUATIONS, backtest, evaluation_times
from alerts.rules import BUILTIN_RULES
from alerts.views import iso
from collectors.prometheus import PrometheusReader
from collectors.store import Store, sqlite_url
from tailwatch.cli import app
from tests.alerts.eval_data import START, Conditions, build
from tests.alerts.test_triage_prometheus import (
    HOURS as SERVER_HOURS,
)
from tests.alerts.test_triage_prometheus import (
    PERTURB as SERVER_PERTURB,
)
from tests.alerts.test_triage_prometheus import (
    RECOVER as SERVER_RECOVER,
)
from tests.alerts.test_triage_prometheus import (
    START as SERVER_START,
)
from tests.alerts.test_triage_prometheus import AsServer, overload
from tests.collectors.metrics_servers import backfilled_prometheus
from tests.collectors.vllm_history import CapturingFake, vllm_points

PERTURB = START + 5400.0  # an hour and a half of healthy history first
RECOVER = PERTURB + 1200.0
HOURS = 2.0
FOR_SECONDS = 120.0  # queue-growth's for:


def _overload(t: float, replica: int) -> Conditions:
    """Every replica queues: waiting 10, queue time 80% of a TTFT four times longer."""
    if PERTURB < t <= RECOVER:
        return Conditions(requests=250, waiting=10.0, queue_share=0.8, ttft=((0.32, 1.0),))
    return Conditions()


@pytest.fixture(scope="module")
def db(tmp_path_factory: pytest.TempPathFactory) -> str:
    url = sqlite_url(tmp_path_factory.mktemp("backtest") / "store.db")
    store = Store(url)
    try:
        build(_overload, hours=HOURS, reader=store)  # type: ignore[arg-type]  # a ScrapeStore
    finally:
        store.close()
    return url


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, ["rules", "backtest", *args], env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def _rule(document: dict, name: str) -> dict:
    return next(r for r in document["rules"] if r["rule"] == name)


def test_the_planted_overload_pages_as_queue_growth_on_the_store(db: str) -> None:
    window = ("--from", iso(PERTURB - 300), "--to", iso(RECOVER + 600), "--step", "60")
    code, out, err = _run(*window, "--db", db, "--json")
    assert code == 0, err
    document = json.loads(out)
    assert document["from"] == iso(PERTURB - 300)
    assert document["evaluations"] == 36
    queue = _rule(document, "queue-growth")
    assert queue["severity"] == "page"
    assert queue["count"] == 1, queue
    (firing,) = queue["firings"]
    # for: 120 s held as live: it fires no earlier than two minutes into the overload, and
    # resolves after the recovery, inside the window
    assert PERTURB + FOR_SECONDS <= _seconds(firing["start"]) <= PERTURB + 600
    assert RECOVER <= _seconds(firing["end"]) <= RECOVER + 600
    assert not firing["still_firing"]
    assert firing["labels"] == {"model": "m"}
    assert isinstance(firing["peak"], float)
    assert document["counts"]["page"] >= 1

    code, text, err = _run(*window, "--db", db)
    assert code == 0, err
    lines = text.splitlines()
    assert lines[0].startswith(f"backtest {iso(PERTURB - 300)} → {iso(RECOVER + 600)} every 1m")
    at = lines.index("queue-growth (queue-growth, page): 1 firing")
    assert lines[at + 1].startswith(f"  {firing['start']} → {firing['end']} (")
    assert "model=m" in lines[at + 1]
    assert "target-down (target-down, page): no alerts" in lines
    assert lines[-1].startswith("total: ")


def test_a_clean_stretch_has_no_alerts_for_any_rule(db: str) -> None:
    code, out, err = _run("--from", iso(START + 3600), "--to", iso(PERTURB), "--step", "60", "--db", db)  # fmt: skip
    assert code == 0, err
    rule_lines = [line for line in out.splitlines()[1:-1] if not line.startswith("  ")]
    assert len(rule_lines) >= 10  # the built-ins, metric absent included
    assert all(line.endswith(": no alerts") for line in rule_lines), out
    assert "; 0 of " in out.splitlines()[-1]


def test_a_firing_at_the_window_end_is_still_firing(db: str) -> None:
    code, out, err = _run("--from", iso(PERTURB), "--to", iso(PERTURB + 600), "--step", "60", "--db", db, "--json")  # fmt: skip
    assert code == 0, err
    (firing,) = _rule(json.loads(out), "queue-growth")["firings"]
    assert firing["still_firing"] and firing["end"] is None
    assert firing["seconds"] == PERTURB + 600 - _seconds(firing["start"])


def _seconds(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- on a real Prometheus ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    fake = CapturingFake()
    build(overload, hours=SERVER_HOURS, start=SERVER_START, reader=fake)
    points, types = vllm_points(fake.records)
    directory = tmp_path_factory.mktemp("prometheus-backtest")
    with backfilled_prometheus(directory, points, types) as running:
        yield fake, running.url


def test_the_backtest_on_prometheus_pages_queue_growth_and_equals_the_fake(server, tmp_path):
    fake, url = server
    config = tmp_path / "tailwatch.yaml"
    config.write_text(f"prometheus:\n  url: {url}\n", encoding="utf-8")
    start, end = SERVER_PERTURB - 300, SERVER_RECOVER + 300
    code, out, err = _run("--from", iso(start), "--to", iso(end), "--step", "60", "--config", str(config), "--json")  # fmt: skip
    assert code == 0, err
    queue = _rule(json.loads(out), "queue-growth")
    assert queue["count"] >= 1, queue
    assert all(
        SERVER_PERTURB + FOR_SECONDS <= _seconds(f["start"]) <= SERVER_RECOVER
        for f in queue["firings"]
    )
    with PrometheusReader(url) as reader:
        on_server = backtest(BUILTIN_RULES, reader, start, end, 60.0)
        on_fake = backtest(BUILTIN_RULES, AsServer(fake, reader.semantics), start, end, 60.0)
    assert on_server == on_fake
    assert [f.labels for f in next(r for r in on_server.rules if r.rule == "queue-growth").firings]


def test_prometheus_and_triage_name_the_overloads_cause(server, tmp_path) -> None:
    """``--prometheus URL`` reads that server without a config; ``--triage`` says what each
    page would have named as its cause."""
    _, url = server
    start, end = SERVER_PERTURB - 300, SERVER_RECOVER + 300
    code, out, err = _run("--from", iso(start), "--to", iso(end), "--step", "60", "--prometheus", url, "--triage", "--json", "--db", sqlite_url(tmp_path / "unopened.db"))  # fmt: skip
    assert code == 0, err
    queue = _rule(json.loads(out), "queue-growth")
    assert queue["count"] >= 1, queue
    assert {(f["cause"], f["scope"]) for f in queue["firings"]} == {("overload", "fleet")}
    assert not (tmp_path / "unopened.db").exists()  # a server read opens no store
    code, text, err = _run("--from", iso(start), "--to", iso(end), "--step", "60", "--prometheus", url, "--triage")  # fmt: skip
    assert code == 0, err
    assert "cause: overload (fleet)" in text
    code, text, _ = _run("--from", iso(start), "--to", iso(end), "--step", "60", "--prometheus", url)  # fmt: skip
    assert code == 0 and "cause:" not in text  # no triage unless asked


# -- errors ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--from", "2026-12-06T12:00:00Z", "--to", "2026-12-06T10:00:00Z"), "is not before --to"),
        (("--from", "yesterday"), "--from 'yesterday': expected now, Unix seconds, ISO 8601"),
        (("--from", "-1h", "--to", "soon"), "--to 'soon': expected"),
        (("--from", "-1h", "--step", "0"), "--step '0': must be a positive duration"),
        (("--from", "-1h", "--step", "fast"), "--step 'fast'"),
        (("--from", "-30d", "--step", "1s"), "evaluations from"),
        (("--from", "-1h", "--match", 'job="vllm"'), "--match goes with --prometheus URL"),
        (("--from", "-1h", "--prometheus", "ftp://x"), "--prometheus: Prometheus URL: expected"),
    ],
)
def test_bad_input_is_one_error_line(args, message, tmp_path) -> None:
    code, out, err = _run(*args, "--db", sqlite_url(tmp_path / "none.db"))
    assert code == 2, (out, err)
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert message in err, err
    assert not (tmp_path / "none.db").exists()  # refused before the store is opened


def test_too_many_evaluations_names_the_limit() -> None:
    with pytest.raises(ValueError, match=f"more than {MAX_EVALUATIONS:,}"):
        evaluation_times(0.0, float(MAX_EVALUATIONS), 1.0)
    assert len(evaluation_times(0.0, float(MAX_EVALUATIONS - 1), 1.0)) == MAX_EVALUATIONS


_times = st.floats(min_value=0, max_value=4e9, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(
    start=_times,
    end=_times,
    step=st.one_of(st.floats(allow_nan=True), st.floats(min_value=0.001, max_value=1e6)),
)
def test_evaluation_times_cover_the_window_or_name_the_option(start, end, step) -> None:
    try:
        times = evaluation_times(start, end, step, limit=5000)
    except ValueError as error:
        assert str(error).startswith(("--from", "--to", "--step")) or "evaluations" in str(error)
        assert not (
            start < end and math.isfinite(step) and step > 0 and (end - start) / step < 4998
        )
        return
    assert start < end and step > 0
    assert 1 <= len(times) <= 5000
    assert times[0] == start and times[-1] <= end + 1e-6 * max(1.0, abs(end))
    assert end - times[-1] < step * (1 + 1e-9)
    assert all(b > a for a, b in itertools.pairwise(times))


@pytest.mark.parametrize("step", [5e-324, 1e-300])
def test_a_step_too_small_to_count_is_named_not_an_overflow(step: float) -> None:
    """Hypothesis found it: a denormal step makes the evaluation count infinite."""
    with pytest.raises(ValueError, match=r"countless evaluations|evaluations from"):
        evaluation_times(0.0, 3600.0, step)
