"""The incident page's clients-against-engines section (console/incidents/sections.py
``client_gap``) over a real SQLite store holding the scrapes of ``test_incident_client_gap``:
the table when a gateway's client timings are stored, nothing when none are."""

from __future__ import annotations

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from tests.console.test_incident_client_gap import T0, T1, T2, Fleet

URL_ENV = "TAILWATCH_TEST_CLIENT_GAP_URL"


def page() -> None:
    import os
    from types import SimpleNamespace

    from alerts.triage import TimeWindow
    from console.incidents import sections

    detail = SimpleNamespace(window=TimeWindow(1600.0, 1900.0), baseline=TimeWindow(1000.0, 1600.0))
    sections.client_gap(os.environ["TAILWATCH_TEST_CLIENT_GAP_URL"], detail)


def _store(tmp_path_factory, name: str, *, gateway: bool) -> str:
    from collectors.store import Store, sqlite_url

    url = sqlite_url(tmp_path_factory.mktemp(name) / "tw.db")
    store, fleet = Store(url), Fleet()
    try:
        for at, delay in ((T0, 0.02), (T1, 0.02), (T2, 0.3)):
            fleet.serve(50, 0.03, delay, gateway=gateway)
            store.write_scrapes(fleet.scrapes(at, gateway=gateway))
    finally:
        store.close()
    return url


@pytest.fixture(scope="module")
def with_gateway(tmp_path_factory) -> str:
    return _store(tmp_path_factory, "gap", gateway=True)


@pytest.fixture(scope="module")
def without_gateway(tmp_path_factory) -> str:
    return _store(tmp_path_factory, "nogap", gateway=False)


def run(url: str, monkeypatch) -> AppTest:
    monkeypatch.setenv(URL_ENV, url)
    st.cache_data.clear()
    at = AppTest.from_function(page, default_timeout=60).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_stored_client_timings_show_the_clients_the_engines_and_the_gap(with_gateway, monkeypatch):
    at = run(with_gateway, monkeypatch)
    (frame,) = [d.value for d in at.dataframe]
    assert list(frame["first token seen by"]) == ["clients (gateway)", "engines", "gap"]
    assert frame["change (ms)"].iloc[2] > 200
    assert [s.value for s in at.subheader] == ["Clients against engines"]


def test_no_client_timings_show_no_section(without_gateway, monkeypatch):
    at = run(without_gateway, monkeypatch)
    assert not at.dataframe and not at.subheader
