"""A scenario run a collector and an evaluator can be attached to: the bundled replicas trace
to a given OTLP endpoint, and the JSON verdict reports the replicas' ports and each phase's
wall-clock boundaries (checked here against a loopback OTLP receiver and the clock)."""

from __future__ import annotations

import itertools
import json
import time
import uuid
from datetime import datetime

import pytest
import yaml
from typer.testing import CliRunner

from collectors.otlp import otlp_app
from collectors.targets_file import read_targets_file
from loadgen.record import read_jsonl
from tailwatch.cli import app
from tests.collectors.test_scrape import serve_app

SHORT = {
    "name": "short",
    "description": "d",
    "teaches": "t",
    "engine": {"model": "tiny", "max_model_len": 256, "num_gpu_blocks": 128},
    "workloads": [{"name": "chat", "rate": 4, "prompt_tokens": 16, "output_tokens": 4}],
    "phases": [
        {"name": "baseline", "duration": 1.5},
        {"name": "perturbation", "duration": 1.5, "change": {"chat": {"rate": 8}}},
        {"name": "recovery", "duration": 1.5, "change": {"chat": {"rate": 4}}},
    ],
    "expects": {"signal": "e2e_p50_ms", "change": "rise", "alert": "queue-growth"},
}


def test_a_traced_run_reports_ports_and_phase_times_and_its_spans_reach_the_receiver(tmp_path):
    scenario = tmp_path / "short.yaml"
    scenario.write_text(yaml.safe_dump(SHORT))
    records = []
    with serve_app(otlp_app(lambda spans: None, on_requests=records.extend)) as receiver:
        endpoint = f"{receiver}/v1/traces"
        before = time.time()
        ran = CliRunner().invoke(
            app,
            ["scenario", "run", str(scenario), "--otlp-endpoint", endpoint,
             "--output", str(tmp_path / "out"), "--targets-file", str(tmp_path / "t.json")],
        )  # fmt: skip
        after = time.time()
    assert ran.exit_code == 0, ran.output
    verdict = json.loads((tmp_path / "out.json").read_text())
    results = list(read_jsonl(tmp_path / "out.jsonl"))

    # the replicas: index, URL and port, also printed
    (replica,) = verdict["replicas"]
    assert replica["index"] == 0 and replica["url"] == f"http://127.0.0.1:{replica['port']}"
    assert f"port {replica['port']}" in ran.output
    assert verdict["otlp_endpoint"] == endpoint
    # and as a file_sd targets file a collector reads (collectors.targets_file)
    (target,) = read_targets_file(tmp_path / "t.json")
    assert target.url == f"{replica['url']}/metrics"
    assert target.name == f"127.0.0.1:{replica['port']}"
    assert dict(target.labels) == {"scenario": "short", "scenario_replica": "0"}

    # phase boundaries: contiguous, in order, inside the run, ISO and epoch forms agree
    times = verdict["phase_times"]
    assert [t["name"] for t in times] == ["baseline", "perturbation", "recovery"]
    assert before <= times[0]["start_epoch_seconds"] == verdict["started_at_epoch_seconds"]
    for phase, following in itertools.pairwise(times):
        assert phase["end_epoch_seconds"] == following["start_epoch_seconds"]
    for t in times:
        assert t["end_epoch_seconds"] - t["start_epoch_seconds"] == pytest.approx(1.5)
        for edge in ("start", "end"):
            parsed = datetime.fromisoformat(t[f"{edge}_utc"]).timestamp()
            assert t[f"{edge}_utc"].endswith("Z")
            assert abs(parsed - t[f"{edge}_epoch_seconds"]) < 1e-3
            assert t[f"{edge}_utc"] in ran.output
    assert times[-1]["end_epoch_seconds"] <= after

    # per-phase request counts add up to the JSONL, which holds every request
    counts = verdict["requests"]
    assert sum(c["num_scheduled"] for c in counts.values()) == len(results) > 0
    assert all(c["num_succeeded"] == c["num_scheduled"] for c in counts.values()), counts

    # tracing reached the receiver: one request record per served request (the replicas
    # flush their spans when they stop, before the command returns)
    assert sorted(r.request_id for r in records) == sorted(r.response_id for r in results)
    # and every record lies inside the run, and names the replica's engine by its instance id
    for record in records:
        assert times[0]["start_epoch_seconds"] <= record.arrival <= after
        assert record.replica == replica["instance_id"]
    assert str(uuid.UUID(replica["instance_id"])) == replica["instance_id"]


def test_otlp_endpoint_is_for_bundled_replicas_only():
    ran = CliRunner().invoke(
        app,
        ["scenario", "run", "overload", "--url", "http://127.0.0.1:9",
         "--otlp-endpoint", "http://127.0.0.1:4318/v1/traces"],
    )  # fmt: skip
    assert ran.exit_code == 2
    assert "--otlp-endpoint: applies to the bundled replicas only" in ran.output


def test_a_bad_otlp_endpoint_is_one_error_line(tmp_path):
    ran = CliRunner().invoke(
        app,
        ["scenario", "run", "overload", "--otlp-endpoint", "127.0.0.1:4318",
         "--output", str(tmp_path / "out")],
    )  # fmt: skip
    assert ran.exit_code == 2
    assert "otlp_endpoint='127.0.0.1:4318'" in ran.output
