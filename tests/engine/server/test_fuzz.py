"""Fuzzing the /v1 routes from the app's own OpenAPI schema: no input is a server error.

Bounded: a fixed number of examples per route (valid and invalid ones, derandomized),
a short context so any valid request finishes in well under a second, loopback only.
"""

from __future__ import annotations

import json

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis.generation.modes import GenerationMode

from engine.config import EngineConfig
from engine.server.launch import ServeOptions
from tests.engine.server.conftest import live_server

NUM_EXAMPLES = 40
# a context short enough that the longest valid generation is a few dozen steps
FUZZ_MAX_MODEL_LEN = 48


@pytest.fixture(scope="module")
def server():
    config = EngineConfig(model="tiny", max_model_len=FUZZ_MAX_MODEL_LEN, num_gpu_blocks=64)
    with live_server(config, ServeOptions(max_waiting_requests=64)) as live:
        yield live


@pytest.mark.parametrize(
    ("method", "path"),
    [("POST", "/v1/chat/completions"), ("POST", "/v1/completions"), ("GET", "/v1/models")],
)
def test_no_input_makes_a_server_error(server, method, path):
    schema = schemathesis.openapi.from_url(f"{server.base_url}/openapi.json")
    operation = schema[path][method]
    cases = st.one_of(
        operation.as_strategy(GenerationMode.POSITIVE),
        operation.as_strategy(GenerationMode.NEGATIVE),
    )
    statuses: set[int] = set()

    @settings(
        max_examples=NUM_EXAMPLES,
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(case=cases)
    def check(case) -> None:
        with requests.Session() as session:
            response = case.call(base_url=server.base_url, session=session, timeout=60)
        statuses.add(response.status_code)
        assert response.status_code < 500, (case.as_curl_command(), response.text)
        if response.status_code >= 400:
            assert set(json.loads(response.text)["error"]) == {"message", "type", "param", "code"}

    check()
    # the fuzzing reached both outcomes, not just one kind of rejection
    assert 200 in statuses
    assert method == "GET" or 400 in statuses
