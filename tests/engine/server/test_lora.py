"""Multi-LoRA through the OpenAI API: adapters selected by ``model``, listed by
``/v1/models``, loaded and unloaded at run time (token-protected), and on ``/metrics``."""

from __future__ import annotations

import json
import time

import httpx
import openai
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from engine.server.launch import ServeOptions, build_engine_server
from engine.tracing import RequestTracer, TracingConfig, build_tracer_provider
from tests.engine.lora.peft_dirs import write_peft_dir
from tests.engine.server.conftest import ADMIN_TOKEN, live_server, tiny_config

# NOTE: the bodies are sent as bytes (json.dumps keeps a lone surrogate as its escape)
JSON = {"Content-Type": "application/json"}
ADAPTERS = ("alpha=random:rank=8,seed=1", "beta=random:rank=16,seed=2,targets=o_proj+up_proj")


SPANS = InMemorySpanExporter()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    peft = write_peft_dir(tmp_path_factory.mktemp("adapters") / "sql", seed=5)
    options = ServeOptions(admin_token=ADMIN_TOKEN, lora_modules=(*ADAPTERS, f"sql={peft}"))
    config = tiny_config(enable_lora=True, max_loras=2, max_cpu_loras=3)
    tracer = RequestTracer(build_tracer_provider(TracingConfig(), SPANS), "tiny")
    with live_server(config, options, tracer=tracer) as live:
        yield live


def _token_logprobs(client: openai.OpenAI, model: str) -> list[float]:
    reply = client.completions.create(
        model=model, prompt="SELECT * FROM", max_tokens=6, temperature=0, logprobs=1
    )
    assert reply.model == model  # vLLM answers with the adapter's name
    return reply.choices[0].logprobs.token_logprobs


def test_models_lists_the_base_then_each_adapter_with_its_parent(server):
    with server.client() as client:
        models = {m.id: m for m in client.models.list().data}
    assert list(models) == ["tiny", "alpha", "beta", "sql"]
    assert models["tiny"].parent is None
    assert {models[n].parent for n in ("alpha", "beta", "sql")} == {"tiny"}
    assert models["alpha"].root == "random:rank=8,seed=1"
    assert models["sql"].root.endswith("/sql")


def test_the_model_field_selects_the_adapter(server):
    with server.client() as client:
        base = _token_logprobs(client, "tiny")
        runs = {name: _token_logprobs(client, name) for name in ("alpha", "beta", "sql")}
        assert _token_logprobs(client, "alpha") == runs["alpha"]  # deterministic
        chat = client.chat.completions.create(
            model="beta", messages=[{"role": "user", "content": "hi"}], max_tokens=3
        )
        assert chat.model == "beta"
    assert all(run != base for run in runs.values())
    assert len({tuple(run) for run in runs.values()}) == 3
    server.parts.tracer._provider.force_flush()
    named = [s.attributes.get("tailwatch.lora.name") for s in SPANS.get_finished_spans()]
    assert {"alpha", "beta", "sql"} <= set(named) and None in named  # the base: no attribute


def test_an_unknown_model_is_a_404_model_not_found(server):
    with server.client() as client, pytest.raises(openai.NotFoundError) as raised:
        client.completions.create(model="gamma", prompt="x", max_tokens=2)
    error = raised.value.body
    assert error["code"] == "model_not_found" and error["param"] == "model"
    assert "`gamma` does not exist" in error["message"]


def test_metrics_carry_vllms_lora_info_and_per_adapter_series(server):
    with server.client() as client:
        _token_logprobs(client, "alpha")
        _token_logprobs(client, "tiny")
    samples = server.samples()
    (info,) = [(labels, v) for (n, labels), v in samples.items() if n == "vllm:lora_requests_info"]
    labels = dict(info[0])
    assert set(labels) == {"max_lora", "waiting_lora_adapters", "running_lora_adapters"}
    assert labels["max_lora"] == "2"
    assert abs(info[1] - time.time()) < 120  # the value is the time of the update
    assert server.value("tailwatch:lora_requests_total", lora_name="alpha") >= 1
    assert server.value("tailwatch:lora_requests_total", lora_name="") >= 1  # the base model
    assert server.value("tailwatch:lora_loads_total", lora_name="sql") >= 1
    assert server.value("tailwatch:lora_resident_adapters") <= 3
    assert server.value("tailwatch:lora_time_to_first_token_seconds_count", lora_name="alpha") >= 1
    assert server.value("tailwatch:lora_e2e_request_latency_seconds_count", lora_name="alpha") >= 1


