"""``tailwatch alerts list`` and ``tailwatch alerts silence add|list|expire`` against a SQLite
store: what they show, and that bad input is one ``error:`` line and exit 2."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from alerts import Alert, AlertState, Silence, Transition
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from collectors.store.connection import make_engine
from collectors.store.schema import upgrade_schema
from tailwatch.cli import app

NOW = 1_800_000_000.0
runner = CliRunner()


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    """A store with a pending, a firing (silenced), a resolved and a long-resolved alert."""
    url = sqlite_url(tmp_path / "tw.db")
    store = Store(url)
    pending = Alert.pending({"alertname": "QueueGrowth", "severity": "ticket"}, NOW - 30)
    firing = Alert.pending(
        {"alertname": "KVSaturation", "severity": "page", "target": "r2"}, NOW - 600, value=0.97
    ).fire(NOW - 300)
    resolved = (
        Alert.pending({"alertname": "TargetDown", "target": "r1"}, NOW - 900)
        .fire(NOW - 850)
        .resolve(NOW - 120, value=math.nan)
    )
    old = Alert.pending({"alertname": "Old"}, NOW - 9000).fire(NOW - 8000).resolve(NOW - 7200)
    alert_state_of(store).save_evaluation(
        [pending, firing],
        [
            Transition(NOW - 7200, old.fingerprint, AlertState.FIRING, old.state, old),
            Transition(
                NOW - 120, resolved.fingerprint, AlertState.FIRING, resolved.state, resolved
            ),
        ],
    )
    alert_state_of(store).save_silence(
        Silence("sil-1", 'target="r2"', NOW - 60, NOW + 3600, "oncall", "drain r2")
    )
    store.close()
    yield url


def _run(*args: str) -> object:
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def _listed(db: str, *args: str) -> list[dict]:
    result = _run("alerts", "list", "--db", db, "--now", str(NOW), "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_list_shows_active_and_recently_resolved_alerts_newest_first(db: str) -> None:
    rows = _listed(db)
    assert [(r["alertname"], r["state"], r["silenced_by"]) for r in rows] == [
        ("QueueGrowth", "pending", []),
        ("TargetDown", "resolved", []),
        ("KVSaturation", "firing", ["sil-1"]),
    ]
    assert rows[1]["value"] == "NaN" and rows[1]["ended_at"] == "2027-01-15T07:58:00Z"
    assert rows[2]["value"] == 0.97 and rows[2]["labels"]["target"] == "r2"
    assert [r["alertname"] for r in _listed(db, "--since", "3h")][-1] == "Old"


@pytest.mark.parametrize(
    ("state", "names"),
    [
        ("firing", ["KVSaturation"]),
        ("pending", ["QueueGrowth"]),
        ("resolved", ["TargetDown"]),
        ("silenced", ["KVSaturation"]),
    ],
)
def test_list_filters_by_state(db: str, state: str, names: list[str]) -> None:
    assert [r["alertname"] for r in _listed(db, "--state", state)] == names


def test_the_table_marks_silenced_alerts_with_the_silence_id(db: str) -> None:
    result = _run("alerts", "list", "--db", db, "--now", str(NOW))
    assert result.exit_code == 0, result.output
    line = next(line for line in result.stdout.splitlines() if "KVSaturation" in line)
    assert "firing (silenced by sil-1)" in line and "target=r2" in line and "page" in line
    assert "5m ago" in line and "0.97" in line
    assert "3 alert(s)" in result.stdout


def test_silence_add_list_expire(db: str) -> None:
    added = _run(
        "alerts", "silence", "add", "--db", db, "--now", str(NOW),
        "--matchers", '{alertname="queue-growth"}', "--duration", "2h",
        "--author", "me", "--comment", "deploy",
    )  # fmt: skip
    assert added.exit_code == 0, added.output
    silence_id = added.stdout.strip()
    listed = _run("alerts", "silence", "list", "--db", db, "--now", str(NOW), "--json")
    by_id = {s["id"]: s for s in json.loads(listed.stdout)}
    assert by_id[silence_id] == {
        "id": silence_id,
        "state": "active",
        "matchers": '{alertname="queue-growth"}',
        "starts_at": "2027-01-15T08:00:00Z",
        "ends_at": "2027-01-15T10:00:00Z",
        "created_by": "me",
        "comment": "deploy",
    }
    expired = _run("alerts", "silence", "expire", silence_id, "--db", db, "--now", str(NOW + 60))
    assert expired.exit_code == 0 and "expired silence" in expired.stdout
    again = _run("alerts", "silence", "expire", silence_id, "--db", db, "--now", str(NOW + 120))
    assert again.exit_code == 0 and "had already expired" in again.stdout
    listed = _run("alerts", "silence", "list", "--db", db, "--now", str(NOW + 120), "--json")
    assert {s["id"]: s["state"] for s in json.loads(listed.stdout)} == {
        "sil-1": "active",
        silence_id: "expired",
    }
    table = _run("alerts", "silence", "list", "--db", db, "--now", str(NOW + 120))
    assert "sil-1" in table.stdout and "drain r2" in table.stdout


def _one_error_line(result: object, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in lines[0]


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--matchers", 'alertname~"x"'], ["--matchers", "bad matcher format"]),
        (["--matchers", 'a="x'], ["never closes"]),
        (["--matchers", 'a=~""'], ["must not match the empty string"]),
        (["--duration", "0"], ["--duration '0'", "positive"]),
        (["--duration", "-2h"], ["--duration '-2h'"]),
        (["--duration", "abc"], ["--duration 'abc'", "like 90s"]),
        (["--author", " "], ["--author"]),
        (["--comment", ""], ["--comment"]),
    ],
)
def test_silence_add_refuses_bad_input(db: str, args: list[str], needles: list[str]) -> None:
    options = {"--matchers": "alertname=X", "--duration": "1h", "--author": "me", "--comment": "c"}
    options.update(dict(zip(args[::2], args[1::2], strict=True)))
    flat = [item for pair in options.items() for item in pair]
    _one_error_line(_run("alerts", "silence", "add", "--db", db, *flat), *needles)


def test_unknown_ids_states_and_stores_are_one_error_line(db: str, tmp_path: Path) -> None:
    _one_error_line(_run("alerts", "silence", "expire", "nope", "--db", db), "'nope'", "no such")
    _one_error_line(_run("alerts", "list", "--db", db, "--state", "open"), "--state 'open'")
    _one_error_line(_run("alerts", "list", "--db", db, "--since", "0s"), "--since")
    _one_error_line(_run("alerts", "list", "--db", db, "--now", "nan"), "--now")
    old = sqlite_url(tmp_path / "old.db")
    engine = make_engine(old)
    upgrade_schema(engine, "0003")
    engine.dispose()
    _one_error_line(
        _run("alerts", "list", "--db", old), "revision 0003", "tailwatch store migrate --db"
    )


TEXT = st.text(max_size=40)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    matchers=st.one_of(TEXT, st.just('{alertname="KV"}')),
    duration=st.one_of(TEXT, st.sampled_from(["2h", "0", "-1", "1e400", "nan", "90"])),
    author=TEXT,
    comment=TEXT,
    state=st.one_of(TEXT, st.sampled_from(["all", "silenced"])),
    since=TEXT,
    silence_id=st.one_of(TEXT, st.just("sil-1")),
)
def test_fuzzed_options_succeed_or_fail_with_one_error_line(
    db: str,
    matchers: str,
    duration: str,
    author: str,
    comment: str,
    state: str,
    since: str,
    silence_id: str,
) -> None:
    added = _run(
        "alerts", "silence", "add", "--db", db, "--now", str(NOW), "--matchers", matchers,
        "--duration", duration, "--author", author, "--comment", comment,
    )  # fmt: skip
    listed = _run("alerts", "list", "--db", db, "--now", str(NOW), "--state", state, "--since", since, "--json")  # fmt: skip
    expired = _run("alerts", "silence", "expire", "--db", db, "--now", str(NOW), "--", silence_id)
    for result in (added, listed, expired):
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        if result.exit_code != 0:
            _one_error_line(result)
    assert expired.exit_code == (0 if silence_id == "sil-1" else 2), expired.output
    if added.exit_code == 0:
        new_id = added.stdout.strip()
        silences = json.loads(_run("alerts", "silence", "list", "--db", db, "--json").stdout)
        assert any(s["id"] == new_id and s["comment"] == comment for s in silences)


def test_list_reads_the_whole_history_window_in_batches(
    db: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import alerts.views.alerts as view

    store = Store(db)
    steps = []
    for i in range(5):
        alert = Alert.pending({"alertname": f"R{i}"}, NOW - 500).fire(NOW - 400)
        alert = alert.resolve(NOW - 300 + i)
        steps.append(Transition(NOW - 300 + i, alert.fingerprint, AlertState.FIRING, alert.state, alert))  # fmt: skip
    alert_state_of(store).save_evaluation(alert_state_of(store).active_alerts(), steps)
    store.close()
    monkeypatch.setattr(view, "HISTORY_BATCH", 2)
    names = [r["alertname"] for r in _listed(db, "--state", "resolved")]
    assert names == ["TargetDown", "R4", "R3", "R2", "R1", "R0"]
