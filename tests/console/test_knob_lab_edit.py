"""A live knob edit from the knob lab page against a real bundled replica (in this process,
``loadgen.replicas``): a wrong admin token refused, the knobs read with the right one, the
headroom taken from the sweep line of the current value, a bad value refused with the
engine's message naming the knob, and a good edit applied — then, once the collector has
scraped the replica, the change is a stored event: a rule mark on the latency chart and the
knee stale."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from console.page_kit import KNOB_LAB_PAGE, rate
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV
from tests.console.lab_seed import KNOB, seed_store

APP = str(Path(__file__).resolve().parents[2] / "console" / "streamlit_app.py")
TOKEN = "lab-admin-token"
ENGINE = {"model": "tiny", "max_model_len": 256, "num_gpu_blocks": 64, KNOB: 512}


@pytest.fixture(scope="module")
def replica():
    from loadgen.replicas import bundled_replicas

    with bundled_replicas(1, ENGINE, admin_token=TOKEN) as (url,):
        yield url


@pytest.fixture(autouse=True)
def _env(monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv(LIVE_ENV, "0")
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def plain(text: str) -> str:
    return text.replace("\\", "")


def open_page(until: float) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["range"] = "15m"
    at.query_params["until"] = f"{until:.0f}"
    at.switch_page(KNOB_LAB_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def edit(at: AppTest, value: str) -> AppTest:
    at.selectbox(key="lab_edit_knob").set_value(KNOB)
    at.text_input(key="lab_edit_value").input(value)
    at.button[0].click().run()  # the form's Apply
    assert not at.exception, [e.value for e in at.exception]
    return at


def test_an_edit_is_applied_and_becomes_a_stored_event(replica, tmp_path, monkeypatch):
    from collectors.changes import ChangeDetector
    from collectors.collector import Collector
    from collectors.scrape import Scraper, Target
    from collectors.store import Store

    target = urlsplit(replica).netloc
    seeded = seed_store(
        tmp_path, target=target, knob_change=False, sweep_knobs={"model": "tiny"},
        scrapes_after_sweep=False,
    )  # fmt: skip
    monkeypatch.setenv("TAILWATCH_DB_URL", seeded.url)
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    at = open_page(seeded.until)
    at.text_input(key="lab_token").input("not-the-token").run()
    errors = [plain(e.value) for e in at.error]
    assert any("answered 403: the admin token is not valid" in e for e in errors), errors
    assert "not-the-token" not in " ".join(errors) + " ".join(at.query_params.values())
    at.text_input(key="lab_token").input(TOKEN).run()
    knobs = at.dataframe[0].value
    assert dict(zip(knobs["knob"], knobs["value"], strict=True))[KNOB] == "512"
    # the engine runs 512: the finished sweep's 512 line, whose knee is 10 req/s
    assert [m.value for m in at.metric if m.label == "Knee"] == [rate(10.0, " req/s")]
    assert any("matches the current knobs" in c.value for c in at.caption)

    edit(at, "0")
    errors = [plain(e.value) for e in at.error]
    assert any("Not changed" in e and "answered 400" in e and f"{KNOB}=0" in e for e in errors)
    edit(at, "4096")
    assert any(f"{KNOB} 512 → 4096" in plain(s.value) for s in at.success), at.success
    store = Store(seeded.url)  # the collector's next scrape stores the change

    async def scrape_once():
        async with Scraper(timeout_seconds=10) as scraper:
            # NOTE: the change detector after the round, as `tailwatch collect` runs it
            detect = ChangeDetector(store, store, store).detect
            targets = [Target(target, f"{replica}/metrics")]
            await Collector(targets, store, scraper, watchers=[detect]).run_once()

    try:
        asyncio.run(scrape_once())
    finally:
        store.close()
    st.cache_data.clear()
    monkeypatch.setenv(ADMIN_TOKEN_ENV, TOKEN)  # the console's own token this time
    at = open_page(time.time() + 30)
    stale = [plain(w.value) for w in at.warning if w.value.startswith("The knee is stale")]
    assert len(stale) == 1 and f"{KNOB} changed at" in stale[0], [w.value for w in at.warning]
    # now 4096: that line's knee, 20 req/s
    assert [m.value for m in at.metric if m.label == "Knee"] == [rate(20.0, " req/s")]
    changes = next(d.value for d in at.dataframe if "first seen" in d.value.columns)
    assert list(zip(changes["target"], changes["knob"], strict=True)) == [(target, KNOB)]
    # each latency chart: the p95 band and line, and the rule layer of the annotations
    for chart in at.get("vega_lite_chart")[:2]:
        layers = json.loads(chart.proto.spec)["layer"]
        assert len(layers) == 3 and layers[2]["mark"]["type"] == "rule", layers
