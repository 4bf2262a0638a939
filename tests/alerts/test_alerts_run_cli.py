"""``tailwatch alerts run``: the evaluator over a real SQLite store through the CLI. Each
``--once`` run is a fresh process-like evaluator, so pending → firing across two runs also
proves that state is resumed from the store; ``alerts list`` then shows what the runs saved."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from collectors.store import Store, sqlite_url
from tailwatch.cli import app
from tests.alerts.eval_data import START, Conditions, build

PERTURB = START + 3900.0
HOURS = 2.0


def _errors(t: float, replica: int) -> Conditions:
    return Conditions(error_share=0.3) if t > PERTURB else Conditions()


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("alerts-run") / "store.db"
    store = Store(sqlite_url(path))
    try:
        build(_errors, hours=HOURS, reader=store)  # type: ignore[arg-type]  # a ScrapeStore
    finally:
        store.close()
    return path


@pytest.fixture
def db(seeded: Path, tmp_path) -> str:
    """A copy of the seeded store per test: each starts with no alert state."""
    copy = tmp_path / "store.db"
    shutil.copyfile(seeded, copy)
    return sqlite_url(copy)


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_once_goes_pending_then_firing_across_runs_and_list_shows_it(db: str, tmp_path) -> None:
    config = tmp_path / "tailwatch.yaml"
    config.write_text("alerts:\n  rules:\n    error-rate: {for: 60}\n", encoding="utf-8")
    first = PERTURB + 600
    code, out, err = _run("alerts", "run", "--once", "--db", db, "--config", str(config), "--now", str(first))  # fmt: skip
    assert code == 0, err
    assert "pending  error-rate" in out
    assert "firing" not in out
    code, out, err = _run("alerts", "run", "--once", "--db", db, "--config", str(config), "--now", str(first + 60))  # fmt: skip
    assert code == 0, err
    assert "firing   error-rate" in out, out
    assert "1 firing" in err
    code, out, err = _run("alerts", "list", "--db", db, "--json", "--now", str(first + 60))
    assert code == 0, err
    listed = json.loads(out)
    names = [(a["labels"]["alertname"], a["state"]) for a in listed]
    assert ("error-rate", "firing") in names, listed
    # A clock before the saved state would move alerts back in time: refused, state kept.
    code, out, err = _run("alerts", "run", "--once", "--db", db, "--config", str(config), "--now", str(first))  # fmt: skip
    assert code == 2
    assert "before the stored alert state" in err and "Traceback" not in err
    code, out, err = _run("alerts", "list", "--db", db, "--json", "--now", str(first + 60))
    assert ("error-rate", "firing") in [
        (a["labels"]["alertname"], a["state"]) for a in json.loads(out)
    ]


def test_a_healthy_window_fires_nothing(db: str, tmp_path) -> None:
    config = tmp_path / "tailwatch.yaml"
    config.write_text("alerts: {}\n", encoding="utf-8")
    code, out, err = _run("alerts", "run", "--once", "--db", db, "--config", str(config), "--now", str(PERTURB - 60))  # fmt: skip
    assert code == 0, err
    assert "0 firing, 0 pending" in err
    assert out == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--interval", "0"], "--interval"),
        (["--interval", "soon"], "--interval"),
        (["--now", "nan", "--once"], "--now"),
        (["--now", "1800000000"], "--now is only for --once"),
    ],
)
def test_bad_options_are_one_error_line(db: str, tmp_path, args, message) -> None:
    config = tmp_path / "tailwatch.yaml"
    config.write_text("alerts: {}\n", encoding="utf-8")
    code, out, err = _run("alerts", "run", "--db", db, "--config", str(config), *args)
    assert code == 2, (out, err)
    assert message in err
    assert err.strip().count("\n") == 0 and "Traceback" not in err


def test_a_bad_config_is_one_error_line(db: str, tmp_path) -> None:
    config = tmp_path / "tailwatch.yaml"
    config.write_text("alerts:\n  rules:\n    queue-growth: {fr: 1}\n", encoding="utf-8")
    code, _, err = _run("alerts", "run", "--once", "--db", db, "--config", str(config))
    assert code == 2
    assert "queue-growth" in err and "fr" in err
    assert "Traceback" not in err


def _fire(db: str, tmp_path) -> tuple[dict, float]:
    """Run the evaluator twice a `for:` apart so error-rate fires; its listing and when."""
    config = tmp_path / "tailwatch.yaml"
    config.write_text("alerts:\n  rules:\n    error-rate: {for: 60}\n", encoding="utf-8")
    first = PERTURB + 600
    for at in (first, first + 60):
        code, _, err = _run("alerts", "run", "--once", "--db", db, "--config", str(config), "--now", str(at))  # fmt: skip
        assert code == 0, err
    code, out, err = _run("alerts", "list", "--db", db, "--json", "--now", str(first + 60))
    (alert,) = [a for a in json.loads(out) if a["labels"]["alertname"] == "error-rate"]
    return alert, first + 60


def test_incident_show_triages_the_incident_window(db: str, tmp_path) -> None:
    alert, at = _fire(db, tmp_path)
    code, out, err = _run("incident", "list", "--db", db, "--json", "--now", str(at))
    assert code == 0, err
    (incident,) = json.loads(out)
    assert incident["id"] == alert["incident"] == 1
    assert (incident["fingerprint"], incident["state"]) == (alert["fingerprint"], "firing")
    assert incident["pending_since"] == alert["active_at"]
    assert incident["started_at"] == alert["started_at"]
    code, out, err = _run("incident", "show", "1", "--db", db, "--now", str(at))
    assert code == 0, err
    head = out.splitlines()[0]
    assert head.startswith(f"incident 1: error-rate (firing) {alert['fingerprint']}")
    assert "incident " in out and "baseline " in out
    assert "Triage verdict:" in out and "Recommendation" in out
    assert "Traceback" not in out + err


@pytest.mark.parametrize(
    ("incident", "message"),
    [
        ("zz", "expected an incident id"),
        ("", "expected an incident id"),
        ("0123456789abcdef", "expected an incident id"),
        ("7", "no incident has that id"),
        ("#7", "no incident has that id"),
        ("9" * 40, "no incident has that id"),
    ],
)
def test_incident_show_refuses_unknown_ids_in_one_line(db: str, incident, message) -> None:
    code, out, err = _run("incident", "show", "--db", db, "--", incident)
    assert code == 2, (out, err)
    assert message in err and err.strip().count("\n") == 0
    assert "tailwatch incident list" in err
