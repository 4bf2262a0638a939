"""Rate sweeps and the knee search: the search logic on a fake probe, then a real knee on
the bundled engine, found by ``tailwatch load sweep``."""

from __future__ import annotations

import asyncio
import csv
import json

import httpx
import pytest
from typer.testing import CliRunner

from loadgen import find_knee
from loadgen.admin import patch_knobs
from tailwatch.cli import app
from tests.loadgen.conftest import ADMIN_TOKEN


def _fake_probe(knee: float, calls: list[float]):
    async def probe(rate: float):
        calls.append(rate)
        attainment = 1.0 if rate <= knee else 0.5
        stats = {"p95": 1.0, "p99": 2.0}
        return {
            "slo_attainment": attainment,
            "request_goodput": rate * attainment,
            "request_throughput": rate,
            "ttft_ms": stats,
            "itl_ms": stats,
        }

    return probe


@pytest.mark.parametrize(
    ("knee", "start", "probes"), [(6.3, 1.0, 8), (6.3, 50.0, 10), (0.3, 1.0, 8), (100.0, 1.0, 5)]
)
def test_the_search_brackets_then_bisects_within_its_probe_budget(knee, start, probes):
    calls: list[float] = []
    result = asyncio.run(find_knee(_fake_probe(knee, calls), start_rate=start, max_probes=probes))
    assert len(calls) <= probes
    assert [row["rate"] for row in result.rows] == sorted(calls)
    if result.first_failing_rate is None:  # never failed within the budget: knee above
        assert result.knee_rate == max(calls) <= knee
        return
    assert result.knee_rate <= knee < result.first_failing_rate
    assert result.first_failing_rate - result.knee_rate <= 0.1 * result.first_failing_rate or (
        len(calls) == probes
    )


def test_knee_search_on_the_bundled_engine(traced_server, tmp_path, monkeypatch):
    url, _ = traced_server

    async def limit(changes):
        async with httpx.AsyncClient() as client:
            await patch_knobs(client, url, changes, ADMIN_TOKEN)

    # A replica made small on purpose: two sequences at a time, 20 ms per step, so
    # capacity is near 8 req/s for 8-token outputs whatever the CI machine's speed.
    asyncio.run(limit({"max_num_seqs": 2, "step_delay_seconds": 0.02}))
    monkeypatch.setenv("TAILWATCH_ADMIN_TOKEN", ADMIN_TOKEN)
    out = tmp_path / "sweep"
    try:
        result = CliRunner().invoke(
            app,
            [
                "load",
                "sweep",
                "--url",
                url,
                "--start-rate",
                "2",
                "--max-probes",
                "5",
                "--duration",
                "2",
                "--prompt-tokens",
                "16",
                "--output-tokens",
                "8",
                "--slo",
                "e2el=1000",
                "--output",
                str(out),
            ],
        )
    finally:
        asyncio.run(limit({"max_num_seqs": 256, "step_delay_seconds": 0.0}))
    assert result.exit_code == 0, result.output
    table = json.loads(out.with_suffix(".json").read_text())
    rows = {row["rate"]: row for row in table["rows"]}
    knee, failing = table["knee_rate"], table["first_failing_rate"]
    assert knee is not None and failing is not None, table
    # NOTE: the start rate may already fail on a loaded machine; the search then goes down
    assert 0 < knee < failing <= 32
    assert rows[knee]["slo_attainment"] >= 0.9 > rows[failing]["slo_attainment"]
    assert table["knobs"][url]["max_num_seqs"] == 2
    with out.with_suffix(".csv").open() as f:
        lines = list(csv.DictReader(f))
    assert [float(line["rate"]) for line in lines] == sorted(rows)
    assert {line["knob.max_num_seqs"] for line in lines} == {"2"}


def test_a_rate_list_sweep_skips_knobs_without_the_admin_token(
    traced_server, tmp_path, monkeypatch
):
    url, _ = traced_server
    monkeypatch.delenv("TAILWATCH_ADMIN_TOKEN", raising=False)
    out = tmp_path / "rates"
    result = CliRunner().invoke(
        app,
        [
            "load",
            "sweep",
            "--url",
            url,
            "--rates",
            "2,4",
            "--duration",
            "1",
            "--prompt-tokens",
            "16",
            "--output-tokens",
            "4",
            "--output",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    table = json.loads(out.with_suffix(".json").read_text())
    assert [row["rate"] for row in table["rows"]] == [2.0, 4.0]
    assert table["knobs"] == {url: None}
    assert all(row["slo_attainment"] == 1.0 for row in table["rows"])
