"""The knob lab page through AppTest on a store seeded directly (``lab_seed``): every section
renders, the knee and headroom figures are the ones computed from the stored rows, the A/B
verdict and the stale-knee warning appear, and the empty states say what to run."""

from __future__ import annotations

from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from collectors import canonical as c
from collectors.store import Store
from console.filters import RANGES, floor_to_step, step_for
from console.knob_lab import ab as lab_ab
from console.knob_lab.ab import EXCEEDS_RUN_TO_RUN, WITHIN_NOISE
from console.page_kit import KNOB_LAB_PAGE, rate
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV
from tests.console.lab_seed import REQUESTS_PER_SECOND, LabSeeded, seed_store

APP = str(Path(__file__).resolve().parents[2] / "console" / "streamlit_app.py")
RANGE = "15m"


@pytest.fixture(autouse=True)
def _console_env(monkeypatch):
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv(LIVE_ENV, "0")
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> LabSeeded:
    return seed_store(tmp_path_factory.mktemp("lab"))


@pytest.fixture(scope="module")
def page(lab) -> AppTest:
    """The page as it first opens on the seeded store (one run shared by the read-only
    tests: each run is seconds on a busy machine)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TAILWATCH_DB_URL", lab.url)
        patch.setenv(LIVE_ENV, "0")
        patch.delenv(CONFIG_ENV, raising=False)
        patch.delenv(ADMIN_TOKEN_ENV, raising=False)
        st.cache_data.clear()
        return run(lab)


def run(seeded: LabSeeded, **state) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["range"] = RANGE
    at.query_params["until"] = f"{seeded.until:.0f}"
    for key, value in state.items():
        at.session_state[key] = value
    at.switch_page(KNOB_LAB_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def frame_with(at: AppTest, column: str):
    """The one table with ``column`` (AppTest does not expose a dataframe's key)."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, (column, [list(d.value.columns) for d in at.dataframe])
    return found[0]


def plain(text: str) -> str:
    """Markdown source without ``page_kit.escape``'s backslashes: the text as rendered."""
    return text.replace("\\", "")


def metric(at: AppTest, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert len(found) == 1, (label, [m.label for m in at.metric])
    return found[0]


def test_every_section_renders(page):
    at = page
    assert at.title[0].value == "Knob lab"
    headers = [h.value for h in at.subheader]
    for title in ("Live knobs", "Latency and knob changes", "Headroom to the knee", "Sweeps",
                  "A/B", "Replays"):  # fmt: skip
        assert title in headers, headers
    # the target at 127.0.0.1:9 refuses connections: the engine's reach is the message
    assert any("cannot reach the engine at http://127.0.0.1:9" in plain(e.value) for e in at.error)
    assert any("Simulated" in cap.value for cap in at.caption)


def test_the_knee_chart_and_table_of_a_finished_sweep(page):
    at = page  # the newest finished sweep is the one shown first
    knees = frame_with(at, "knee req/s")
    assert dict(zip(knees["line"], knees["knee req/s"], strict=True)) == {
        "max_num_batched_tokens=512": "10",
        "max_num_batched_tokens=4096": "20",
    }
    rows = frame_with(at, "repeat")
    assert len(rows) == 2 * 3 * 3
    # 2 latency charts, 3 knee panels
    assert len(at.get("vega_lite_chart")) == 5


def test_headroom_is_the_live_rate_over_the_knee_and_a_later_change_makes_it_stale(lab, page):
    at = page
    end = floor_to_step(lab.until, step_for(RANGES[RANGE]))
    store = Store(lab.url, migrate=False)
    try:
        total = store.counter_window(c.REQUESTS_TOTAL, {"target": lab.target}, end - 900, end)
        readings = store.samples(c.REQUESTS_TOTAL, {"target": lab.target}, end - 1200, end)
    finally:
        store.close()
    times = sorted({t for samples in readings.values() for t, _ in samples})
    assert times[0] > end - 900  # the traffic began inside the window
    live = total / (times[-1] - times[0])
    # NOTE: ten and a half minutes of traffic in the 15 m window: the rate is the traffic's,
    # not the window's average (which would read 2.8 req/s)
    assert live == pytest.approx(REQUESTS_PER_SECOND, rel=0.05)
    assert metric(at, f"Live request rate, last {RANGE}") == rate(live, " req/s")
    # the knobs could not be read: the newest finished sweep, its first line (512: knee 10)
    assert metric(at, "Knee") == rate(10.0, " req/s")
    assert metric(at, "Headroom") == f"at {live / 10.0 * 100:.0f}% of the knee"
    stale = [plain(w.value) for w in at.warning if w.value.startswith("The knee is stale")]
    assert len(stale) == 1 and "max_num_batched_tokens changed at" in stale[0], stale
    assert "re-run the sweep" in stale[0]


def test_no_knob_change_after_the_sweep_is_no_warning(tmp_path, monkeypatch):
    seeded = seed_store(tmp_path, knob_change=False)
    monkeypatch.setenv("TAILWATCH_DB_URL", seeded.url)
    at = run(seeded)
    assert not [w.value for w in at.warning if "stale" in w.value]
    assert metric(at, "Headroom").endswith("% of the knee")


def test_the_ab_of_two_knob_values_exceeds_run_to_run_noise(lab, page):
    at = page  # both sides default to the newest finished sweep's lowest rate
    table = frame_with(at, "interval low")
    itl = table[table["figure"] == "ITL p95 ms"].iloc[0]
    assert itl["verdict"] == EXCEEDS_RUN_TO_RUN and itl["interval low"] > 0
    assert itl["repeats (A, B)"] == "3, 3"
    assert any("exceeds run-to-run noise" in plain(s.value) for s in at.success)


def test_the_same_measurement_on_both_sides_is_within_noise(lab):
    store = Store(lab.url, migrate=False)
    try:
        points = lab_ab.side_points(store.lab_points(lab.sweep_id), 512, 5.0)
        other = lab_ab.side_points(store.lab_points(lab.sweep_id), 4096, 5.0)
    finally:
        store.close()
    frame = lab_ab.ab_frame(lab_ab.Side("A", points), lab_ab.Side("B", points))
    assert set(frame["verdict"]) == {WITHIN_NOISE}
    assert lab_ab.headline(frame) == (WITHIN_NOISE, [])
    # two repeats a side are too few to speak for run-to-run noise
    two = lab_ab.ab_frame(lab_ab.Side("A", points[:2]), lab_ab.Side("B", other[:2]))
    verdicts = dict(zip(two["figure"], two["verdict"], strict=True))
    assert verdicts["ITL p95 ms"] == lab_ab.EXCEEDS_SAMPLING
    assert verdicts["goodput req/s"] == lab_ab.NO_NOISE_ESTIMATE


def test_a_running_sweep_shows_its_progress(page):
    at = page  # the newest sweep, the running one, is shown first
    (bar,) = at.get("progress")
    assert bar.proto.value == 25  # 1 of 4 points
    assert "1 of 4 points measured" in bar.proto.text


def test_replays_compare_with_production_and_name_an_unknown_shape(page):
    at = page
    table = frame_with(at, "replay vs production")
    assert set(table["figure"]) >= {"TTFT p50 ms", "ITL p95 ms", "goodput req/s"}
    goodput = table[table["figure"] == "goodput req/s"].iloc[0]
    assert goodput["production"] == pytest.approx(0.97 * 5.0)
    assert goodput["replay"] == pytest.approx(0.99 * 5.0)
    assert any("point 2 has" in plain(w.value) and "unexpected" in w.value for w in at.warning)
    assert len(table) == 2 * table["figure"].nunique()  # both shapes read, the odd one named
    captions = [plain(cap.value) for cap in at.caption]
    shown = "point 3: speed=1.0, virtual_time=True, timed_at=server, replicas=2, route=as-recorded"
    assert any(shown in c for c in captions)


def test_an_empty_store_says_what_to_run(tmp_path, monkeypatch):
    from collectors.store import sqlite_url

    url = sqlite_url(tmp_path / "empty.db")
    Store(url).close()  # a writer migrates it: the schema, and no data
    monkeypatch.setenv("TAILWATCH_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(KNOB_LAB_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    infos = [i.value for i in at.info]
    assert any("No engine targets" in i and "tailwatch collect" in i for i in infos), infos
    assert any("No sweeps stored" in i and "tailwatch sweep" in i for i in infos), infos
    assert any("No replays stored" in i and "tailwatch replay" in i for i in infos), infos