def _load(server, **body) -> httpx.Response:
    return server.admin("POST", "/v1/load_lora_adapter", json=body)


def _unload(server, name: str) -> httpx.Response:
    return server.admin("POST", "/v1/unload_lora_adapter", json={"lora_name": name})


def test_an_adapter_loaded_at_run_time_serves_until_unloaded(server):
    loaded = _load(server, lora_name="late", lora_path="random:rank=8,seed=9")
    assert loaded.status_code == 200
    assert loaded.text == "Success: LoRA adapter 'late' added successfully."
    with server.client() as client:
        assert "late" in [m.id for m in client.models.list().data]
        assert _token_logprobs(client, "late")
        duplicate = _load(server, lora_name="late", lora_path="random:rank=8,seed=10")
        assert duplicate.status_code == 400 and "already been loaded" in duplicate.text
        in_place = _load(
            server, lora_name="late", lora_path="random:rank=8,seed=10", load_inplace=True
        )
        assert in_place.status_code == 200
        removed = _unload(server, "late")
        assert removed.status_code == 200
        assert removed.text == "Success: LoRA adapter 'late' removed successfully."
        with pytest.raises(openai.NotFoundError):
            client.completions.create(model="late", prompt="x", max_tokens=2)
    assert _unload(server, "late").status_code == 404


@pytest.mark.parametrize(
    ("body", "status", "text"),
    [
        ({"lora_name": "x"}, 400, "Both 'lora_name' and 'lora_path' must be provided."),
        ({"lora_path": "random:rank=8"}, 400, "must be provided"),
        ({"lora_name": "tiny", "lora_path": "random:rank=8"}, 400, "names the base model"),
        ({"lora_name": "x", "lora_path": "/no/such/adapter"}, 404, "no such directory"),
        ({"lora_name": "x", "lora_path": "random:rank=32"}, 400, "above max_lora_rank=16"),
        ({"lora_name": "a,b", "lora_path": "random:rank=8"}, 400, "no comma"),
        (
            {"lora_name": "x", "lora_path": "random:rank=8", "load_inplace": "maybe"},
            400,
            "load_inplace",
        ),
        ({"lora_name": "x", "lora_path": "/" + "y" * 300}, 400, "cannot be read"),
    ],
)
def test_a_bad_load_is_a_4xx_naming_the_problem(server, body, status, text):
    response = _load(server, **body)
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert text in error["message"]
    assert "x" not in [m["id"] for m in server.http().get("/v1/models").json()["data"]]


def test_a_bad_adapter_directory_is_a_400_naming_the_file(server, tmp_path):
    bad = write_peft_dir(tmp_path / "bad", config={"target_modules": ["lm_head"]})
    response = _load(server, lora_name="bad", lora_path=str(bad))
    assert response.status_code == 400
    assert "adapter_config.json: target_modules=['lm_head']" in response.json()["error"]["message"]


@pytest.mark.parametrize(("headers", "status"), [({}, 401), ({"Authorization": "Bearer no"}, 403)])
def test_the_runtime_lora_api_needs_the_admin_token(server, headers, status):
    with server.http(headers=headers) as http:
        load = http.post(
            "/v1/load_lora_adapter", json={"lora_name": "z", "lora_path": "random:rank=8"}
        )
        unload = http.post("/v1/unload_lora_adapter", json={"lora_name": "alpha"})
    assert load.status_code == status and unload.status_code == status
    assert [m["id"] for m in httpx.get(f"{server.base_url}/v1/models").json()["data"]][1] == "alpha"


