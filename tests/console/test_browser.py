"""The console in a real browser: ``streamlit run`` on a free loopback port over the seeded
store, driven by Playwright through Debian's chromium. Every page must finish its script run
(``data-test-script-state="notRunning"``), draw its charts and show no exception; a
screenshot of each is kept under ``.tailwatch/screenshots/`` (a CI artifact). A tenant whose
name is HTML and script is shown as text.

Skips locally without chromium or playwright; fails under ``TAILWATCH_REQUIRE_SERVICES=1``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

import httpx
import pytest

from alerts.sql import alert_state_of
from tests.console.seeded_store import HOSTILE_TENANT, Seeded
from tests.services import free_port, missing_service, stop_process

CHROMIUM_ENV = "TAILWATCH_CHROMIUM_BIN"
SCREENSHOTS = Path(__file__).resolve().parents[2] / ".tailwatch" / "screenshots"
START_TIMEOUT_SECONDS = 90
RUN_TIMEOUT_MS = 90_000
#: (name, URL path and query, charts the page must draw at least)
PAGES = [
    ("overview", "/", 8),
    ("incidents", "/incidents", 0),
    ("traces", "/traces", 0),
    ("slos", "/slos", 2),
    ("cost", "/cost", 2),
    ("capacity", "/capacity", 0),
]


def chromium_binary() -> str:
    path = os.environ.get(CHROMIUM_ENV) or shutil.which("chromium") or "/usr/bin/chromium"
    if not os.access(path, os.X_OK):
        missing_service(
            f"no chromium: install Debian's chromium (as .ci/run does) or set {CHROMIUM_ENV}"
        )
    return path


@contextlib.contextmanager
def console_server(seeded: Seeded) -> Iterator[str]:
    from console.launch import console_environment, streamlit_command

    port = free_port()
    env = console_environment(os.environ, seeded.url, str(seeded.config), 0.0)
    process = subprocess.Popen(
        streamlit_command("127.0.0.1", port),
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + START_TIMEOUT_SECONDS
    try:
        while True:
            if process.poll() is not None:
                pytest.fail(f"streamlit exited: {process.stderr.read().decode()[-2000:]}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{url}/_stcore/health", timeout=2).text == "ok":
                    break
            assert time.monotonic() < deadline, "the console did not become healthy"
            time.sleep(0.3)
        yield url
    finally:
        stop_process(process)


@pytest.fixture(scope="module")
def browser_page(seeded: Seeded):
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing_service("playwright is not installed (pip install playwright)")
    executable = chromium_binary()
    with console_server(seeded) as url, sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=executable, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1600, "height": 1000})
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        yield url, page, dialogs
        browser.close()


def open_page(page, address: str) -> None:
    """Go to ``address`` and wait until Streamlit has connected and finished the run."""
    page.goto(address)
    app = '[data-testid="stApp"]'
    page.locator(f'{app}[data-test-connection-state="CONNECTED"]').wait_for(
        state="attached", timeout=RUN_TIMEOUT_MS
    )
    # NOTE: "notRunning" is also the state before the first run; the page title (set by
    # each page's st.title) appearing first tells the two apart.
    page.locator('[data-testid="stHeading"]').first.wait_for(timeout=RUN_TIMEOUT_MS)
    page.locator(f'{app}[data-test-script-state="notRunning"]').wait_for(
        state="attached", timeout=RUN_TIMEOUT_MS
    )
    page.wait_for_timeout(400)  # charts render after the run finishes


def screenshot(page, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    # NOTE: the app scrolls inside stMain, so a full-page shot is the viewport only: grow the
    # viewport to the content's height first, then restore it.
    size = page.viewport_size
    height = page.evaluate("document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    page.set_viewport_size({"width": size["width"], "height": min(max(height, 600), 6000)})
    page.wait_for_timeout(600)
    page.screenshot(path=str(path))
    page.set_viewport_size(size)
    return path


@pytest.mark.timeout(300)
@pytest.mark.parametrize(("name", "path", "min_charts"), PAGES, ids=[p[0] for p in PAGES])
def test_every_page_renders_without_exception(browser_page, name, path, min_charts):
    url, page, _ = browser_page
    open_page(page, f"{url}{path}{'&' if '?' in path else '?'}range=15m")
    assert page.get_by_test_id("stException").count() == 0, page.get_by_test_id(
        "stException"
    ).first.inner_text()
    charts = page.locator('[data-testid="stVegaLiteChart"]')
    if min_charts:
        # NOTE: on a busy machine a page's charts attach after its run has finished: wait
        # for the last one expected (a timeout here is the failure, with its own message)
        charts.nth(min_charts - 1).wait_for(state="attached", timeout=RUN_TIMEOUT_MS)
    assert charts.count() >= min_charts
    if min_charts:
        charts.first.locator("canvas, svg").first.wait_for(timeout=RUN_TIMEOUT_MS)
    assert screenshot(page, name).stat().st_size > 10_000


@pytest.mark.timeout(300)
def test_incident_and_trace_links_render(browser_page, seeded):
    url, page, _ = browser_page
    open_page(page, f"{url}/incidents?{urlencode({'range': '15m', 'id': seeded.incident_id})}")
    assert page.get_by_test_id("stException").count() == 0
    assert page.get_by_text("tail-latency-incident").count() > 0
    page.locator('[data-testid="stVegaLiteChart"]').first.locator("canvas, svg").first.wait_for(
        timeout=RUN_TIMEOUT_MS
    )
    assert page.get_by_role("link", name="trace").count() > 0  # slowest requests → Traces
    screenshot(page, "incident-detail")
    from collectors.store import Store

    store = Store(seeded.url, migrate=False)
    try:
        record = max(store.requests(0, time.time()), key=lambda r: r.e2e_seconds or 0)
    finally:
        store.close()
    open_page(page, f"{url}/traces?range=15m&trace={record.trace_id}")
    assert page.get_by_test_id("stException").count() == 0
    page.locator('[data-testid="stVegaLiteChart"]').first.locator("canvas, svg").first.wait_for(
        timeout=RUN_TIMEOUT_MS
    )
    screenshot(page, "trace-waterfall")


@pytest.mark.timeout(300)
def test_the_knob_lab_draws_the_knee_chart_and_the_headroom(browser_page, seeded):
    url, page, _ = browser_page
    open_page(page, f"{url}/knob_lab?range=15m&until={seeded.until:.0f}")
    assert page.get_by_test_id("stException").count() == 0
    main = page.get_by_test_id("stMain")
    for title in ("goodput (req/s)", "TTFT p95 (ms)", "ITL p95 (ms)"):
        assert main.get_by_text(f"{title} against rate").count() == 1, title
    knee_panel = page.locator('[data-testid="stVegaLiteChart"]').nth(4)
    knee_panel.locator("canvas, svg").first.wait_for(timeout=RUN_TIMEOUT_MS)
    headroom = page.get_by_test_id("stMetric").filter(has_text="Headroom")
    assert "% of the knee" in headroom.inner_text()
    screenshot(page, "knob-lab-headroom")


@pytest.mark.timeout(300)
def test_a_hostile_tenant_label_is_text(browser_page):
    url, page, dialogs = browser_page
    open_page(page, f"{url}/traces?range=15m&tenant={quote(HOSTILE_TENANT)}")
    assert page.get_by_test_id("stException").count() == 0
    sidebar = page.get_by_test_id("stSidebar")
    assert HOSTILE_TENANT in sidebar.inner_text()  # the chosen tenant, as typed
    assert page.locator("b", has_text="bold").count() == 0
    assert page.locator("script", has_text="alert").count() == 0
    assert dialogs == []
    screenshot(page, "hostile-tenant")


@pytest.mark.timeout(300)
def test_a_failing_rule_is_seen_on_incidents_and_overview(browser_page, seeded, tmp_path):
    """A store whose last evaluation had a rule fail: both pages say so, before anything.
    A second console over that store, driven by the same browser page."""
    from dataclasses import replace

    from alerts import EvaluationError
    from collectors.store import Store, sqlite_url

    url = sqlite_url(tmp_path / "failing.db")
    store = Store(url)
    at = time.time() - 30
    error = EvaluationError(
        "tail-latency-ttft", at, "LayoutChangeError", "a series' bucket layout changed: r0"
    )
    alert_state_of(store).save_evaluation([], [], [error], at_seconds=at)
    store.close()
    _, page, _ = browser_page
    with console_server(replace(seeded, url=url)) as base:
        for path, name in (
            ("/incidents", "incidents-rule-failing"),
            ("/", "overview-rule-failing"),
        ):
            open_page(page, f"{base}{path}?range=15m")
            assert page.get_by_test_id("stException").count() == 0
            alert = page.get_by_test_id("stAlertContentWarning").first
            assert "1 alert rule(s) failing" in alert.inner_text()
            assert "tail-latency-ttft" in alert.inner_text()
            screenshot(page, name)
