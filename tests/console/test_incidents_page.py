"""The Incidents page over the stored incident records: its triage equals ``tailwatch incident
show`` on the same store (same windows, same top hypothesis, same evidence numbers), ids in
the URL are untrusted (malformed, unknown, an old fingerprint link), and failing rules or a
stopped evaluator are shown on Incidents and on Overview's header."""

from __future__ import annotations

import time

import pytest
from hypothesis import given, strategies
from hypothesis import settings as hypothesis_settings
from typer.testing import CliRunner

from alerts import EvaluationError
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from console.incidents.frames import parse_incident_param
from console.page_kit import INCIDENTS_PAGE, OVERVIEW_PAGE
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV
from tests.console.seeded_store import Seeded
from tests.console.test_pages import (  # noqa: F401 (the fixture)
    APP,
    EVIDENCE,
    HYPOTHESES,
    UNASSESSED,
    _console_env,
    incident_table,
    run,
)

WIDTH = 400  # NOTE: wide enough that no cell of the CLI's tables wraps


def cli_report(seeded: Seeded) -> str:
    from tailwatch.cli import app

    result = CliRunner().invoke(
        app,
        ["incident", "show", str(seeded.incident_id), "--db", seeded.url,
         "--config", str(seeded.config), "--width", str(WIDTH)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.output


def table_rows(text: str, title: str) -> list[list[str]]:
    """The body rows of the rich table titled ``title`` in the CLI's text, as cell strings."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip().startswith(title))
    rows = []
    for line in lines[start + 4 :]:  # title, top rule, header, header rule
        if not line.startswith("│"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("│").split("│")])
    return rows


UNKNOWN = ("signal", "scope", "baseline", "source", "note")


def test_the_page_triage_is_what_incident_show_computes(seeded):
    at = run(INCIDENTS_PAGE, seeded, id=str(seeded.incident_id))
    text = cli_report(seeded)
    # the same windows: the CLI's second line holds the same four times as the caption
    window_line = text.splitlines()[1]
    caption = next(c.value for c in at.caption if "Triage window" in c.value)
    times = [t for t in window_line.replace(";", " ").split() if t.endswith("Z")]
    assert len(times) == 4 and all(t in caption for t in times), (window_line, caption)
    hypotheses, unassessed, evidence, unknown = (
        incident_table(at, columns) for columns in (HYPOTHESES, UNASSESSED, EVIDENCE, UNKNOWN)
    )
    cli_hypotheses = table_rows(text, "Hypotheses, most likely first")
    # NOTE: the page lists the causes without their data apart, after those weighed
    ranked = sorted([*zip(hypotheses["#"], hypotheses["cause"], strict=True),
                     *zip(unassessed["#"], unassessed["cause"], strict=True)])  # fmt: skip
    assert [r[1] for r in cli_hypotheses if r[0]] == [cause for _, cause in ranked]
    by_rank = {r[0]: (r[1], r[2]) for r in cli_hypotheses if r[0]}
    for row in hypotheses.itertuples():
        assert by_rank[str(row[1])] == (row.cause, row.score), (row, by_rank)
    cli_evidence = [r for r in table_rows(text, "Evidence: incident window") if r[0]]
    assert len(cli_evidence) == len(evidence) + len(unknown)
    known = [r for r in cli_evidence if r[2] != "not enough data"]
    for cli_row, row in zip(known, evidence.itertuples(), strict=True):
        assert cli_row[:5] == [row.signal, row.scope, row.incident, row.baseline, row.change]
    missing = [r for r in cli_evidence if r[2] == "not enough data"]
    assert [r[:2] for r in missing] == [[row.signal, row.scope] for row in unknown.itertuples()]
    verdict = next(line for line in text.splitlines() if line.startswith("Triage verdict:"))
    shown = [s.value for s in at.success] + [i.value for i in at.info]
    if verdict.endswith(("no cause stands out", "not enough data")):
        assert any("Verdict" in s for s in shown), shown
    else:
        cause = verdict.split(": ", 1)[1]
        assert any(f"Likely cause: {cause}" in s.replace("\\", "") for s in shown), shown


def test_an_old_fingerprint_link_opens_the_latest_incident(seeded):
    at = run(INCIDENTS_PAGE, seeded, id=seeded.fingerprint)
    assert at.title[0].value.startswith(f"#{seeded.incident_id} · ")
    assert any("old link" in c.value for c in at.caption)


@pytest.mark.parametrize(
    ("given_id", "says"),
    [
        ("zz", "not an incident id"),
        ("99999", "No incident has id 99999"),
        ("1" * 30, "no incident has that id"),
        ("0", "No incident has id 0"),
        ("-1", "not an incident id"),
        ("ffffffffffffffff", "No incident of the alert with fingerprint"),
    ],
)
def test_a_bad_or_unknown_id_is_a_message_and_the_list(seeded, given_id, says):
    at = run(INCIDENTS_PAGE, seeded, id=given_id)
    assert any(says in w.value for w in at.warning), [w.value for w in at.warning]
    assert at.title[0].value == "Incidents"  # the list follows the message


@hypothesis_settings(max_examples=60, deadline=None)
@given(strategies.text(max_size=40))
def test_any_id_text_parses_to_one_answer(text):
    ref = parse_incident_param(text)
    assert (ref.incident_id is not None or ref.fingerprint is not None) != bool(ref.problem)
    if ref.incident_id is not None:
        assert ref.incident_id == int(text.strip().removeprefix("#"))


def _store_with_health(tmp_path, *, failing: bool, age_seconds: float) -> str:
    url = sqlite_url(tmp_path / "health.db")
    store = Store(url)
    at = time.time() - age_seconds
    errors = (
        [EvaluationError("kv-<b>saturation</b>", at, "LayoutChangeError", "bucket layout changed")]
        if failing
        else []
    )
    alert_state_of(store).save_evaluation([], [], errors, at_seconds=at)
    store.close()
    return url


@pytest.fixture
def health_env(monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    monkeypatch.setenv(LIVE_ENV, "0")

    def use(url: str) -> None:
        monkeypatch.setenv("TAILWATCH_DB_URL", url)

    return use


def _page(page: str):
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return [w.value for w in at.warning]


def test_a_failing_rule_is_shown_on_incidents_and_overview(tmp_path, health_env):
    health_env(_store_with_health(tmp_path, failing=True, age_seconds=5))
    warnings = _page(INCIDENTS_PAGE)
    listed = [w for w in warnings if "alert rule(s) failing" in w]
    assert len(listed) == 1, warnings
    # the rule's name is escaped markdown, so its markup shows as text
    assert "kv\\-\\<b\\>saturation\\<\\/b\\>" in listed[0] and "<b>" not in listed[0]
    assert "LayoutChangeError" in listed[0] and "1 failed evaluation" in listed[0]
    assert any("1 alert rule(s) failing" in w for w in _page(OVERVIEW_PAGE))


def test_a_stale_evaluation_is_shown_and_a_fresh_healthy_one_is_not(tmp_path, health_env):
    health_env(_store_with_health(tmp_path, failing=False, age_seconds=3600))
    assert any("Alerts are stale" in w and "1h ago" in w for w in _page(OVERVIEW_PAGE))
    (tmp_path / "fresh").mkdir()
    health_env(_store_with_health(tmp_path / "fresh", failing=False, age_seconds=5))
    assert not any("stale" in w or "failing" in w for w in _page(OVERVIEW_PAGE))
    assert not any("stale" in w or "failing" in w for w in _page(INCIDENTS_PAGE))


def test_hostile_incident_labels_are_text(tmp_path, health_env):
    from alerts import Alert, AlertState, Transition

    url = sqlite_url(tmp_path / "hostile.db")
    store = Store(url)
    now = time.time()
    labels = {"alertname": "<b>boom</b>", "target": "[x](javascript:alert(1))", "severity": "<i>"}
    alert = Alert.pending(labels, now - 60, {"summary": "<script>alert(1)</script>"}).fire(now - 30)
    moved = Transition(now - 30, alert.fingerprint, AlertState.PENDING, AlertState.FIRING, alert)
    alert_state_of(store).save_evaluation([alert], [moved], at_seconds=now - 30)
    (incident,) = alert_state_of(store).incidents()
    store.close()
    health_env(url)
    from streamlit.testing.v1 import AppTest

    for params in ({}, {"id": str(incident.id)}):
        at = AppTest.from_file(APP, default_timeout=60)
        for key, value in params.items():
            at.query_params[key] = value
        at.switch_page(INCIDENTS_PAGE).run()
        assert not at.exception, [e.value for e in at.exception]
        sources = [m.value for m in at.markdown] + [t.value for t in at.title]
        sources += [c.value for c in at.caption]
        assert not any(bad in s for s in sources for bad in ("<b>", "<script>", "](", "<i>")), (
            sources
        )
    assert at.title[0].value.startswith(f"#{incident.id} · \\<b\\>boom")


def _verdict_of_a_drill() -> None:
    from dataclasses import replace

    from alerts.triage import triage
    from console.incidents.sections import verdict
    from tests.alerts import triage_cases as tc

    changes = tuple(
        tc.change(f"replica-{i}", knob, lead_seconds=10.0 - 0.1 * i)
        for i in range(3)
        for knob in ("step_delay_seconds", "max_num_seqs")
    )
    verdict(triage(replace(tc.overload(), changes=changes)))


def test_the_verdict_groups_a_drills_knob_changes_into_one_line():
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_function(_verdict_of_a_drill).run(timeout=30)
    assert not at.exception
    (shown,) = [s.value.replace("\\", "") for s in at.success]
    changes = [line for line in shown.split("  \n") if line.startswith("Recent change")]
    assert changes == [
        "Recent change: max_num_seqs, step_delay_seconds changed on replica-0, -1, -2 at "
        "08:09:50 UTC (score 0.00)."
    ]