def test_fuzzed_loads_and_unloads_never_make_a_server_error(server):
    statuses: set[int] = set()

    @settings(max_examples=30, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(
        name=st.one_of(
            st.text("abz-_.", min_size=1, max_size=8),
            st.none(),
            st.text(max_size=140),
            st.sampled_from(["alpha", "tiny", "\udfff", "n" * 129]),
        ),
        path=st.one_of(
            st.sampled_from([1, 8, 16, 17, 512]).map(lambda r: f"random:rank={r}"),
            st.none(),
            st.text(max_size=60),
            st.text(max_size=20).map(lambda t: "random:" + t),
        ),
        inplace=st.one_of(st.booleans(), st.none(), st.integers()),
    )
    def check(name, path, inplace) -> None:
        body = {"lora_name": name, "lora_path": path, "load_inplace": inplace}
        with server.http(headers={"Authorization": f"Bearer {ADMIN_TOKEN}", **JSON}) as http:
            load = http.post("/v1/load_lora_adapter", content=json.dumps(body).encode())
            statuses.add(load.status_code)
            assert load.status_code < 500, (body, load.text)
            if load.status_code >= 400:
                assert set(load.json()["error"]) == {"message", "type", "param", "code"}
            elif name not in ("alpha", "beta", "sql"):
                unload = http.post("/v1/unload_lora_adapter", json={"lora_name": name})
                assert unload.status_code == 200
            unload = http.post(
                "/v1/unload_lora_adapter", content=json.dumps({"lora_name": path}).encode()
            )
            assert unload.status_code in (200, 400, 404), unload.text
            if unload.status_code == 200:  # the fuzzer unloaded a module: serve it again
                assert path in ("alpha", "beta", "sql")
                source = dict(a.split("=", 1) for a in ADAPTERS)
                http.post(
                    "/v1/load_lora_adapter", json={"lora_name": path, "lora_path": source[path]}
                )

    check()
    assert 200 in statuses and 400 in statuses  # both outcomes were reached


@settings(max_examples=20, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))  # fmt: skip
@given(
    model=st.one_of(
        st.sampled_from(["tiny", "alpha", "beta", "sql", "ALPHA", "alpha ", "", "\udfff"]),
        st.text(max_size=300),
        st.none(),
    )
)
def test_any_model_name_selects_a_served_model_or_is_a_404(server, model):
    body = json.dumps({"model": model, "prompt": "x", "max_tokens": 1}).encode()
    with server.http(headers=JSON) as http:
        response = http.post("/v1/completions", content=body)
    if model in (None, "tiny", "alpha", "beta", "sql"):
        assert response.status_code == 200, response.text
        assert response.json()["model"] == (model or "tiny")
    else:
        assert response.status_code in (400, 404), response.text
        assert response.json()["error"]["param"] == "model"


def test_without_an_admin_token_the_runtime_api_is_not_mounted():
    config = tiny_config(enable_lora=True)
    with live_server(config, ServeOptions(lora_modules=ADAPTERS[:1])) as live:
        response = httpx.post(
            f"{live.base_url}/v1/load_lora_adapter",
            json={"lora_name": "z", "lora_path": "random:rank=8"},
        )
        assert response.status_code == 404
        with live.client() as client:
            assert (
                client.completions.create(model="alpha", prompt="x", max_tokens=2).model == "alpha"
            )


@pytest.mark.parametrize(
    ("knobs", "options", "message"),
    [
        ({}, {"lora_modules": ("a=random:rank=8",)}, "needs enable_lora"),
        (
            {"enable_lora": True},
            {"lora_modules": ("a=random:rank=8", "a=random:rank=8")},
            "more than once",
        ),
        (
            {"enable_lora": True},
            {"lora_modules": ("tiny=random:rank=8",)},
            "names the served model",
        ),
        ({"enable_lora": True}, {"lora_modules": ("a=random:rank=99",)}, "above max_lora_rank"),
        ({"enable_lora": True}, {"lora_modules": ("justaname",)}, "write name=path"),
    ],
)
def test_bad_lora_modules_fail_at_start_up(knobs, options, message):
    from engine.errors import ConfigError

    with pytest.raises(ConfigError, match=message):
        build_engine_server(tiny_config(**knobs), ServeOptions(**options))
