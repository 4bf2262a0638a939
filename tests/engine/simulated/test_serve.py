"""``tailwatch engine serve --model sim:...``: a completion on loopback, labelled simulated."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families
from typer.testing import CliRunner

from tailwatch.cli import app
from tests.engine.server.conftest import wait_until

SIM_MODEL = "sim:llama-3.1-8b@h100"
SERVING_LINE = re.compile(r"serving 'sim:llama-3\.1-8b@h100' on (http://127\.0\.0\.1:\d+)")


def test_serve_answers_a_completion_and_labels_itself_simulated():
    command = [sys.executable, "-m", "tailwatch.cli", "engine", "serve", "--port", "0"]
    command += ["--model", SIM_MODEL, "--max-model-len", "1024", "--no-access-log"]
    command += ["--tensor-parallel-size", "2"]  # NOTE: the info gauge says so
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=env)
    lines: list[str] = []

    def read() -> None:
        assert process.stderr is not None
        lines.extend(process.stderr)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()

    def serving_url():
        if process.poll() is not None:
            raise AssertionError(f"serve exited early: {''.join(lines)}")
        return next((m for line in list(lines) if (m := SERVING_LINE.search(line))), None)

    try:
        base_url = wait_until(serving_url, timeout_seconds=60, what="the serving line").group(1)
        wait_until(
            lambda: httpx.get(f"{base_url}/ready", timeout=5).status_code == 200,
            timeout_seconds=60,
            what="/ready",
        )
        response = httpx.post(
            f"{base_url}/v1/completions",
            json={"model": SIM_MODEL, "prompt": "Hello", "max_tokens": 12},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        body = response.json()
        assert body["model"] == SIM_MODEL
        assert body["usage"]["completion_tokens"] == 12
        assert body["choices"][0]["finish_reason"] == "length"
        assert len(body["choices"][0]["text"]) == 12  # printable bytes, one per token
        text = httpx.get(f"{base_url}/metrics", timeout=10).text
        info = [
            s.labels
            for family in text_string_to_metric_families(text)
            for s in family.samples
            if s.name == "tailwatch:engine_simulation_info"
        ]
        assert info == [
            {
                "model_name": SIM_MODEL,
                "engine": "0",
                "gpu": "h100",
                "simulated": "true",
                "tensor_parallel_size": "2",
            }
        ]
    finally:
        process.kill()
        process.wait(timeout=30)
        reader.join(timeout=10)


@pytest.mark.parametrize(
    ("model", "message"),
    [
        ("sim:gpt-5@h100", "unknown simulated model 'gpt-5'"),
        ("sim:llama-3.1-8b@tpu", "unknown GPU 'tpu'"),
        ("sim:llama-3.1-70b@h100", "does not fit one NVIDIA H100"),
    ],
)
def test_a_bad_sim_model_is_one_clear_line_and_exit_2(model, message):
    result = CliRunner().invoke(
        app, ["engine", "serve", "--port", "0", "--model", model], env={"COLUMNS": "500"}
    )
    assert result.exit_code == 2, result.output
    assert message in result.output, result.output
    assert result.output.strip().count("\n") == 0, result.output
    assert "Traceback" not in result.output
