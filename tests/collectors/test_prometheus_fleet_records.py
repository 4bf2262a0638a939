"""The console's fleet records (``tailwatch rules export``'s ``tailwatch:fleet_*:rate5m``),
evaluated by a real Prometheus over a vLLM-shaped history (``promtool tsdb
create-blocks-from rules``, as a server evaluating them would hold them): a chart whose every
step the record covers reads it, close to the replicas' own buckets, and anything it cannot
answer is read from the engines' series. The Overview says which it shows."""

from __future__ import annotations

import shutil
import subprocess
import time

import pytest
import streamlit as st
import yaml
from streamlit.testing.v1 import AppTest

from alerts.export.console_records import GROUP, console_records
from alerts.export.names import EngineNames
from bench._fleet_history import MODEL, FleetHistory
from collectors import canonical as c
from collectors.dialect_rules import Dialect
from collectors.prometheus import PrometheusReader
from collectors.prometheus.records import fleet_record_name
from collectors.store import Store, sqlite_url
from console.page_kit import OVERVIEW_PAGE
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV
from tests.collectors.metrics_servers import backfill, prometheus_over
from tests.console.test_pages_prometheus import APP
from tests.services import promtool_binary

END = float((int(time.time()) // 3600 - 3) * 3600)
RECORDED_FROM = END - 6.5 * 3600.0
SELECTOR = {c.LABEL_MODEL: MODEL, c.LABEL_TENANT: ""}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    folder = tmp_path_factory.mktemp("fleet-records")
    history = FleetHistory(3, end=END, hours=7.0)
    tsdb = folder / "tsdb"
    for data in history.write_openmetrics(folder / "openmetrics"):
        backfill(data, tsdb)
    rules = folder / "console.rules.yml"
    recorded = [{"record": r.record, "expr": r.expr} for r in console_records(EngineNames(Dialect.VLLM))]  # fmt: skip
    rules.write_text(yaml.safe_dump({"groups": [{"name": GROUP, "rules": recorded}]}))
    with prometheus_over(tsdb, folder / "raw") as raw:
        made = subprocess.run(
            [promtool_binary(), "tsdb", "create-blocks-from", "rules", f"--url={raw.url}",
             f"--start={RECORDED_FROM:.0f}", f"--end={END:.0f}", "--eval-interval=60s",
             f"--output-dir={folder / 'blocks'}", "--quiet", str(rules)],
            capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert made.returncode == 0, made.stdout + made.stderr
    shutil.copytree(folder / "blocks", tsdb, dirs_exist_ok=True)
    with prometheus_over(tsdb, folder / "recorded") as served:
        yield served


@pytest.mark.parametrize("family", [c.TTFT_SECONDS, c.ITL_SECONDS, c.E2E_SECONDS])
def test_a_chart_the_record_covers_reads_it_close_to_the_buckets(server, family) -> None:
    reader = PrometheusReader(server.url)
    start, step = END - 2700.0, 900.0
    found = reader.recorded_histogram_series(family, SELECTOR, start, END, step)
    assert found is not None
    steps, name = found
    assert name == fleet_record_name(family, "_bucket")
    exact = reader.histogram_series(family, SELECTOR, start, END, step)
    assert [s.t for s in steps] == [s.t for s in exact] == [END - 1800, END - 900, END]
    for got, want in zip(steps, exact, strict=True):
        assert got.histogram is not None and want.histogram is not None
        assert got.histogram.upper_bounds == want.histogram.upper_bounds
        count, wanted = got.histogram.cumulative_counts[-1], want.histogram.cumulative_counts[-1]
        assert wanted > 0 and abs(count - wanted) <= 0.02 * wanted, (got.t, count, wanted)
        for q in (0.5, 0.99):
            a, b = got.histogram.quantile(q).value, want.histogram.quantile(q).value
            assert abs(a - b) <= 0.02 * b, (got.t, q, a, b)


def test_what_the_record_cannot_answer_is_not_read_from_it(server) -> None:
    reader = PrometheusReader(server.url)
    read = reader.recorded_histogram_series
    assert read(c.TTFT_SECONDS, SELECTOR, END - 2700, END, 900) is not None
    assert read(c.TTFT_SECONDS, SELECTOR, RECORDED_FROM - 1800, END, 900) is None, "before it"
    assert read(c.TTFT_SECONDS, SELECTOR, END - 2700, END + 1800, 900) is None, "after it"
    assert read(c.TTFT_SECONDS, {c.LABEL_TARGET: "replica-000:8000"}, END - 2700, END, 900) is None  # fmt: skip
    assert read(c.TTFT_SECONDS, SELECTOR, END - 1800, END, 60) is None, "a step under 5 m"
    assert read(c.KV_CACHE_USAGE, SELECTOR, END - 2700, END, 900) is None, "not recorded"
    assert read(c.TTFT_SECONDS, {c.LABEL_MODEL: "other"}, END - 2700, END, 900) is None
    limited = PrometheusReader(server.url, match='job="vllm"')
    assert limited.recorded_histogram_series(c.TTFT_SECONDS, SELECTOR, END - 2700, END, 900) is None  # fmt: skip


def test_a_long_window_the_record_covers_reads_it_close_to_the_buckets(server) -> None:
    """A window the record holds from its start (an SLO's budget period over a history
    recorded from its first hours) is one read of the record: close to the replicas' own
    buckets, and its first sample within the record's 5-minute rate of the window's start."""
    from collectors.prometheus.recorded import FIRST_SAMPLE_RESOLUTION_SECONDS

    reader = PrometheusReader(server.url)
    start = END - 6 * 3600.0
    found = reader.recorded_histogram_window(c.TTFT_SECONDS, SELECTOR, start, END)
    assert found is not None
    histogram, name, first = found
    assert name == fleet_record_name(c.TTFT_SECONDS, "_bucket")
    assert start <= first <= start + FIRST_SAMPLE_RESOLUTION_SECONDS + 60
    exact = reader.histogram_window(c.TTFT_SECONDS, SELECTOR, start, END)
    assert exact is not None and histogram.upper_bounds == exact.upper_bounds
    count, wanted = histogram.cumulative_counts[-1], exact.cumulative_counts[-1]
    assert wanted > 0 and abs(count - wanted) <= 0.02 * wanted, (count, wanted)
    for q in (0.5, 0.99):
        a, b = histogram.quantile(q).value, exact.quantile(q).value
        assert abs(a - b) <= 0.02 * b, (q, a, b)


def test_a_record_younger_than_the_engines_history_does_not_answer_a_window_over_both(
    server,
) -> None:
    """The engines' series began half an hour before the record: a 30-day window over both
    is theirs (the record would leave that half hour out), as is anything the record
    cannot answer at all."""
    reader = PrometheusReader(server.url)
    read = reader.recorded_histogram_window
    assert read(c.TTFT_SECONDS, SELECTOR, END - 30 * 86400.0, END) is None
    assert read(c.TTFT_SECONDS, SELECTOR, END - 6 * 3600.0, END) is not None
    assert read(c.TTFT_SECONDS, {c.LABEL_TARGET: "replica-000:8000"}, END - 3600, END) is None
    assert read(c.KV_CACHE_USAGE, SELECTOR, END - 3600, END) is None, "not recorded"
    assert read(c.TTFT_SECONDS, SELECTOR, END - 120, END) is None, "under the recorded rate"
    assert read(c.TTFT_SECONDS, SELECTOR, END + 3600, END + 7200) is None, "after it"
    limited = PrometheusReader(server.url, match='job="vllm"')
    assert limited.recorded_histogram_window(c.TTFT_SECONDS, SELECTOR, END - 3600, END) is None


@pytest.mark.parametrize(("range_key", "recorded"), [("6h", True), ("1h", False)])
def test_the_overview_says_where_its_percentiles_come_from(
    server, tmp_path, monkeypatch, range_key, recorded
) -> None:
    """6 h at 5-minute steps reads the records; 1 h at one-minute steps (shorter than the
    recorded rate) reads the replicas' buckets, and the caption says which."""
    db = sqlite_url(tmp_path / "own.db")
    Store(db).close()
    monkeypatch.setenv("TAILWATCH_DB_URL", db)
    monkeypatch.setenv("TAILWATCH_METRICS_URL", server.url)
    monkeypatch.setenv(LIVE_ENV, "0")
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    at = AppTest.from_file(APP, default_timeout=120)
    at.query_params["range"] = range_key
    at.query_params["until"] = f"{END - 300:.0f}"  # NOTE: the range ends on a step
    at.switch_page(OVERVIEW_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    caption = next(c.value for c in at.caption if "step" in c.value)
    record = fleet_record_name(c.TTFT_SECONDS, "_bucket")
    assert (record in caption) is recorded, caption
    assert ("from stored buckets" in caption) is not recorded, caption
    st.cache_data.clear()
    st.cache_resource.clear()
