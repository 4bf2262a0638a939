"""The runner against the bundled engine on loopback: open loop, agreement with the
server's own counters and traces, target errors and interruption."""

from __future__ import annotations

import asyncio
import json
import statistics

import httpx
import pytest
from typer.testing import CliRunner

from loadgen import (
    Router,
    RunState,
    TargetError,
    build_schedule,
    parse_workload,
    run_schedule,
    summarize,
)
from loadgen.admin import patch_knobs, scrape, total
from tailwatch.cli import app
from tests.engine.server.conftest import wait_until
from tests.loadgen.conftest import ADMIN_TOKEN


def _run(url, raw, **kwargs) -> RunState:
    return asyncio.run(run_schedule([url], build_schedule([parse_workload(raw)]), **kwargs))


def _finished(url: str) -> float:
    async def read() -> float:
        async with httpx.AsyncClient() as client:
            return total(await scrape(client, url), "vllm:request_success_total")

    return asyncio.run(read())


async def _set_delay(url: str, seconds: float) -> None:
    async with httpx.AsyncClient() as client:
        await patch_knobs(client, url, {"step_delay_seconds": seconds}, ADMIN_TOKEN)


def test_send_times_follow_the_schedule_when_the_server_is_slow(traced_server):
    url, _ = traced_server
    asyncio.run(_set_delay(url, 0.25))
    try:
        # 24 arrivals in 2 s against a server that needs > 1 s per request: a closed-loop
        # client would fall behind at once.
        raw = {
            "rate": 12,
            "duration": 2,
            "arrivals": "constant",
            "prompt_tokens": 16,
            "output_tokens": 4,
        }
        state = _run(url, raw)
    finally:
        asyncio.run(_set_delay(url, 0.0))
    results = state.results
    assert len(results) == 24
    assert all(r.succeeded for r in results), [r.error for r in results]
    lags = [r.sent_seconds - r.scheduled_seconds for r in results]
    # the server really was the bottleneck: the last request waited behind the others
    assert max(r.e2e_seconds for r in results) > 1.0
    # Open loop: sends keep to the schedule whatever the server does. A closed-loop client
    # would be late by at least one response time per request in line; here the typical
    # send is on time and none waited as long as even the fastest response. (The worst
    # single send is not held to milliseconds: on a loaded 2-core machine the OS can
    # delay any one wake-up.)
    fastest_response = min(r.e2e_seconds for r in results)
    assert statistics.median(lags) < 0.05, lags
    assert max(lags) < fastest_response, (lags, fastest_response)


def test_client_and_server_agree_on_counts_tokens_and_ttft(traced_server):
    url, exporter = traced_server

    async def counters():
        async with httpx.AsyncClient() as client:
            samples = await scrape(client, url)
        return {
            name: total(samples, name)
            for name in (
                "vllm:request_success_total",
                "vllm:prompt_tokens_total",
                "vllm:generation_tokens_total",
            )
        }

    before = asyncio.run(counters())
    exporter.clear()
    raw = {
        "rate": 10,
        "duration": 2.5,
        "prompt_tokens": {"kind": "uniform", "min": 8, "max": 96},
        "output_tokens": {"kind": "uniform", "min": 1, "max": 24},
        "tenants": {"a": 1, "b": 1},
        "seed": 3,
    }
    state = _run(url, raw, route="/v1/chat/completions")
    after = asyncio.run(counters())
    summary = summarize(state.results, state.duration_seconds)
    assert summary["num_succeeded"] == summary["num_scheduled"] > 10
    delta = {name: after[name] - before[name] for name in after}
    assert delta["vllm:request_success_total"] == summary["num_succeeded"]
    assert delta["vllm:prompt_tokens_total"] == summary["total_prompt_tokens"]
    assert delta["vllm:generation_tokens_total"] == summary["total_output_tokens"]
    # NOTE: the server's TTFT (its span's gen_ai.latency.time_to_first_token) runs from
    # the request's arrival in the engine to the first token; the client's from before
    # the send to the first streamed text. The client's interval contains the server's,
    # so per request client >= server, matched by the response id the span carries.
    wanted = {r.response_id for r in state.results}

    def finished_spans():
        found = {
            span.attributes["gen_ai.response.id"]: span.attributes
            for span in exporter.get_finished_spans()
            if "gen_ai.response.id" in span.attributes
        }
        # a span ends as the engine finishes the request, which may trail the [DONE]
        return found if wanted <= set(found) else None

    spans = wait_until(finished_spans, timeout_seconds=10, what="every request's span")
    for result in state.results:
        server_ttft = spans[result.response_id]["gen_ai.latency.time_to_first_token"]
        assert result.ttft_seconds >= server_ttft, (result.response_id, server_ttft)
        assert len(result.itl_seconds) <= result.output_tokens - 1
        assert result.e2e_seconds >= result.ttft_seconds


def test_the_in_flight_cap_drops_and_counts_arrivals(traced_server):
    url, _ = traced_server
    raw = {
        "rate": 40,
        "duration": 0.5,
        "arrivals": "constant",
        "prompt_tokens": 16,
        "output_tokens": 32,
    }
    state = _run(url, raw, max_in_flight=2)
    summary = summarize(state.results, state.duration_seconds)
    assert summary["num_scheduled"] == 20
    assert summary["num_dropped"] >= 10
    assert summary["num_sent"] + summary["num_dropped"] == 20
    assert summary["slo_attainment"] == summary["num_succeeded"] / 20


