"""Fixtures for the load generator tests: the bundled engine on loopback, one torch thread.

All traffic goes to 127.0.0.1 and every run is bounded (seconds, tens of requests).
"""

from __future__ import annotations

import os

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

ADMIN_TOKEN = "loadgen-test-token"
ENGINE = {"model": "tiny", "max_model_len": 256, "num_gpu_blocks": 128}


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # NOTE: tiny models on shared CI cores: a second thread only adds contention.
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


@pytest.fixture(scope="module")
def traced_server():
    """One bundled replica with the admin API and an in-memory span exporter:
    yields (base URL, exporter)."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from engine.tracing import RequestTracer, TracingConfig, build_tracer_provider
    from loadgen.replicas import bundled_replicas

    exporter = InMemorySpanExporter()
    provider = build_tracer_provider(TracingConfig(sampling_ratio=1.0), exporter)
    tracer = RequestTracer(provider, "tiny")
    with bundled_replicas(1, ENGINE, admin_token=ADMIN_TOKEN, tracers=[tracer]) as urls:
        yield urls[0], exporter
