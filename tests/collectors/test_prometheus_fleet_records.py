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
from collectors.prometheus import PrometheusReader, PrometheusSourceError
from collectors.prometheus.api import answer_points
from collectors.prometheus.records import (
    fleet_counter_record,
    fleet_gauge_record,
    fleet_record_name,
)
from collectors.store import Store, sqlite_url
from console import data, metric_frames
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
    for chunk in history.write_openmetrics(folder / "openmetrics"):
        backfill(chunk, tsdb)
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
    at = _overview(server, tmp_path, monkeypatch, range_key)
    caption = next(c.value for c in at.caption if "step" in c.value)
    record = fleet_record_name(c.TTFT_SECONDS, "_bucket")
    assert (record in caption) is recorded, caption
    assert ("from stored buckets" in caption) is not recorded, caption


def _close(got: float, want: float, within: float = 0.02) -> bool:
    return abs(got - want) <= within * abs(want)


@pytest.mark.parametrize(
    "family",
    [
        c.REQUESTS_TOTAL,
        c.PREEMPTIONS_TOTAL,
        c.PREFIX_CACHE_HITS_TOTAL,
        c.PREFIX_CACHE_QUERIES_TOTAL,
    ],
)
def test_a_counter_the_record_covers_reads_it_close_to_the_engines_increase(server, family) -> None:
    reader = PrometheusReader(server.url)
    start, step = END - 2700.0, 900.0
    found = reader.recorded_counter_series(family, SELECTOR, start, END, step)
    assert found is not None
    steps, name = found
    assert name == fleet_counter_record(family)
    exact = reader.counter_series(family, SELECTOR, start, END, step)
    assert [t for t, _ in steps] == [t for t, _ in exact] == [END - 1800, END - 900, END]
    for (t, got), (_, want) in zip(steps, exact, strict=True):
        assert want is not None and abs(got - want) <= 0.02 * want + 0.5, (t, got, want)
    if family != c.PREEMPTIONS_TOTAL:  # NOTE: no KV exhaustion is planted in these hours
        assert min(v for _, v in exact) > 100, exact


def test_a_counter_split_by_its_kept_label_reads_the_record_per_value(server) -> None:
    """The request counter's record keeps ``finished_reason``: the Overview's counts by
    reason read it per reason, each close to the engines' increase over the window."""
    reader = PrometheusReader(server.url)
    start, step = END - 3600.0, 900.0
    label = c.LABEL_FINISHED_REASON
    by = metric_frames.counter_increase_by(reader, c.REQUESTS_TOTAL, SELECTOR, label, start, END, step)  # fmt: skip
    exact = metric_frames.counter_increase_by(reader, c.REQUESTS_TOTAL, SELECTOR, label, start, END)  # fmt: skip
    assert set(by) == set(exact) and sum(exact.values()) > 0
    for reason, want in exact.items():
        assert _close(by[reason], want, 0.03) or abs(by[reason] - want) <= 1.0, (reason, by, exact)
    frame = metric_frames.counter_rate_frame(
        reader, c.REQUESTS_TOTAL, SELECTOR, start, END, step, split_by=label
    )
    assert frame.attrs[metric_frames.RECORDED] == (fleet_counter_record(c.REQUESTS_TOTAL),)
    assert set(frame["series"]) == set(exact)


@pytest.mark.parametrize(("family", "across"), [(c.REQUESTS_RUNNING, "sum"), (c.REQUESTS_WAITING, "sum")])  # fmt: skip
def test_a_summed_gauge_the_record_covers_reads_it_close_to_the_replicas(server, family, across) -> None:  # fmt: skip
    reader = PrometheusReader(server.url)
    start, step = END - 2700.0, 900.0
    found = reader.recorded_gauge_steps(family, SELECTOR, start, END, step, across)
    assert found is not None and found[1] == fleet_gauge_record(family)
    exact = reader.gauge_steps(family, SELECTOR, start, END, step, across)
    assert [t for t, _ in found[0]] == [t for t, _ in exact] == [END - 1800, END - 900, END]
    for (t, got), (_, want) in zip(found[0], exact, strict=True):
        assert abs(got - want) <= 0.05 * abs(want) + 0.05, (t, got, want)


def test_the_fullest_replica_from_the_record_is_at_least_the_highest_step_mean(server) -> None:
    """KV usage's record is the fullest replica at each evaluation: averaged over a step it is
    at least the highest of the replicas' own step means (what ``gauge_steps`` reads), and
    no more than the highest reading."""
    reader = PrometheusReader(server.url)
    start, step = END - 2700.0, 900.0
    found = reader.recorded_gauge_steps(c.KV_CACHE_USAGE, SELECTOR, start, END, step, "max")
    assert found is not None and found[1] == fleet_gauge_record(c.KV_CACHE_USAGE)
    exact = dict(reader.gauge_steps(c.KV_CACHE_USAGE, SELECTOR, start, END, step, "max"))
    for t, got in found[0]:
        assert exact[t] - 1e-9 <= got <= 1.0, (t, got, exact[t])
    assert reader.recorded_gauge_steps(c.KV_CACHE_USAGE, SELECTOR, start, END, step, "sum") is None


