"""The incident page's breakdown section (console/incidents/sections.py ``breakdowns``) over a
real SQLite store holding the per-tenant and per-adapter series of
``test_incident_breakdowns``: a table by tenant when a tenant cause is worth reading, by
adapter when adapter thrash is, and nothing when neither is."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.console.test_incident_breakdowns import T1, scrapes

URL_ENV = "TAILWATCH_TEST_BREAKDOWN_URL"
CAUSES_ENV = "TAILWATCH_TEST_BREAKDOWN_CAUSES"


def page() -> None:
    import os
    from types import SimpleNamespace

    from alerts import Cause
    from alerts.triage import TimeWindow
    from console.incidents import sections

    causes = [c for c in os.environ["TAILWATCH_TEST_BREAKDOWN_CAUSES"].split(",") if c]
    hypotheses = [SimpleNamespace(cause=Cause(c), score=0.9) for c in causes]
    detail = SimpleNamespace(
        report=SimpleNamespace(hypotheses=hypotheses),
        window=TimeWindow(1600.0, 1900.0),
        baseline=TimeWindow(1000.0, 1600.0),
    )
    sections.breakdowns(os.environ["TAILWATCH_TEST_BREAKDOWN_URL"], detail)


@pytest.fixture(scope="module")
def store_url(tmp_path_factory) -> str:
    from collectors.store import Store, sqlite_url

    url = sqlite_url(tmp_path_factory.mktemp("breakdowns") / "tw.db")
    store = Store(url)
    try:
        store.write_scrapes(scrapes())
        # NOTE: tenants are named by the request records (the metrics list no tenant label)
        from collectors.request_records import RequestRecord

        store.write_requests(
            [
                RequestRecord(
                    f"r{i}",
                    f"{i:032x}",
                    f"{i:016x}",
                    "engine",
                    tenant,
                    "m",
                    None,
                    T1 + 10.0 + i,
                    None,
                    0.1,
                    None,
                    None,
                    None,
                    0.5,
                    10,
                    5,
                    0,
                    0,
                    "stop",
                    False,
                )
                for i, tenant in enumerate(["chat", "batch"])
            ]
        )
    finally:
        store.close()
    return url


def run(url: str, monkeypatch, causes: str) -> AppTest:
    monkeypatch.setenv(URL_ENV, url)
    monkeypatch.setenv(CAUSES_ENV, causes)
    st.cache_data.clear()
    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_a_tenant_cause_shows_the_tenants_the_starved_one_first(store_url, monkeypatch):
    at = run(store_url, monkeypatch, "noisy-tenant")
    (frame,) = [d.value for d in at.dataframe]
    assert list(frame["tenant"]) == ["chat", "batch"]
    assert [s.value for s in at.subheader] == ["By tenant"]


def test_adapter_thrash_shows_the_adapters_and_no_tenant_table(store_url, monkeypatch):
    at = run(store_url, monkeypatch, "adapter-thrash")
    (frame,) = [d.value for d in at.dataframe]
    assert list(frame["adapter"]) == ["legal", "support"] and frame["cold loads"].iloc[0] == 5
    assert [s.value for s in at.subheader] == ["By adapter"]


def test_no_cause_that_points_at_either_shows_no_breakdown(store_url, monkeypatch):
    at = run(store_url, monkeypatch, "kv-exhaustion")
    assert not at.dataframe