def test_an_unreachable_url_and_a_non_openai_server_are_clear_errors(traced_server):
    url, _ = traced_server
    raw = {"rate": 1, "duration": 1}
    with pytest.raises(TargetError, match=r"cannot reach http://127\.0\.0\.1:9 "):
        _run("http://127.0.0.1:9", raw)
    with pytest.raises(TargetError, match="OpenAI-compatible"):
        _run(f"{url}/metrics", raw)


def test_an_interrupted_run_keeps_what_it_measured(traced_server):
    url, _ = traced_server
    state = RunState()

    async def interrupt():
        raw = {"rate": 10, "duration": 30, "prompt_tokens": 16, "output_tokens": 8}
        run = asyncio.create_task(
            run_schedule([url], build_schedule([parse_workload(raw)]), state=state)
        )
        await asyncio.sleep(1.5)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    asyncio.run(interrupt())
    assert state.interrupted
    assert 5 <= len(state.results) < 300
    assert sum(r.succeeded for r in state.results) >= 3
    assert all(r.succeeded or r.error == "interrupted" for r in state.results)


def test_load_run_cli_writes_the_jsonl_and_the_summary(traced_server, tmp_path):
    url, _ = traced_server
    out = tmp_path / "run"
    result = CliRunner().invoke(
        app,
        [
            "load",
            "run",
            "--url",
            f"{url},{url}",
            "--rate",
            "8",
            "--duration",
            "1.5",
            "--prompt-tokens",
            "lognormal:40:0.5:120",
            "--output-tokens",
            "uniform:2:8",
            "--routing",
            "least-outstanding",
            "--slo",
            "ttft=2000",
            "--output",
            str(out),
            "--no-progress",
        ],
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(out.with_suffix(".json").read_text())
    lines = out.with_suffix(".jsonl").read_text().splitlines()
    assert len(lines) == summary["num_scheduled"] == summary["num_succeeded"]
    assert summary["slo_ms"] == {"ttft": 2000.0}
    assert summary["interrupted"] is False
    bad = CliRunner().invoke(
        app, ["load", "run", "--url", url, "--rate", "1", "--prompt-tokens", "uniform:9:3"]
    )
    assert bad.exit_code == 2
    assert "max=3 is below min=9" in bad.output


def test_routing_spreads_requests_over_replicas(traced_server):
    url, _ = traced_server
    urls = [url, url + "/"]  # the same server twice: a stand-in for two replicas
    schedule = build_schedule([parse_workload({"rate": 20, "duration": 0.5, "output_tokens": 2})])
    state = asyncio.run(run_schedule(urls, schedule, router=Router(urls)))
    assert all(r.succeeded for r in state.results)
    assert [r.replica for r in state.results[:2]] == [url, url]


def test_ctrl_c_on_load_run_still_writes_what_was_measured(traced_server, tmp_path):
    import signal
    import subprocess
    import sys

    url, _ = traced_server
    out = tmp_path / "cut"
    before = _finished(url)
    command = [
        sys.executable,
        "-m",
        "tailwatch.cli",
        "load",
        "run",
        "--url",
        url,
        "--rate",
        "5",
        "--duration",
        "60",
        "--output-tokens",
        "8",
        "--output",
        str(out),
        "--no-progress",
    ]
    # NOTE: restore SIGINT's default: a test runner started in the background may pass
    # SIGINT down ignored, and then Ctrl-C would never reach the child.
    child = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    # interrupt once the child has had answers, whatever its start-up took
    wait_until(
        lambda: child.poll() is not None or _finished(url) >= before + 2,
        timeout_seconds=60,
        what="2 answers",
    )
    assert child.poll() is None, child.communicate()[0]
    child.send_signal(signal.SIGINT)
    try:
        output, _ = child.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        child.kill()
        raise AssertionError(f"no exit 60 s after Ctrl-C: {child.communicate()[0]}") from None
    assert child.returncode == 130, output
    summary = json.loads(out.with_suffix(".json").read_text())
    assert summary["interrupted"] is True
    assert 1 <= summary["num_scheduled"] < 60
    assert len(out.with_suffix(".jsonl").read_text().splitlines()) == summary["num_scheduled"]


def test_the_client_s_first_tokens_are_counted_in_its_metrics_family(traced_server):
    """Each first token the client received is one observation of the client family, which
    the collector maps to client_ttft_seconds; its sum is the results' TTFTs."""
    from collectors import canonical as c
    from collectors.dialects import normalise
    from collectors.scrape import parse_exposition
    from loadgen.client_metrics import ClientMetrics

    url, _ = traced_server
    metrics = ClientMetrics()
    raw = {"rate": 8, "duration": 1.5, "prompt_tokens": 16, "output_tokens": 4, "seed": 5}
    state = _run(url, raw, client_metrics=metrics)
    ttfts = [r.ttft_seconds for r in state.results if r.ttft_seconds is not None]
    assert len(ttfts) > 5
    normalised = normalise(parse_exposition(*metrics.render()), target="loadgen")
    (histogram,) = [h for h in normalised.histograms if h.family == c.CLIENT_TTFT_SECONDS]
    assert histogram.count == len(ttfts)
    assert histogram.sum_value == pytest.approx(sum(ttfts))


def test_load_run_s_metrics_port_serves_the_client_family():
    import socket

    from tailwatch.load_cli import serve_client_metrics

    with socket.socket() as probe_socket:
        probe_socket.bind(("127.0.0.1", 0))
        port = probe_socket.getsockname()[1]
    metrics = serve_client_metrics(port)
    metrics.observe_ttft("m", 0.2)
    body = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    assert 'tailwatch:client_time_to_first_token_seconds_count{model_name="m"} 1.0' in body
