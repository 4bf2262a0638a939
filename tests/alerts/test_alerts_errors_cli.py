"""``tailwatch alerts errors`` and the warnings of ``alerts list``: rules that failed to
evaluate, as the evaluator stored them, shown so a silently broken rule is seen."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from alerts import EvaluationError
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from tailwatch.cli import app

NOW = 1_800_000_000.0
runner = CliRunner()


def _store(tmp_path: Path, evaluations: list[tuple[float, list[EvaluationError]]]) -> str:
    url = sqlite_url(tmp_path / "tw.db")
    store = Store(url)
    for at, errors in evaluations:
        alert_state_of(store).save_evaluation([], [], errors, at)
    store.close()
    return url


def _run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def _layout(at: float) -> EvaluationError:
    return EvaluationError(
        "tail-latency-ttft", at, "LayoutChangeError", "rule 'tail-latency-ttft': layout\x1b[2J"
    )


def test_errors_lists_each_rule_once_with_its_count(tmp_path: Path) -> None:
    db = _store(
        tmp_path,
        [
            (
                NOW - 120,
                [_layout(NOW - 120), EvaluationError("queue", NOW - 120, "ValueError", "x")],
            ),
            (NOW - 60, [_layout(NOW - 60)]),
            (NOW - 15, [_layout(NOW - 15)]),
        ],
    )
    result = _run("alerts", "errors", "--db", db, "--now", str(NOW), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["last_evaluation"] == "2027-01-15T07:59:45Z"
    assert [(f["rule"], f["failing"], f["num_failures"]) for f in data["failures"]] == [
        ("tail-latency-ttft", True, 3),
        ("queue", False, 1),
    ]
    assert data["failures"][0]["first_failed"] == "2027-01-15T07:58:00Z"
    table = _run("alerts", "errors", "--db", db, "--now", str(NOW))
    assert table.exit_code == 0, table.output
    assert "1 rule(s) failing at the last evaluation" in table.stdout
    assert "works again" in table.stdout and "\x1b" not in table.stdout
    listed = _run("alerts", "list", "--db", db, "--now", str(NOW), "--json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.stdout) == []
    (warning,) = listed.stderr.strip().splitlines()
    assert warning.startswith("warning: 1 rule(s) failed to evaluate at the last evaluation")
    assert "tail-latency-ttft" in warning and "tailwatch alerts errors" in warning


def test_list_warns_when_the_last_evaluation_is_old(tmp_path: Path) -> None:
    db = _store(tmp_path, [(NOW - 3600, [])])
    listed = _run("alerts", "list", "--db", db, "--now", str(NOW))
    assert listed.exit_code == 0, listed.output
    assert "the last evaluation was saved 1h ago" in listed.stderr
    fresh = _run("alerts", "list", "--db", db, "--now", str(NOW - 3500))
    assert fresh.stderr == ""


def test_a_store_never_evaluated_has_no_errors(tmp_path: Path) -> None:
    db = _store(tmp_path, [])
    result = _run("alerts", "errors", "--db", db, "--now", str(NOW), "--json")
    assert json.loads(result.stdout) == {"last_evaluation": None, "failures": []}
    result = _run("alerts", "errors", "--db", db, "--now", "nan")
    assert result.exit_code == 2 and result.stderr.startswith("error: --now")
