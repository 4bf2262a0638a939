"""``tailwatch incident list`` (and ``incident show``'s id) against a SQLite store: the order,
``--since`` and ``--limit``, the incident ids ``alerts list`` shows, and bad input as one
``error:`` line with exit 2 (fuzzed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from alerts import Alert, AlertState, Transition
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from tailwatch.cli import app

NOW = 1_800_000_000.0
runner = CliRunner()


def _moved(alert: Alert, at: float, before: AlertState) -> Transition:
    return Transition(at, alert.fingerprint, before, alert.state, alert)


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    """Incidents 1 (resolved 2 h ago), 2 (resolved 2 min ago) and 3 (firing), and a pending
    alert (no incident)."""
    url = sqlite_url(tmp_path / "tw.db")
    store = Store(url)
    state = alert_state_of(store)
    old = Alert.pending({"alertname": "Old"}, NOW - 9000).fire(NOW - 8000)
    down = Alert.pending({"alertname": "TargetDown", "target": "r1"}, NOW - 900).fire(NOW - 850)
    kv = Alert.pending(
        {"alertname": "KVSaturation", "severity": "page", "target": "r\x1b2"},
        NOW - 600,
        {"summary": "KV cache 97% full"},
        value=0.97,
    ).fire(NOW - 300)
    pending = Alert.pending({"alertname": "QueueGrowth"}, NOW - 30)
    state.save_evaluation([old], [_moved(old, NOW - 8000, AlertState.PENDING)])
    state.save_evaluation([down], [_moved(old.resolve(NOW - 7200), NOW - 7200, AlertState.FIRING)])
    state.save_evaluation([down, kv], [_moved(kv, NOW - 300, AlertState.PENDING)])
    state.save_evaluation(
        [kv, pending], [_moved(down.resolve(NOW - 120), NOW - 120, AlertState.FIRING)]
    )
    store.close()
    yield url


def _run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "200"})


def _listed(db: str, *args: str) -> list[dict]:
    result = _run("incident", "list", "--db", db, "--now", str(NOW), "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_list_is_open_first_then_resolved_newest_first(db: str) -> None:
    assert [(i["id"], i["alertname"], i["state"]) for i in _listed(db)] == [
        (3, "KVSaturation", "firing"),
        (2, "TargetDown", "resolved"),
        (1, "Old", "resolved"),
    ]
    assert [i["id"] for i in _listed(db, "--since", "1h")] == [3, 2]
    assert [i["id"] for i in _listed(db, "--limit", "2")] == [3, 2]
    (kv,) = _listed(db, "--since", "1m")
    assert kv["summary"] == "KV cache 97% full" and kv["severity"] == "page"
    assert (kv["pending_since"], kv["resolved_at"], kv["value"]) == (
        "2027-01-15T07:50:00Z",
        None,
        0.97,
    )


def test_the_table_escapes_labels_and_alerts_list_names_the_incident(db: str) -> None:
    result = _run("incident", "list", "--db", db, "--now", str(NOW))
    assert result.exit_code == 0, result.output
    assert "3 incident(s)" in result.stdout and "target=r\\x1b2" in result.stdout
    assert "\x1b" not in result.stdout
    listed = _run("alerts", "list", "--db", db, "--now", str(NOW), "--json")
    by_name = {a["alertname"]: a["incident"] for a in json.loads(listed.stdout)}
    assert by_name == {"KVSaturation": 3, "TargetDown": 2, "QueueGrowth": None}


def _one_error_line(result, *needles: str) -> None:
    assert result.exit_code == 2, result.output
    err = result.stderr.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in result.output
    for needle in needles:
        assert needle in err, err


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["--limit", "0"], ["--limit '0'"]),
        (["--limit", "ten"], ["--limit 'ten'"]),
        (["--limit", "10001"], ["1 to 10000"]),
        (["--limit", "-1"], ["--limit '-1'"]),
        (["--since", "0s"], ["--since"]),
        (["--since", "soon"], ["--since 'soon'"]),
    ],
)
def test_list_refuses_bad_options_in_one_line(db: str, args: list[str], needles: list[str]) -> None:
    _one_error_line(_run("incident", "list", "--db", db, *args), *needles)


TEXT = st.text(max_size=30)


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    incident_id=st.one_of(
        TEXT,
        st.integers(-(2**80), 2**80).map(str),
        st.sampled_from(["1", "#3", " 2 ", "03", "#", "١", "²"]),
    ),
    since=st.one_of(TEXT, st.sampled_from(["24h", "90", "1e400", "nan", "-5m"])),
    limit=st.one_of(TEXT, st.integers(-(2**70), 2**70).map(str), st.sampled_from(["1", "50"])),
)
def test_fuzzed_ids_and_options_succeed_or_fail_with_one_error_line(
    db: str, incident_id: str, since: str, limit: str
) -> None:
    shown = _run("incident", "show", "--db", db, "--now", str(NOW), "--", incident_id)
    listed = _run("incident", "list", "--db", db, "--now", str(NOW), "--json", "--since", since, "--limit", limit)  # fmt: skip
    for result in (shown, listed):
        assert result.exception is None or isinstance(result.exception, SystemExit), result.output
        if result.exit_code != 0:
            _one_error_line(result)
    stripped = incident_id.strip().removeprefix("#")
    if stripped.isascii() and stripped.isdigit() and int(stripped) in (1, 2, 3):
        assert shown.exit_code == 0, shown.output
        assert shown.stdout.startswith(f"incident {int(stripped)}: ")
    else:
        assert shown.exit_code == 2
    if listed.exit_code == 0:
        assert 1 <= len(json.loads(listed.stdout)) <= int(limit.strip())
