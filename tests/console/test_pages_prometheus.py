"""The console's pages on a Prometheus (issue 24): ``tailwatch up --prometheus`` and a config
with a ``prometheus:`` section point the console's metric reads at a server, while the store
keeps only Tailwatch's own records. Each page must run without an exception over a backfilled
Prometheus 2.42 holding a vLLM fleet's history (a planted overload), and the Overview and SLOs
pages must show the server's figures, not the empty store's."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from collectors.store import Store, sqlite_url
from console.page_kit import (
    CAPACITY_PAGE,
    COST_PAGE,
    INCIDENTS_PAGE,
    OVERVIEW_PAGE,
    SLOS_PAGE,
    TRACES_PAGE,
)
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV
from tests.alerts.eval_data import build
from tests.alerts.test_triage_prometheus import HOURS, RECOVER, START, overload
from tests.collectors.metrics_servers import backfilled_prometheus
from tests.collectors.vllm_history import CapturingFake, vllm_points

APP = str(Path(__file__).resolve().parents[2] / "console" / "streamlit_app.py")
PAGES = [OVERVIEW_PAGE, INCIDENTS_PAGE, TRACES_PAGE, SLOS_PAGE, COST_PAGE, CAPACITY_PAGE]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    fake = CapturingFake()
    build(overload, hours=HOURS, start=START, reader=fake)
    points, types = vllm_points(fake.records)
    with backfilled_prometheus(tmp_path_factory.mktemp("console-prometheus"), points, types) as s:
        yield s.url


@pytest.fixture(params=["config", "environment"])
def console_on_server(request, server, tmp_path, monkeypatch):
    """The console's environment as ``tailwatch console --config`` (a ``prometheus:``
    section) or ``tailwatch up --prometheus`` (``TAILWATCH_METRICS_URL``) leave it."""
    db = sqlite_url(tmp_path / "own.db")
    Store(db).close()  # migrated and empty: the store holds no metrics
    section = f"prometheus:\n  url: {server}\n" if request.param == "config" else ""
    config = tmp_path / "tailwatch.yaml"
    config.write_text(
        section + "slos:\n  - name: chat-ttft\n    indicator: {latency: {metric: ttft, "
        "threshold_seconds: 0.25}}\n    target: 0.99\n    period_days: 30\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("TAILWATCH_DB_URL", db)
    monkeypatch.setenv(CONFIG_ENV, str(config))
    monkeypatch.setenv(LIVE_ENV, "0")
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    if request.param == "environment":
        monkeypatch.setenv("TAILWATCH_METRICS_URL", server)
    else:
        monkeypatch.delenv("TAILWATCH_METRICS_URL", raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _run(page: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["range"] = "1h"
    at.query_params["until"] = f"{RECOVER:.0f}"
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


@pytest.mark.parametrize("page", PAGES)
def test_every_page_runs_on_the_server(console_on_server, page: str) -> None:
    _run(page)


def test_overview_and_slos_show_the_servers_figures(console_on_server) -> None:
    """A vLLM fleet read from Prometheus has no request records and no HTTP responses
    counter: goodput is the latency SLO's attainment from the histograms (what the SLOs page
    shows), and the request rate is the engines' finished requests over the hour: 20 minutes
    of the overload's 250 and 40 of 100 requests a 15 s scrape, on 3 replicas, is 30/s."""
    overview = _run(OVERVIEW_PAGE)
    shown = {m.label: m.value for m in overview.metric}
    assert overview.get("vega_lite_chart"), "no chart drawn from the server's series"
    assert shown["TTFT p99"] != "—", shown
    slos = _run(SLOS_PAGE)
    attainment = {m.label: m.value for m in slos.metric}["Attainment, last 1h"]
    assert attainment.endswith("%") and shown["Goodput attainment"] == attainment, shown
    assert shown["Request rate"] == "30.00/s", shown
    assert shown["Error rate (errors)"] == "0.00 %", shown
    assert shown["429 rate"] == "—", shown  # the engines' counters cannot tell


def test_the_slos_page_backtests_the_objective_on_the_server(console_on_server) -> None:
    """The SLO's burn-rate rules over the hour, on demand: the overload burns a 99 % TTFT
    objective of 0.25 s (44 % attained), so its page rule fires."""
    at = _run(SLOS_PAGE)
    at.button(key="backtest-chat-ttft").click().run()
    assert not at.exception, [e.value for e in at.exception]
    shown = [m.value for m in at.markdown if "evaluations" in m.value]
    assert shown and "1 page" in shown[0], [m.value for m in at.markdown]
    (table,) = [d.value for d in at.dataframe if "peak burn rate" in d.value.columns]
    assert "page" in set(table["severity"]), table
    assert all(text.endswith("Z") for text in table["fired"]), table  # ISO times, not Unix