def test_what_a_counter_or_gauge_record_cannot_answer_is_not_read_from_it(server) -> None:
    reader = PrometheusReader(server.url)
    counter, gauge = reader.recorded_counter_series, reader.recorded_gauge_steps
    ok = (END - 2700, END, 900)
    assert counter(c.REQUESTS_TOTAL, SELECTOR, *ok) is not None
    assert counter(c.REQUESTS_TOTAL, SELECTOR, RECORDED_FROM - 1800, END, 900) is None, "before it"
    assert counter(c.REQUESTS_TOTAL, SELECTOR, END - 2700, END + 1800, 900) is None, "after it"
    assert counter(c.REQUESTS_TOTAL, {c.LABEL_TARGET: "replica-000:8000"}, *ok) is None
    assert counter(c.REQUESTS_TOTAL, SELECTOR, END - 1800, END, 60) is None, "a step under 5 m"
    assert counter(c.PROMPT_TOKENS_TOTAL, SELECTOR, *ok) is None, "not recorded"
    assert counter(c.PREEMPTIONS_TOTAL, {c.LABEL_FINISHED_REASON: "stop"}, *ok) is None, "not kept"
    assert gauge(c.REQUESTS_RUNNING, {c.LABEL_TARGET: "replica-000:8000"}, *ok, "sum") is None
    assert gauge(c.GPU_UTILIZATION, SELECTOR, *ok, "max") is None, "not recorded"
    limited = PrometheusReader(server.url, match='job="vllm"')
    assert limited.recorded_counter_series(c.REQUESTS_TOTAL, SELECTOR, *ok) is None
    assert limited.recorded_gauge_steps(c.REQUESTS_RUNNING, SELECTOR, *ok, "sum") is None


def test_a_malformed_answer_is_a_source_error_naming_it() -> None:
    assert answer_points([[1.0, "2"], [2, "3.5"]], "q") == [(1.0, 2.0), (2.0, 3.5)]
    assert answer_points(None, "q") == []
    for bad in ([[1.0, "x"]], [[1.0]], [1.0], 7, [[1.0, None]]):
        with pytest.raises(PrometheusSourceError, match="malformed"):
            answer_points(bad, "q")


@pytest.fixture(autouse=True)
def _console_caches_emptied_after():
    """The console's caches hold this module's server (``_metrics_source``, the reader):
    emptied after each test, so that no later test in the process reads a stopped server."""
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def _overview(server, tmp_path, monkeypatch, range_key: str) -> AppTest:
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
    return at


@pytest.mark.parametrize(("range_key", "recorded"), [("6h", True), ("1h", False)])
def test_the_overview_says_which_counts_and_gauges_come_from_records(
    server, tmp_path, monkeypatch, range_key, recorded
) -> None:
    at = _overview(server, tmp_path, monkeypatch, range_key)
    notes = [c.value for c in at.caption if "recording rules (" in c.value and "Counts" in c.value]
    assert bool(notes) is recorded, [c.value for c in at.caption]
    if recorded:
        for family in (c.REQUESTS_TOTAL, c.PREEMPTIONS_TOTAL, c.PREFIX_CACHE_HITS_TOTAL):
            assert fleet_counter_record(family) in notes[0], notes[0]
        for family in (c.REQUESTS_RUNNING, c.KV_CACHE_USAGE):
            assert fleet_gauge_record(family) in notes[0], notes[0]


def test_the_overview_reads_ahead_only_what_it_reads(server, tmp_path, monkeypatch) -> None:
    """``data.reading_ahead`` runs the Overview's reads on threads of their own while it
    draws: the server is asked the same queries as when the page reads one after the other,
    some of them from those threads, and no read outlives the page."""
    import contextlib
    import threading

    from collectors.prometheus import api

    asked: list[tuple[str, str]] = []
    real = api.PrometheusAPI.get_json

    def counted(self, method, path, params, what):  # type: ignore[no-untyped-def]
        asked.append((threading.current_thread().name, f"{path} {params.get('query', what)}"))
        return real(self, method, path, params, what)

    monkeypatch.setattr(api.PrometheusAPI, "get_json", counted)
    _overview(server, tmp_path, monkeypatch, "6h")
    ahead = list(asked)
    assert not any(t.is_alive() for t in threading.enumerate()
                   if t.name.startswith(data.READ_AHEAD_THREADS))  # fmt: skip
    asked.clear()

    @contextlib.contextmanager
    def one_by_one(url, reads):  # type: ignore[no-untyped-def]
        yield

    monkeypatch.setattr(data, "reading_ahead", one_by_one)
    _overview(server, tmp_path, monkeypatch, "6h")
    assert {q for _, q in ahead} == {q for _, q in asked}
    assert any(t.startswith(data.READ_AHEAD_THREADS) for t, _ in ahead)
    assert not any(t.startswith(data.READ_AHEAD_THREADS) for t, _ in asked)
