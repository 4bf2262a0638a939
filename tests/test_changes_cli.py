"""``tailwatch changes list`` against a SQLite store: newest first, ``--since``, ``--target``,
``--kind`` and ``--limit``, times in UTC with how long ago (never Unix seconds), label text
that cannot garble the terminal, and bad input as one ``error:`` line with exit 2 (fuzzed)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from collectors.store import Store, sqlite_url
from collectors.store.change_records import ChangeEvent, ChangeKind
from tailwatch.cli import app

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
runner = CliRunner()
COUNTER = "tailwatch:knob_changes_total"


@pytest.fixture
def db(tmp_path: Path) -> Iterator[str]:
    url = sqlite_url(tmp_path / "tw.db")
    store = Store(url)
    store.write_change_events(
        [
            ChangeEvent(NOW - 2 * 86400, "replica-0", ChangeKind.TARGET, "added", source="scrapes"),
            ChangeEvent(NOW - 600, "replica-0", ChangeKind.KNOB, "max_num_seqs", "32", "4", COUNTER),
            ChangeEvent(NOW - 600, "replica-1", ChangeKind.KNOB, "max_num_seqs", "32", "4", COUNTER),
            ChangeEvent(NOW - 60, "", ChangeKind.TRAFFIC, "batch", "0.000", "0.250", "tenant"),
            ChangeEvent(NOW - 30, "r\x1b2", ChangeKind.CONFIG, "quantization", "none", "int8",
                        "vllm:model_info"),
        ]
    )  # fmt: skip
    store.close()
    yield url


def _run(*args: str):
    return runner.invoke(app, list(args), env={"COLUMNS": "220"})


def _listed(db: str, *args: str) -> list[dict]:
    result = _run("changes", "list", "--db", db, "--now", str(NOW), "--json", *args)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_changes_are_listed_newest_first_with_what_changed(db: str) -> None:
    assert [(c["at"], c["target"], c["what"]) for c in _listed(db)] == [
        ("2027-01-15T07:59:30Z", "r\x1b2", "quantization (vllm:model_info) none → int8"),
        ("2027-01-15T07:59:00Z", None, "tenant batch 0% → 25% of requests"),
        ("2027-01-15T07:50:00Z", "replica-1", "max_num_seqs 32 → 4"),
        ("2027-01-15T07:50:00Z", "replica-0", "max_num_seqs 32 → 4"),
    ]
    assert len(_listed(db, "--since", "3d")) == 5
    assert [c["target"] for c in _listed(db, "--target", "replica-0", "--since", "3d")] == [
        "replica-0",
        "replica-0",
    ]
    assert [c["subject"] for c in _listed(db, "--target", "")] == ["batch"]
    assert [c["kind"] for c in _listed(db, "--kind", "knob")] == ["knob", "knob"]
    assert [c["subject"] for c in _listed(db, "--limit", "1")] == ["quantization"]


def test_the_table_shows_utc_times_and_how_long_ago_never_unix_seconds(db: str) -> None:
    result = _run("changes", "list", "--db", db, "--now", str(NOW))
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "4 change(s) from 2027-01-14T08:00:00Z to 2027-01-15T08:00:00Z" in out
    assert "2027-01-15T07:50:00Z (10m ago)" in out and "max_num_seqs 32 → 4" in out
    assert "fleet" in out and "r\\x1b2" in out and "\x1b" not in out
    assert str(int(NOW - 600)) not in out


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
        (["--since", "soon"], ["--since 'soon'"]),
        (["--kind", "knobs"], ["--kind 'knobs'", "config, knob, target, traffic"]),
        (["--db", "nosuch://x"], ["cannot open the store"]),
    ],
)
def test_bad_options_are_one_error_line(db: str, args: list[str], needles: list[str]) -> None:
    _one_error_line(_run("changes", "list", "--db", db, *args), *needles)


TEXT = st.text(max_size=30)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    since=st.one_of(TEXT, st.sampled_from(["24h", "90", "1e400", "nan", "-5m", "1e308"])),
    limit=st.one_of(TEXT, st.integers(-(2**70), 2**70).map(str), st.sampled_from(["1", "50"])),
    kind=st.one_of(TEXT, st.sampled_from(["knob", "traffic", "target", "config"])),
    target=TEXT,
)
def test_fuzzed_options_succeed_or_fail_with_one_error_line(db, since, limit, kind, target):
    result = _run(
        "changes", "list", "--db", db, "--now", str(NOW), "--json",
        "--since", since, "--limit", limit, "--kind", kind, "--target", target,
    )  # fmt: skip
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    if result.exit_code != 0:
        _one_error_line(result)
    else:
        listed = json.loads(result.stdout)
        assert len(listed) <= int(limit.strip())
        assert all(c["kind"] == kind.strip() for c in listed)
