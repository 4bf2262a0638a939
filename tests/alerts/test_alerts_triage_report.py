"""The terminal report, rendered to text: every section, the numbers, no markup surprises."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
from rich.console import Group

from alerts.triage import (
    TriageInput,
    format_seconds,
    render_text,
    triage,
    triage_renderable,
)
from tests.alerts import triage_cases as tc


def test_the_report_shows_evidence_hypotheses_requests_and_the_action() -> None:
    text = render_text(triage(tc.slow_replica()), width=140)
    assert text.startswith("Triage verdict: slow-replica")
    for title in ("Evidence: incident window", "Hypotheses, most likely first", "Slowest requests"):
        assert title in text
    skew = next(line for line in text.splitlines() if "e2e p50, replica / median" in line)
    assert re.search(r"│ r1\s+│ 10\.90×\s+│ 0\.98×\s+│ ×11\.12\s+│ request records", skew)
    first = next(line for line in text.splitlines() if line.startswith("│ 1 "))
    assert "slow-replica" in first and "1.00" in first and "[r1] value 10.2" in first
    assert "a" * 32 in text  # the full trace id, never cut
    assert "exemplars, request records" in text
    assert (
        "Recommendation (slow-replica): drain the slow replica on r1 [lower active_replicas]"
        in text
    )


def test_unknown_values_read_not_enough_data_never_nan() -> None:
    text = render_text(triage(TriageInput(tc.INCIDENT, tc.BASELINE)))
    assert "nan" not in text.lower().replace("nanos", "").replace("tenant", "")
    assert "not enough data" in text
    assert "Recommendation: none (not enough data in the incident window" in text
    assert "Slowest requests: none linked" in text


def test_a_clean_run_says_no_cause_stands_out() -> None:
    text = render_text(triage(tc.clean()))
    assert "Triage verdict: no cause stands out" in text
    assert "every hypothesis scores below the floor" in text


def test_label_values_are_printed_literally_not_as_markup() -> None:
    data = replace(tc.kv_pressure(), changes=(tc.change("[bold]r0[/bold]", "[red]x[/red]"),))
    text = render_text(triage(data), width=160)
    assert "[bold]r0[/bold]" in text and "[red]x[/red]" in text


@pytest.mark.parametrize(("x", "text"), [(0.0705, "70.5 ms"), (1.2, "1.20 s"), (float("nan"), "—")])
def test_seconds_are_formatted_in_their_unit(x: float, text: str) -> None:
    assert format_seconds(x) == text


def test_the_renderable_is_a_rich_group() -> None:
    assert isinstance(triage_renderable(triage(tc.overload())), Group)


def test_the_docs_example_is_the_rendering_of_its_test_input() -> None:
    docs = (Path(__file__).parents[2] / "docs" / "alerts.md").read_text(encoding="utf-8")
    block = docs.split("<!-- triage-example:start -->\n```text\n")[1].split("\n```\n")[0]
    rendered = render_text(triage(tc.slow_replica()), width=110)
    assert block == "\n".join(line.rstrip() for line in rendered.splitlines())


def test_change_times_are_shown_in_utc_never_as_unix_seconds() -> None:
    event = tc.change("r0", "max_num_seqs", "32", "64")
    data = replace(tc.kv_pressure(), changes=(event,))
    report = triage(data)
    (row,) = [r for r in report.evidence if r.what.startswith("change")]
    assert row.note == "first seen at 08:09:30 UTC"
    text = render_text(report, width=200)
    assert f"{event.at_seconds:.0f}" not in text
    assert "08:09:30 UTC" in text
