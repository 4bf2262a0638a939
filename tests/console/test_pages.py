"""Every console page through Streamlit's AppTest (the entrypoint, then ``switch_page``) on the
seeded store, pinned to one window (``until``) so the test can compute the same figures
with ``slo/`` directly from the stored rows and compare them with what the page shows."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest
import streamlit as st
from hypothesis import given, strategies
from hypothesis import settings as hypothesis_settings
from streamlit.testing.v1 import AppTest

import slo
from alerts.sql import alert_state_of
from collectors import canonical as c
from collectors.store import Store
from console.filters import RANGES, floor_to_step, step_for
from console.page_kit import (
    CAPACITY_PAGE,
    COST_PAGE,
    INCIDENTS_PAGE,
    OVERVIEW_PAGE,
    SLOS_PAGE,
    TRACES_PAGE,
    ms,
    ms_value,
    percent,
    rate,
)
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV
from tests.console.seeded_store import HOSTILE_TENANT, Seeded

APP = str(Path(__file__).resolve().parents[2] / "console" / "streamlit_app.py")
RANGE = "15m"
ALL_PAGES = [OVERVIEW_PAGE, INCIDENTS_PAGE, TRACES_PAGE, SLOS_PAGE, COST_PAGE, CAPACITY_PAGE]


@pytest.fixture(autouse=True)
def _console_env(monkeypatch, seeded: Seeded):
    monkeypatch.setenv("TAILWATCH_DB_URL", seeded.url)
    monkeypatch.setenv(CONFIG_ENV, str(seeded.config))
    monkeypatch.setenv(LIVE_ENV, "0")
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield
    st.cache_data.clear()
    st.cache_resource.clear()


def window(seeded: Seeded) -> tuple[float, float]:
    """The window the pinned pages show: ``until`` floored to the step, ``RANGE`` long."""
    end = floor_to_step(seeded.until, step_for(RANGES[RANGE]))
    return end - RANGES[RANGE], end


def run(page: str, seeded: Seeded, **params: str) -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["range"] = RANGE
    at.query_params["until"] = f"{seeded.until:.0f}"
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def metric(at: AppTest, label: str) -> str:
    found = [m.value for m in at.metric if m.label == label]
    assert len(found) == 1, (label, [m.label for m in at.metric])
    return found[0]


def merged(store: Store, family: str, start: float, end: float) -> slo.ClassicHistogram:
    """The window's distribution the slow way: every series' increase from its snapshots
    (``slo.histogram_increase``), added (``slo.merge_histograms``)."""
    increases = [
        slo.histogram_increase(snaps)
        for snaps in store.snapshots(family, None, start, end).values()
        if len(snaps) > 1
    ]
    return slo.merge_histograms(h for h in increases if h is not None)


def counter_total(store: Store, family: str, start: float, end: float, **labels) -> float:
    return sum(
        slo.counter_increase([s.value for s in samples])
        for samples in store.samples(family, labels or None, start, end).values()
    )


def ttft_goodput(records, duration_seconds: float) -> slo.GoodputResult:
    """vLLM's goodput over the records against the seeded TTFT SLO's 0.5 s threshold."""
    judged = [
        slo.RequestRecord(
            succeeded=not r.is_error and r.finish_reason in ("stop", "length"),
            ttft_seconds=r.ttft_seconds, e2e_seconds=r.e2e_seconds,
            output_tokens=r.output_tokens or 0,
        )
        for r in records
    ]  # fmt: skip
    return slo.request_goodput(judged, slo.Objectives(ttft_seconds=0.5), duration_seconds)


@pytest.mark.parametrize("page", ALL_PAGES)
def test_every_page_runs_without_exception_and_its_charts_are_valid_vega_lite(
    page, seeded, monkeypatch
):
    # NOTE: the console skips Altair's schema check when it draws (page_kit.show_chart);
    # here every chart a page draws is checked against the Vega-Lite schema instead
    drawn, draw = [], st.altair_chart
    monkeypatch.setattr(st, "altair_chart", lambda chart, **kw: (drawn.append(chart), draw(chart, **kw))[1])  # fmt: skip
    at = run(page, seeded)
    assert at.title, "every page has a title"
    for chart in drawn:
        chart.to_dict(validate=True)  # raises SchemaValidationError naming the bad field


def test_overview_percentiles_are_the_merged_histograms_quantiles(seeded):
    at = run(OVERVIEW_PAGE, seeded)
    start, end = window(seeded)
    store = Store(seeded.url, migrate=False)
    try:
        for family, name in (
            (c.TTFT_SECONDS, "TTFT"),
            (c.ITL_SECONDS, "ITL"),
            (c.E2E_SECONDS, "E2E"),
        ):
            histogram = merged(store, family, start, end)
            assert histogram.total_count > 0
            for q, p in ((0.5, "p50"), (0.95, "p95"), (0.99, "p99")):
                assert metric(at, f"{name} {p}") == ms_value(histogram.quantile(q).value)
        records = store.requests(start, end)
    finally:
        store.close()
    # 3 percentile bands, 2 per-replica p99s, 2 rate panels, 4 saturation, 3 heatmaps
    assert len(at.get("vega_lite_chart")) >= 12
    result = ttft_goodput(records, end - start)
    assert result.num_requests == seeded.num_requests
    assert metric(at, "Goodput attainment") == percent(result.attainment)


def test_overview_rates_are_over_the_data_not_the_whole_range(seeded):
    """A range holding a few seconds of traffic: the request rate is the traffic's own, and
    the caption says what it is over (the bug: the whole range's average, unsaid)."""
    at = run(OVERVIEW_PAGE, seeded)
    start, end = window(seeded)
    store = Store(seeded.url, migrate=False)
    try:
        readings = store.samples(c.HTTP_RESPONSES_TOTAL, None, start, end)
        total = counter_total(store, c.HTTP_RESPONSES_TOTAL, start, end)
    finally:
        store.close()
    times = [t for samples in readings.values() for t, _ in samples]
    first, last = min(times), max(times)
    assert start < first and last - first < RANGES[RANGE] / 10
    assert metric(at, "Request rate") == rate(total / (last - first))
    assert metric(at, "Request rate") != rate(total / RANGES[RANGE])
    shown = pd.Timestamp(first, unit="s", tz="UTC")
    caption = next(c.value for c in at.caption if c.value.startswith("Request, error and 429"))
    assert f"(data starts {shown:%H:%M} UTC)" in caption, caption
    assert "over the last " in caption and f"over the last {RANGE}" not in caption


def test_slo_page_attainment_is_slos(seeded):
    at = run(SLOS_PAGE, seeded)
    start, end = window(seeded)
    store = Store(seeded.url, migrate=False)
    try:
        ttft = slo.objective_attainment(merged(store, c.TTFT_SECONDS, start, end), 0.5)
        increases = {
            dict(info.labels)[c.LABEL_FINISHED_REASON]: counter_total(
                store, c.REQUESTS_TOTAL, start, end, **dict(info.labels)
            )
            for info in store.series(c.REQUESTS_TOTAL)
        }
        records = store.requests(start, end)
    finally:
        store.close()
    availability = slo.error_ratio_from_increases(
        increases, slo.ErrorRatioIndicator(slo.ErrorSource.REQUESTS)
    )
    shown = [m.value for m in at.metric if m.label == f"Attainment, last {RANGE}"]
    assert shown == [percent(ttft.attainment), percent(1 - availability.error_ratio)]
    exact = [m.value for m in at.metric if m.label == "Exact (records)"]
    assert exact == [percent(ttft_goodput(records, end - start).attainment), "—"]
    assert len(at.dataframe) >= 2 and len(at.dataframe[0].value) == 4  # the MWMB rows


def test_cost_page_effective_cost_is_slos(seeded):
    """The GPU time billed is each replica's observed span (its first reading to its last),
    one GPU each: not a GPU for the whole range (the bug: a GPU-hour for a few seconds)."""
    at = run(COST_PAGE, seeded)
    start, end = window(seeded)
    store = Store(seeded.url, migrate=False)
    try:
        tokens = counter_total(store, c.GENERATION_TOKENS_TOTAL, start, end)
        readings = store.samples(c.REQUESTS_TOTAL, None, start, end)
    finally:
        store.close()
    by_target: dict[str, list[float]] = {}
    for labels, samples in readings.items():
        by_target.setdefault(dict(labels)[c.LABEL_TARGET], []).extend(t for t, _ in samples)
    assert len(by_target) == 2  # the seeded run's two replicas
    gpu_seconds = sum(max(times) - min(times) for times in by_target.values())
    assert 0 < gpu_seconds < (end - start) / 10
    expected = slo.effective_cost_per_million_tokens(
        slo.Pricing("USD", 2.5), 1, gpu_seconds, tokens
    )
    assert tokens > 0
    assert metric(at, "Effective (USD)") == f"{expected:,.2f}"
    caption = next(c.value for c in at.caption if c.value.startswith("GPU time billed"))
    assert "one GPU per replica (2 replicas)" in caption, caption
    assert len(at.get("download_button")) == 2


def captions(at: AppTest) -> list[str]:
    """The page's captions as read (markdown escapes removed)."""
    return [c.value.replace("\\", "") for c in at.caption]


def number(at: AppTest, label: str) -> float:
    found = [n.value for n in at.number_input if n.label == label]
    assert len(found) == 1, (label, [n.label for n in at.number_input])
    return found[0]


def start_from(at: AppTest):  # type: ignore[no-untyped-def]
    (radio,) = [r for r in at.radio if r.label == "Start from"]
    return radio


def test_capacity_page_reproduces_q39(seeded):
    at = run(CAPACITY_PAGE, seeded)
    start_from(at).set_value("Q39 worked example").run()
    assert not at.exception, [e.value for e in at.exception]
    assert metric(at, "KV cache per token") == "160 KiB"
    assert metric(at, "KV tokens that fit") == "262,144"
    assert metric(at, "Sequences of 4,000 tokens") == "65"
    assert metric(at, "Replicas needed") == "3"
    assert captions(at).count("Q39 worked example: chosen in Start from") == 4


def test_capacity_page_starts_from_the_fleet_and_the_newest_sweeps_knee(seeded):
    """The workload is the seeded run's own (its requests over the seconds they span, the
    e2e histogram's mean, tokens per finished request); the ceiling is the finished sweep's
    knee as a concurrency: knee rate × mean e2e at the knee (Little's law)."""
    at = run(CAPACITY_PAGE, seeded)
    assert start_from(at).value == "This fleet (selected range)"
    start, end = window(seeded)
    store = Store(seeded.url, migrate=False)
    try:
        requests = counter_total(store, c.REQUESTS_TOTAL, start, end)
        readings = store.samples(c.REQUESTS_TOTAL, None, start, end)
        e2e = merged(store, c.E2E_SECONDS, start, end)
        tokens = counter_total(store, c.PROMPT_TOKENS_TOTAL, start, end) + counter_total(
            store, c.GENERATION_TOKENS_TOTAL, start, end
        )
        (sweep,) = [r for r in store.lab_runs() if r.name == "mnbt 512 vs 4096"]
        at_knee = [p for p in store.lab_points(sweep.id) if p.knob_value == 512 and p.rate == 10]
    finally:
        store.close()
    times = [t for samples in readings.values() for t, _ in samples]
    arrival = requests / (max(times) - min(times))
    latency = e2e.sum_value / e2e.total_count
    per_request = tokens / requests
    assert requests > 0 and 0 < latency < 60 and per_request > 1
    # the seeded sweep's 512 line passes at 5 and 10 req/s, fails at 20: its knee is 10
    assert len(at_knee) == 3
    knee_latency = sum(sum(p.samples["e2e_ms"]) / len(p.samples["e2e_ms"]) for p in at_knee) / 3
    ceiling = 10 * knee_latency / 1000
    assert number(at, "Arrival rate (req/s)") == pytest.approx(arrival, abs=1e-3)
    assert number(at, "Mean latency (s)") == pytest.approx(latency, abs=1e-3)
    assert number(at, "Tokens per sequence") == round(per_request)
    assert number(at, "Measured ceiling (concurrent)") == pytest.approx(ceiling, abs=1e-3)
    assert arrival != pytest.approx(requests / RANGES[RANGE])  # over the data, not the range
    demand = number(at, "Arrival rate (req/s)") * number(at, "Mean latency (s)")
    replicas = math.ceil(demand / number(at, "Measured ceiling (concurrent)")) + 1
    assert metric(at, "Replicas needed") == str(replicas)
    shown = captions(at)
    first = pd.Timestamp(min(times), unit="s", tz="UTC")
    (rate_caption,) = [t for t in shown if "req/s, " in t and t.startswith("from the fleet")]
    assert rate_caption.startswith(f"from the fleet: {arrival:,.2f} req/s, {requests:,.0f} ")
    assert f"(data starts {first:%H:%M} UTC) ({RANGE} selected)" in rate_caption, rate_caption
    assert any(t.startswith(f"from the fleet: mean e2e {latency:,.3f} s") for t in shown), shown
    assert any(t.startswith("from the fleet: (") and f"= {per_request:,.0f} per request" in t
               for t in shown), shown  # fmt: skip
    assert any(t.startswith(f"from sweep #{sweep.id}'s knee (") and
               "max_num_batched_tokens=512): 10 req/s × " in t for t in shown), shown  # fmt: skip
    # an edit sticks across reruns (the fleet value only starts the widget)
    (arrival_input,) = [n for n in at.number_input if n.label == "Arrival rate (req/s)"]
    arrival_input.set_value(7.5).run()
    assert number(at, "Arrival rate (req/s)") == 7.5
    at.run()
    assert number(at, "Arrival rate (req/s)") == 7.5


def test_capacity_page_without_traffic_in_the_range_starts_from_q39(seeded):
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["range"] = RANGE
    at.query_params["until"] = f"{seeded.start - 3 * RANGES[RANGE]:.0f}"  # before the run
    at.switch_page(CAPACITY_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert start_from(at).value == "Q39 worked example"
    assert metric(at, "Sequences of 4,000 tokens") == "65"
    assert metric(at, "Replicas needed") == "3"
    why = f"Q39 worked example: no traffic in the selected range ({RANGE})"
    assert captions(at).count(why) == 4, captions(at)
    # choosing the fleet anyway: the workload stays Q39 (with why), the ceiling is the knee
    start_from(at).set_value("This fleet (selected range)").run()
    assert number(at, "Arrival rate (req/s)") == 3.0 and number(at, "Mean latency (s)") == 12.0
    assert captions(at).count(why) == 3
    assert any(t.startswith("from sweep #") for t in captions(at)), captions(at)


HYPOTHESES = ("#", "cause", "score", "scope", "data", "note")
UNASSESSED = ("#", "cause", "scope", "missing")
EVIDENCE = ("signal", "scope", "incident", "baseline", "change", "source", "note")
TIMELINE = ("at", "event", "what")


def incident_table(at, columns: tuple[str, ...]) -> pd.DataFrame:
    """The incident page's table whose columns start with ``columns`` (an empty frame of
    them where the page drew none)."""
    for frame in at.dataframe:
        if tuple(frame.value.columns[: len(columns)]) == columns:
            return frame.value
    return pd.DataFrame(columns=list(columns))


def test_incident_list_and_detail(seeded):
    at = run(INCIDENTS_PAGE, seeded)
    incidents = at.dataframe[0].value
    assert list(incidents["id"]) == [seeded.incident_id]
    assert list(incidents["state"]) == ["resolved"]
    assert metric(at, "Resolved") == "1" and metric(at, "Firing now") == "0"
    at = run(INCIDENTS_PAGE, seeded, id=str(seeded.incident_id))
    # the title is markdown with the stored alert name escaped
    assert at.title[0].value == f"#{seeded.incident_id} · tail\\-latency\\-incident · resolved"
    hypotheses, unassessed, evidence, timeline = (
        incident_table(at, columns) for columns in (HYPOTHESES, UNASSESSED, EVIDENCE, TIMELINE)
    )
    from console.incidents.frames import ALERT_EVENT

    alert_rows = timeline[timeline["event"] == ALERT_EVENT]
    assert list(alert_rows["what"]) == ["inactive → pending", "pending → firing",
                                        "firing → resolved"]  # fmt: skip
    assert "TTFT mean" in set(evidence["signal"])
    # NOTE: the causes without their data are listed apart, each with its rank
    ranks = sorted([*hypotheses["#"], *unassessed["#"]])
    assert ranks == list(range(1, len(ranks) + 1)) and len(unassessed) > 0
    assert set(hypotheses["data"]) <= {"yes"} and list(hypotheses["#"]) == sorted(hypotheses["#"])
    assert len(at.get("vega_lite_chart")) == 1  # the alert's TTFT around the incident


def test_silencing_without_the_token_changes_nothing(seeded, monkeypatch):
    monkeypatch.setenv(ADMIN_TOKEN_ENV, "right-token")
    at = run(INCIDENTS_PAGE, seeded, id=str(seeded.incident_id))
    at.text_input(key="sil_author").input("oncall")
    at.text_input(key="sil_comment").input("known")
    at.text_input(key="sil_token").input("wrong-token")
    at.button[0].click().run()
    assert any("Not silenced" in e.value for e in at.error)
    store = Store(seeded.url, migrate=False)
    try:
        assert alert_state_of(store).silences() == []
    finally:
        store.close()


def test_traces_by_trace_and_request_id(seeded):
    store = Store(seeded.url, migrate=False)
    try:
        record = store.requests(0, math.inf)[0]
    finally:
        store.close()
    for params in ({"trace": record.trace_id}, {"request": record.request_id}):
        at = run(TRACES_PAGE, seeded, **params)
        phases = list(at.dataframe[0].value["phase"])
        assert phases[0] == "queue" and phases[-1] == "decode", phases
        assert metric(at, "TTFT") == ms(record.ttft_seconds)


def test_traces_name_the_replica_as_every_other_page_does(seeded):
    """The Traces page showed the engine's UUID (service.instance.id) where every other page
    says the target; now the target, with the id kept beside it."""
    from collectors.replica_targets import replica_targets

    store = Store(seeded.url, migrate=False)
    try:
        names = replica_targets(store).unique()
        record = store.requests(0, math.inf)[0]
    finally:
        store.close()
    assert record.replica in names and names[record.replica] != record.replica
    targets = set(names.values())
    at = run(TRACES_PAGE, seeded)
    table = at.dataframe[0].value
    assert set(table["replica"]) <= targets, set(table["replica"])
    assert set(table["instance_id"]) <= set(names)
    for row in table.itertuples():
        assert names[row.instance_id] == row.replica
    at = run(TRACES_PAGE, seeded, trace=record.trace_id)
    caption = next(c.value for c in at.caption if c.value.startswith("Replica"))
    plain = caption.replace("\\", "")
    assert f"Replica **{names[record.replica]}**" in plain
    assert f"engine instance id {record.replica}" in plain


def test_bad_url_values_are_dropped_with_a_warning(seeded):
    at = run(TRACES_PAGE, seeded, range="2y", model="<img src=x>", trace="not-hex!")
    texts = [w.value for w in at.warning]
    assert any("range='2y'" in t for t in texts), texts
    assert any("model=" in t and "not a model" in t for t in texts), texts
    assert any("Not a trace id" in t for t in texts), texts
    at = run(INCIDENTS_PAGE, seeded, id="zz")
    assert any("not an incident id" in w.value for w in at.warning)


def test_a_hostile_tenant_label_is_escaped_text(seeded):
    at = run(TRACES_PAGE, seeded, tenant=HOSTILE_TENANT)
    sources = [m.value for m in at.get("markdown")] + [m.value for m in at.caption]
    # the markdown source has every punctuation character escaped, so it renders as the
    # literal string (the browser test reads it back) and can never become markup
    assert any(s.startswith("Showing tenant") and "\\<script\\>" in s for s in sources), sources
    assert not any("<script>" in s or "<b>" in s for s in sources), sources
    shown = at.dataframe[-1].value
    assert set(shown["tenant"]) == {HOSTILE_TENANT}  # a cell holds the string itself


def test_no_page_allows_unsafe_html():
    root = Path(APP).parent
    for path in root.rglob("*.py"):
        assert "unsafe_allow_html" not in path.read_text(encoding="utf-8"), path


def test_an_unmigrated_store_says_how_to_migrate(tmp_path, monkeypatch, seeded):
    monkeypatch.setenv("TAILWATCH_DB_URL", f"sqlite:///{tmp_path / 'missing.db'}")
    at = AppTest.from_file(APP, default_timeout=60)
    at.run()
    assert not at.exception
    assert any("tailwatch store migrate" in w.value for w in at.warning), [
        w.value for w in at.warning
    ]
    at.switch_page(CAPACITY_PAGE).run()  # the planner needs no store
    assert not at.exception and metric(at, "Replicas needed") == "3"
    why = "Q39 worked example: no store is configured or readable"
    assert captions(at).count(why) == 4, captions(at)
    assert not (tmp_path / "missing.db").exists(), "a reader never creates the store"


def test_no_slos_is_an_empty_state(seeded, monkeypatch):
    monkeypatch.delenv(CONFIG_ENV)
    at = run(SLOS_PAGE, seeded)
    assert any("No SLOs configured" in i.value for i in at.info)


def test_cost_at_capacity_reproduces_the_worked_example(seeded):
    """docs/console.md's worked example: ₹250 per GPU-hour, 2 GPUs, a knee of 1,500 output
    tokens/s: ₹92.59 per 1M output tokens at capacity (docs/slo.md, "Cost per million")."""
    at = run(COST_PAGE, seeded)
    at.text_input(key="cost_currency").input("INR")
    at.number_input(key="cost_price").set_value(250.0)
    at.number_input(key="cost_gpus").set_value(2)
    at.number_input(key="cost_knee").set_value(1500.0)
    at.run()
    assert not at.exception
    assert metric(at, "At capacity (INR)") == "92.59"


@hypothesis_settings(max_examples=12, deadline=None)
@given(
    page=strategies.sampled_from([TRACES_PAGE, INCIDENTS_PAGE, OVERVIEW_PAGE]),
    params=strategies.dictionaries(
        strategies.sampled_from(["range", "until", "model", "target", "tenant", "id", "trace",
                                 "request"]),
        strategies.text(max_size=80),
        max_size=4,
    ),
)  # fmt: skip
def test_any_query_string_renders_without_exception(seeded, page, params):
    st.cache_data.clear()
    at = AppTest.from_file(APP, default_timeout=60)
    for key, value in params.items():
        at.query_params[key] = value
    at.switch_page(page).run()
    assert not at.exception, (params, [e.value for e in at.exception])


def test_the_tenant_filter_reads_the_tenants_own_series(seeded):
    at = run(OVERVIEW_PAGE, seeded, tenant="acme")
    start, end = window(seeded)
    store = Store(seeded.url, migrate=False)
    try:
        increases = [
            slo.histogram_increase(snaps)
            for snaps in store.snapshots(c.TTFT_SECONDS, {"tenant": "acme"}, start, end).values()
            if len(snaps) > 1
        ]
    finally:
        store.close()
    histogram = slo.merge_histograms(h for h in increases if h is not None)
    assert 0 < histogram.total_count < seeded.num_requests  # one tenant's share
    assert metric(at, "TTFT p99") == ms_value(histogram.quantile(0.99).value)
    assert metric(at, "ITL p99") == "—"  # no per-tenant ITL series: shown as unknown


def _empty_store(tmp_path) -> str:
    from collectors.store import sqlite_url

    url = sqlite_url(tmp_path / "empty.db")
    Store(url).close()  # a writer migrates it: the schema, and no data
    return url


@pytest.mark.parametrize(
    ("page", "says"),
    [
        (OVERVIEW_PAGE, "No latency histograms"),
        (INCIDENTS_PAGE, "tailwatch alerts run"),
        (TRACES_PAGE, "No request records"),
        (SLOS_PAGE, "No request records"),
        (COST_PAGE, "No request records"),
    ],
)
def test_an_empty_store_has_empty_states_that_say_what_to_do(tmp_path, monkeypatch, page, says):
    monkeypatch.setenv("TAILWATCH_DB_URL", _empty_store(tmp_path))
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(page).run()
    assert not at.exception, [e.value for e in at.exception]
    assert any(says in i.value for i in at.info), [i.value for i in at.info]


def test_gpu_panels_appear_with_nvml_readings(tmp_path, monkeypatch):
    import time

    from collectors.store.records import ScrapeRecord

    url = _empty_store(tmp_path)
    store = Store(url)
    now = time.time()
    labels = c.labels_key({"target": "gpu-host", "gpu": "0", "gpu_name": "NVIDIA H200"})
    for i, t in enumerate((now - 120, now - 60)):
        samples = tuple(
            c.CanonicalSample(family, labels, value, c.Kind.GAUGE)
            for family, value in (
                (c.GPU_UTILIZATION, 0.5 + 0.1 * i),
                (c.GPU_MEMORY_USED_BYTES, 70e9),
                (c.GPU_POWER_WATTS, 450.0),
                (c.GPU_TEMPERATURE_CELSIUS, 61.0),
            )
        )
        store.write_scrape(ScrapeRecord("gpu-host", t, samples=samples))
    store.close()
    monkeypatch.setenv("TAILWATCH_DB_URL", url)
    at = AppTest.from_file(APP, default_timeout=60)
    at.query_params["range"] = "15m"
    at.switch_page(OVERVIEW_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    assert not any("No GPU telemetry" in i.value for i in at.info)
    titles = [m.value for m in at.markdown]
    assert "**GPU utilisation**" in titles and "**Power (W)**" in titles
    assert not any("not reported by this GPU" in cap.value for cap in at.caption)
    # the store holds GPU readings only: the four GPU panels are the page's only charts
    assert len(at.get("vega_lite_chart")) == 4


def test_a_bad_live_setting_is_a_warning_not_a_traceback(seeded, monkeypatch):
    monkeypatch.setenv(LIVE_ENV, "soon")
    at = run(CAPACITY_PAGE, seeded)
    assert any(LIVE_ENV in w.value for w in at.warning)


def test_the_per_replica_lines_say_when_they_show_some_replicas_only(seeded, monkeypatch):
    """More replicas than the per-replica charts draw: the page says which it shows, of how
    many, and how to see another; with all of them drawn it says nothing."""
    from console import metric_frames

    store = Store(seeded.url)
    held = len({dict(i.labels)[c.LABEL_TARGET] for i in store.series(c.TTFT_SECONDS)})
    store.close()
    assert held > 1
    at = run(OVERVIEW_PAGE, seeded)
    assert not [c.value for c in at.caption if "p99 per replica" in c.value]
    monkeypatch.setattr(metric_frames, "MAX_BREAKDOWN_SERIES", 1)
    at = run(OVERVIEW_PAGE, seeded)
    (said,) = [c.value for c in at.caption if "p99 per replica" in c.value]
    assert said == (
        f"p99 per replica: the first 1 of {held} replicas by name. Choose a replica in the "
        "sidebar to see it alone."
    )
