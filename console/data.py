"""The only module pages read through: the store opened once per URL (``st.cache_resource``,
read-only in schema: ``Store(url, migrate=False)``), and every read cached with a ttl and a
bound on entries (``st.cache_data``), keyed on plain values (URL, family, selector items,
window) so that two viewers of the same view share one query.

The reads themselves are pure functions in :mod:`console.metric_frames`,
:mod:`console.request_frames`, :mod:`console.slo_frames`, :mod:`console.incidents.frames` and
:mod:`console.knob_lab.frames` (with ``knob_lab.ab`` and ``knob_lab.knobs``): the pure
modules of the ``incidents`` and ``knob_lab`` subpackages sit below this one, their sections
above it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pandas as pd
import streamlit as st
from streamlit.runtime.scriptrunner import add_script_run_ctx, get_script_run_ctx

from alerts import Acknowledgement, Backtest, EvaluationHealth, Silence, backtest
from alerts.rules import BurnRateRule, Rule
from alerts.sql import alert_state_of
from alerts.triage import KnobChange, TimeWindow
from collectors import canonical as c
from collectors.config import ConfigError
from collectors.readers import reader_for
from collectors.request_records import RequestRecord, SpanRecord
from collectors.store import SchemaOutOfDateError, Store
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind
from collectors.store.protocols import LabReader, MetricsReader
from collectors.store.schema import MIGRATE_COMMAND
from console import metric_frames, request_frames, slo_frames
from console.filters import Filters, step_for
from console.incidents import breakdowns as incident_breakdowns
from console.incidents import client_gap as incident_client_gap
from console.incidents import frames as incident_frames
from console.knob_lab import ab as lab_ab_module
from console.knob_lab import frames as lab_frames
from console.knob_lab import knobs as lab_knobs
from console.settings import LIVE_ENV, ConsoleSettings, load_settings
from slo import GoodputResult, Objectives, QuantileResult, SLOSpec
from tailwatch.config import load_config

#: Seconds a cached read is reused; the live refresh interval is about as long.
TTL_SECONDS = 15
MAX_ENTRIES = 256
#: Families whose series name the models and targets offered in the filters.
CATALOG_FAMILIES = (c.TTFT_SECONDS, c.E2E_SECONDS, c.REQUESTS_RUNNING)
#: Families the Overview also breaks down per target (p99 per replica).
BY_TARGET_FAMILIES = (c.TTFT_SECONDS, c.ITL_SECONDS)
#: Lab runs listed at most (newest first).
LAB_RUN_LIMIT = 100
#: The name of the threads :func:`reading_ahead` reads on.
READ_AHEAD_THREADS = "console-read-ahead"

LOG = logging.getLogger(__name__)

Selector = tuple[tuple[str, str], ...]


def settings() -> ConsoleSettings:
    """The console's settings; a bad ``TAILWATCH_LIVE`` is a warning (live refresh off)."""
    try:
        return load_settings()
    except ValueError as error:
        st.warning(f"{error}; live refresh is off")
        return load_settings({**os.environ, LIVE_ENV: "0"})


@dataclass(frozen=True)
class StoreStatus:
    """The store, or why it cannot be read and what to do (``problem``)."""

    store: Store | None
    problem: str = ""


@st.cache_resource(max_entries=4, show_spinner=False)
def _open(url: str) -> Store:
    return Store(url, migrate=False)


def store_status(url: str) -> StoreStatus:
    """The store at ``url``; a missing or old schema (or any open error) is a problem that
    names ``tailwatch store migrate``. Not cached when it fails, so a later run retries."""
    try:
        return StoreStatus(_open(url))
    except SchemaOutOfDateError as error:
        return StoreStatus(None, str(error))
    except Exception as error:  # NOTE: any URL or driver error is one message, never a trace
        first = (str(error).strip().splitlines() or [type(error).__name__])[0]
        return StoreStatus(
            None,
            f"cannot open the store at {url}: {first}. Check --db; a new store is created "
            f"with `{MIGRATE_COMMAND}` or by `tailwatch collect`.",
        )


def _store(url: str) -> Store:
    status = store_status(url)
    if status.store is None:
        raise RuntimeError(status.problem)
    return status.store


@st.cache_resource(show_spinner=False)
def _open_server(metrics_url: str, match: str, headers: tuple[tuple[str, str], ...]):  # type: ignore[no-untyped-def]
    return reader_for(metrics_url, match=match, headers=dict(headers) or None)


#: A metrics source as the cache keeps it: (url, match, headers as sorted pairs).
_Source = tuple[str, str, tuple[tuple[str, str], ...]]


@st.cache_data(ttl=60, max_entries=4, show_spinner=False)
def _metrics_source(config_path: str | None) -> _Source | None:
    """``TAILWATCH_METRICS_URL``, or the config's ``prometheus:`` section (its headers come
    only from there); a config that no longer loads leaves the environment's. Plain tuples:
    ``st.cache_data`` pickles what it keeps, and a ``MetricsSource``'s headers are a read-only
    mapping that does not pickle."""
    source = settings().metrics
    if config_path is not None:
        with contextlib.suppress(ConfigError):
            source = load_config(config_path).metrics
    if source is None:
        return None
    return source.url, source.match, tuple(sorted(source.headers.items()))


def _metrics(url: str) -> MetricsReader:
    """What metric reads go to: the server of ``TAILWATCH_METRICS_URL`` when the console was
    given one (``tailwatch console --config`` with a ``prometheus:`` section, ``tailwatch up
    --prometheus``), else the store at ``url``; Tailwatch's own records (alerts, incidents,
    requests, traces, lab runs) are always read from the store. NOTE: the reads stay keyed by
    the store's ``url``: the server is one per console process, so the caches' keys hold."""
    source = _metrics_source(settings().config_path)
    if source is None:
        return _store(url)
    return _open_server(*source)


@contextlib.contextmanager
def reading_ahead(url: str, reads: Iterable[Callable[[], object]]) -> Iterator[None]:
    """While the page draws, run its ``reads`` (each a call of a cached read here, with the
    arguments the page will call it with) on the metrics reader's ``concurrent_reads``
    threads, in order, as Grafana queries a dashboard's panels at once: a server answers
    several queries on cores of its own while this process decodes the last answer. The
    page's own call of a read that is under way waits for it (``st.cache_data`` computes a
    value once, under a lock per key) and then finds it cached. A reader of the embedded
    store (``concurrent_reads`` 1) reads as the page goes. A read that fails here is read
    again by the page, which shows its error. Nothing outlives the block: reads not begun
    are cancelled, and those under way are waited for."""
    try:
        workers = int(getattr(_metrics(url), "concurrent_reads", 1))
    except Exception:  # NOTE: no reader: the page's first read says why
        workers = 1
    if workers < 2:
        yield
        return
    context = get_script_run_ctx()

    def run(read: Callable[[], object]) -> None:
        if context is not None:  # NOTE: st.cache_data finds its session's caches through it
            add_script_run_ctx(threading.current_thread(), context)
        try:
            read()
        except Exception:
            LOG.debug("a read ahead failed; the page reads it again", exc_info=True)

    with ThreadPoolExecutor(workers, thread_name_prefix=READ_AHEAD_THREADS) as pool:
        started = [pool.submit(run, read) for read in reads]
        try:
            yield
        finally:
            for future in started:
                future.cancel()


@dataclass(frozen=True)
class ConfiguredSLOs:
    """The SLOs of the config, or none and why (``problem``: the config does not load)."""

    slos: tuple[SLOSpec, ...] = ()
    problem: str = ""


@st.cache_data(ttl=60, max_entries=8, show_spinner=False)
def slos(config_path: str | None) -> ConfiguredSLOs:
    """The SLOs from the ``slos:`` of ``config_path`` (``None``: no SLOs), or the problem."""
    if config_path is None:
        return ConfiguredSLOs()
    try:
        return ConfiguredSLOs(load_config(config_path).slos)
    except ConfigError as error:
        return ConfiguredSLOs(problem=str(error))


def now() -> float:
    return time.time()


def _sel(selector: Mapping[str, str]) -> Selector:
    return tuple(sorted(selector.items()))


# -- catalog ---------------------------------------------------------------------------------


@st.cache_data(ttl=60, max_entries=8, show_spinner=False)
def catalog(url: str) -> dict[str, list[str]]:
    """Models and targets in the store's series (the filters' choices)."""
    store = _metrics(url)
    return {
        "model": metric_frames.label_values(store, CATALOG_FAMILIES, c.LABEL_MODEL),
        "target": metric_frames.label_values(store, CATALOG_FAMILIES, c.LABEL_TARGET),
    }


@st.cache_data(ttl=60, max_entries=8, show_spinner=False)
def tenants(url: str, start: float, end: float) -> list[str]:
    """Tenants seen in request records over ``[start, end]``."""
    records = _store(url).requests(start, end, limit=request_frames.RECORD_LIMIT)
    return sorted({r.tenant for r in records if r.tenant})


# -- metrics ---------------------------------------------------------------------------------


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _steps(url, family, selector: Selector, start, end, step):
    return _metrics(url).histogram_series(family, dict(selector), start, end, step)


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _recorded_steps(url, family, selector: Selector, start, end, step):
    """The steps from the server's recording rule of the fleet histogram, and its name;
    ``None`` where the reader has none that answers (``recorded_histogram_series``)."""
    recorded = getattr(_metrics(url), "recorded_histogram_series", None)
    return None if recorded is None else recorded(family, dict(selector), start, end, step)


def _filter_steps(url: str, family: str, f: Filters) -> list:
    """The filters' ``histogram_series`` of ``family``: one read serves its percentile chart,
    its window figures and its heatmap. A recording rule that answers every step is read first
    (a day of a large fleet's buckets is the heaviest read a page has: ``recorded_from`` names
    it); else, for the per-replica families with all targets shown, the per-target steps
    added, when those targets hold every selected series (one read fewer)."""
    selector, span = _sel(f.selector()), (f.start_seconds, f.end_seconds, f.step_seconds)
    recorded = _recorded_steps(url, family, selector, *span)
    if recorded is not None:
        return recorded[0]
    if f.target is None and family in BY_TARGET_FAMILIES:
        merged = _target_call(_merged_by_target, url, family, f)
        if merged is not None:
            return merged
    return _steps(url, family, selector, *span)


def recorded_from(url: str, family: str, f: Filters) -> str | None:
    """The recording rule the filters' steps of ``family`` are read from, if any."""
    span = (f.start_seconds, f.end_seconds, f.step_seconds)
    recorded = _recorded_steps(url, family, _sel(f.selector()), *span)
    return None if recorded is None else recorded[1]


def window_percentiles(url: str, family: str, f: Filters) -> dict[str, QuantileResult] | None:
    # NOTE: the steps tile the window (the range is a whole number of steps), and exact
    # windows add up: the merged steps are histogram_window's distribution.
    return metric_frames.window_of_steps(_filter_steps(url, family, f))


def window_sum_count(url: str, family: str, f: Filters) -> tuple[float, float] | None:
    """A histogram's observed sum and count over the window (``metric_frames.window_sum_count``
    of the steps the percentiles read): the mean is their ratio."""
    return metric_frames.window_sum_count(_filter_steps(url, family, f))


def percentile_frame(url: str, family: str, f: Filters) -> pd.DataFrame:
    return metric_frames.step_percentiles(_filter_steps(url, family, f))


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _percentile_frame(url, family, selector: Selector, start, end, step):
    return metric_frames.percentile_frame(_metrics(url), family, dict(selector), start, end, step)


def percentile_frame_between(
    url: str, family: str, selector: Mapping[str, str], start: float, end: float
) -> pd.DataFrame:
    """:func:`percentile_frame` over ``[start, end]`` (an incident's windows), not the filters'."""
    return _percentile_frame(url, family, _sel(selector), start, end, step_for(end - start))


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _counter_rate(url, family, selector: Selector, start, end, step, split_by, per_seconds):
    return metric_frames.counter_rate_frame(
        _metrics(url), family, dict(selector), start, end, step, split_by=split_by,
        per_seconds=per_seconds,
    )  # fmt: skip


def counter_rate(
    url: str, family: str, f: Filters, *, split_by: str | None = None, per_seconds: float = 1.0
) -> pd.DataFrame:
    return _counter_rate(
        url, family, _sel(f.selector()), f.start_seconds, f.end_seconds, f.step_seconds,
        split_by, per_seconds,
    )  # fmt: skip


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _increase_by(url, family, selector: Selector, label, start, end, step):
    return metric_frames.counter_increase_by(
        _metrics(url), family, dict(selector), label, start, end, step
    )


def increase_by(url: str, family: str, label: str, f: Filters) -> dict[str, float]:
    return _increase_by(
        url, family, _sel(f.selector()), label, f.start_seconds, f.end_seconds, f.step_seconds
    )


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _gauge(url, family, selector: Selector, start, end, step, across):
    return metric_frames.gauge_frame(
        _metrics(url), family, dict(selector), start, end, step, across=across
    )


def gauge(url: str, family: str, f: Filters, *, across: str = "sum") -> pd.DataFrame:
    return _gauge(
        url, family, _sel(f.selector()), f.start_seconds, f.end_seconds, f.step_seconds, across
    )


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _ratio(url, numerator, denominator, selector: Selector, start, end, step):
    return metric_frames.ratio_frame(
        _metrics(url), numerator, denominator, dict(selector), start, end, step
    )


def ratio(url: str, numerator: str, denominator: str, f: Filters) -> pd.DataFrame:
    return _ratio(
        url, numerator, denominator, _sel(f.selector()), f.start_seconds, f.end_seconds,
        f.step_seconds,
    )  # fmt: skip


def heatmap(url: str, family: str, f: Filters) -> pd.DataFrame:
    return metric_frames.heatmap_cells(_filter_steps(url, family, f))


@st.cache_data(ttl=60, max_entries=8, show_spinner=False)
def gpu_families(url: str) -> list[str]:
    """The NVML families with stored series (empty: no GPU telemetry)."""
    store = _metrics(url)
    return [family for family in c.GPU_FAMILIES if store.series(family)]


# -- requests and traces ---------------------------------------------------------------------


@st.cache_data(ttl=60, max_entries=8, show_spinner=False)
def _replicas_of(url: str) -> dict[str, list[str]]:
    """Target → the engine instance ids its scrapes showed (records name those)."""
    from collectors.replica_targets import replica_targets

    out: dict[str, list[str]] = {}
    for replica, targets in replica_targets(_metrics(url)).targets_by_replica.items():
        for target in targets:
            out.setdefault(target, []).append(replica)
    return out


@st.cache_data(ttl=60, max_entries=8, show_spinner=False)
def replica_names(url: str) -> dict[str, str]:
    """Engine instance id (request records' ``replica``, the spans' ``service.instance.id``)
    → the target every other page names that replica by (``replica-0``), through the
    engines' ``engine_info`` series; ids seen on more than one target are left out."""
    from collectors.replica_targets import replica_targets

    return replica_targets(_metrics(url)).unique()


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _records(url, start, end, tenant, model, target):
    replicas = None if target is None else _replicas_of(url).get(target, [])
    return request_frames.read_requests(
        _store(url), start, end, tenant=tenant, model=model, replicas=replicas
    )


def records(url: str, f: Filters) -> list[RequestRecord]:
    """Request records of the filters' window."""
    return _records(url, f.start_seconds, f.end_seconds, f.tenant, f.model, f.target)


def goodput(url: str, f: Filters, objectives: Objectives) -> GoodputResult | None:
    """Exact goodput over the window's request records (``None``: no records)."""
    chosen = records(url, f)
    if not chosen:
        return None
    return request_frames.exact_goodput(chosen, objectives, f.range_seconds)


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def request_by_id(url: str, request_id: str) -> RequestRecord | None:
    return _store(url).request(request_id)


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def trace(url: str, trace_id: str) -> list[SpanRecord]:
    return _store(url).trace(trace_id)


# -- SLOs ------------------------------------------------------------------------------------


@st.cache_data(ttl=TTL_SECONDS, max_entries=64, show_spinner=False)
def _slo_status(url, spec: SLOSpec, selector: Selector, start, end, step):
    return slo_frames.slo_status(_metrics(url), spec, dict(selector), start, end, step)


def slo_status(url: str, spec: SLOSpec, f: Filters) -> slo_frames.SLOStatus:
    span = (f.start_seconds, f.end_seconds, f.step_seconds)
    return _slo_status(url, spec, _sel(f.selector()), *span)


# -- alerts and incidents --------------------------------------------------------------------


@st.cache_data(ttl=TTL_SECONDS, max_entries=32, show_spinner=False)
def annotations(url: str, start: float, end: float) -> pd.DataFrame:
    store = _store(url)
    return incident_frames.annotation_frame(alert_state_of(store), store, start, end)


@st.cache_data(ttl=TTL_SECONDS, max_entries=32, show_spinner=False)
def incident_list(url: str, start: float, end: float, at: float) -> pd.DataFrame:
    """The stored incidents open or resolved in ``[start, end]``, open first, newest first."""
    chosen = incident_frames.listed_incidents(alert_state_of(_store(url)), start, end)
    return incident_frames.incident_frame(chosen, at)


@st.cache_data(ttl=TTL_SECONDS, max_entries=32, show_spinner=False)
def latest_incident_of(url: str, fingerprint: str) -> int | None:
    return incident_frames.latest_incident_of(alert_state_of(_store(url)), fingerprint)


@dataclass(frozen=True)
class AlertRules:
    """The rules triage uses and their ``window_scale``; ``problem``: why the config's own
    rules could not be loaded (the built-ins are used instead)."""

    rules: tuple[Rule, ...]
    window_scale: float
    problem: str = ""


@st.cache_resource(ttl=60, max_entries=8, show_spinner=False)
def alert_rules(config_path: str | None) -> AlertRules:
    """The rules and window scale from the ``alerts:`` of ``config_path`` (the built-ins when
    it has none, or ``None``), as ``tailwatch incident show`` loads them; a config that does
    not load gives the built-ins and the ``problem``."""
    try:
        loaded = load_config(config_path).alerts
        problem = ""
    except ConfigError as error:
        loaded = load_config(None).alerts
        problem = f"{error}; triage uses the built-in rules"
    return AlertRules(tuple(loaded.rules), loaded.window_scale, problem)


#: The most evaluations an SLO's backtest on the SLOs page takes (its step grows with the range).
SLO_BACKTEST_EVALUATIONS = 288


def slo_backtest_step(start: float, end: float) -> float:
    """The step of an SLO's backtest over ``[start, end]``: whole minutes, at most
    :data:`SLO_BACKTEST_EVALUATIONS` evaluations (5 minutes over a day)."""
    return 60.0 * max(1, math.ceil((end - start) / SLO_BACKTEST_EVALUATIONS / 60.0))


@st.cache_data(ttl=TTL_SECONDS, max_entries=16, show_spinner=False)
def slo_backtest(
    url: str, config_path: str | None, slo_name: str, start: float, end: float
) -> Backtest | None:
    """The burn-rate rules of SLO ``slo_name`` (as the configuration writes them, proposed or
    not) run over ``[start, end]`` by ``tailwatch rules backtest``'s evaluator, on the metrics
    the console reads; ``None`` when the configuration gives the SLO no burn-rate rule."""
    rules = [
        r
        for r in alert_rules(config_path).rules
        if isinstance(r, BurnRateRule) and r.slo == slo_name
    ]
    if not rules:
        return None
    return backtest(rules, _metrics(url), start, end, slo_backtest_step(start, end))


@st.cache_data(ttl=TTL_SECONDS, max_entries=32, show_spinner=False)
def incident_detail(
    url: str, config_path: str | None, incident_id: int, at: float
) -> incident_frames.IncidentDetail | None:
    """Incident ``incident_id`` triaged over the windows of ``tailwatch incident show``."""
    store = _store(url)
    configured = alert_rules(config_path)
    return incident_frames.incident_detail(
        alert_state_of(store), _metrics(url), store, incident_id, configured.rules,
        configured.window_scale, at, store,
    )  # fmt: skip


@st.cache_data(ttl=TTL_SECONDS, max_entries=8, show_spinner=False)
def incident_breakdown(
    url: str, name: str, window: tuple[float, float], baseline: tuple[float, float]
) -> pd.DataFrame:
    """The incident's breakdown by ``name`` (``tenant`` or ``adapter``,
    :mod:`console.incidents.breakdowns`): tenants as the request records over both windows
    name them, adapters as their request series do."""
    dimension = next(d for d in incident_breakdowns.DIMENSIONS if d.name == name)
    metrics = _metrics(url)
    if dimension is incident_breakdowns.TENANT:
        values = tenants(url, baseline[0], window[1])
    else:
        values = incident_breakdowns.adapter_names(metrics)
    return incident_breakdowns.breakdown_frame(
        metrics, dimension, values, TimeWindow(*window), TimeWindow(*baseline)
    )


@st.cache_data(ttl=TTL_SECONDS, max_entries=8, show_spinner=False)
def incident_client_gap_frame(
    url: str, window: tuple[float, float], baseline: tuple[float, float]
) -> pd.DataFrame:
    """The clients' TTFT p95 against the engines' over the incident and its baseline
    (:mod:`console.incidents.client_gap`); empty without client timings."""
    return incident_client_gap.gap_frame(_metrics(url), TimeWindow(*window), TimeWindow(*baseline))


@st.cache_data(ttl=TTL_SECONDS, max_entries=8, show_spinner=False)
def evaluation_health(url: str) -> EvaluationHealth:
    """The evaluator's stored health: when it last evaluated, and the rules failing."""
    return alert_state_of(_store(url)).evaluation_health()


def acknowledge(url: str, incident_id: int, ack: Acknowledgement) -> Acknowledgement | None:
    """Record ``ack`` on incident ``incident_id`` (the page has checked the admin token);
    the acknowledgement it replaced. ``AcknowledgementError``: unknown or resolved."""
    try:
        return alert_state_of(_store(url)).acknowledge(incident_id, ack)
    finally:
        incident_list.clear()
        incident_detail.clear()


def unacknowledge(url: str, incident_id: int) -> Acknowledgement:
    """Undo incident ``incident_id``'s acknowledgement and return it."""
    try:
        return alert_state_of(_store(url)).unacknowledge(incident_id)
    finally:
        incident_list.clear()
        incident_detail.clear()


def save_silence(url: str, silence: Silence) -> None:
    """Store a silence (the page has checked the admin token) and drop cached alert reads."""
    alert_state_of(_store(url)).save_silence(silence)
    incident_list.clear()
    incident_detail.clear()


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _counter_total(url, family, selector: Selector, start, end):
    return _metrics(url).counter_window(family, dict(selector), start, end)


def counter_total(url: str, family: str, f: Filters) -> float | None:
    """A counter's increase over the window, summed across the selected series."""
    return _counter_total(url, family, _sel(f.selector()), f.start_seconds, f.end_seconds)


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _by_target(url, family, selector: Selector, targets, start, end, step):
    """Each target's ``histogram_series`` (at most ``MAX_BREAKDOWN_SERIES``)."""
    chosen = tuple(targets)[: metric_frames.MAX_BREAKDOWN_SERIES]
    return _metrics(url).histogram_series_by_target(
        family, dict(selector), start, end, step, targets=chosen
    )


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _merged_by_target(url, family, selector: Selector, targets, start, end, step):
    """The targets' steps merged, or ``None`` when they do not hold every series the
    selector picks (more targets than one read takes)."""
    chosen = set(tuple(targets)[: metric_frames.MAX_BREAKDOWN_SERIES])
    held = {dict(s.labels).get(c.LABEL_TARGET) for s in _metrics(url).series(family, dict(selector))}  # fmt: skip
    if not held <= chosen:
        return None
    return metric_frames.merged_steps(_by_target(url, family, selector, targets, start, end, step))


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _quantile_by_target(url, family, selector: Selector, targets, start, end, step, q):
    # NOTE: the lines of the first targets only, whoever holds the rest: no series listing
    per_target = _by_target(url, family, selector, targets, start, end, step)
    return metric_frames.quantile_by_label_steps(per_target, q)


def _target_call(fn, url: str, family: str, f: Filters, *extra):  # type: ignore[no-untyped-def]
    """``fn`` over the targets shown (the chosen one, or every target); the small results
    are cached apart, so a warm view does not copy every target's steps out of the cache."""
    targets = (f.target,) if f.target else tuple(catalog(url)["target"])
    selector = {k: v for k, v in f.selector().items() if k != c.LABEL_TARGET}
    return fn(
        url, family, _sel(selector), targets, f.start_seconds, f.end_seconds, f.step_seconds,
        *extra,
    )  # fmt: skip


def quantile_by_target(url: str, family: str, f: Filters, q: float = 0.99) -> pd.DataFrame:
    """``ts, series, ms``: one line per target (the chosen one, or every target)."""
    return _target_call(_quantile_by_target, url, family, f, q)


# -- knob lab --------------------------------------------------------------------------------

#: Seconds a lab read is reused: a running sweep's progress moves this often.
LAB_TTL_SECONDS = 5


def _lab(url: str) -> LabReader | None:
    store = _store(url)
    return store if isinstance(store, LabReader) else None


@st.cache_data(ttl=LAB_TTL_SECONDS, max_entries=32, show_spinner=False)
def lab_runs(url: str, kind: str | None = None) -> list[LabRun] | None:
    """Stored lab runs of ``kind`` (``sweep``/``replay``/all), newest first, at
    most ``LAB_RUN_LIMIT``; ``None`` when the store keeps no lab results (an older schema)."""
    reader = _lab(url)
    if reader is None:
        return None
    return reader.lab_runs(None if kind is None else LabRunKind(kind), limit=LAB_RUN_LIMIT)


def lab_results_changed() -> None:
    """Drop the cached lab reads: a sweep or replay this console started has ended, so its
    run's final status and points are stored (a reader must not wait out the ttl)."""
    lab_runs.clear()
    lab_points.clear()
    lab_ab.clear()


@st.cache_data(ttl=LAB_TTL_SECONDS, max_entries=64, show_spinner=False)
def lab_points(url: str, run_id: int) -> list[LabPoint]:
    """A run's points in measured order (none for a store without a lab)."""
    reader = _lab(url)
    return [] if reader is None else reader.lab_points(run_id)


@st.cache_data(ttl=LAB_TTL_SECONDS, max_entries=32, show_spinner=False)
def lab_ab(url: str, side_a: lab_ab_module.SideKey, side_b: lab_ab_module.SideKey) -> pd.DataFrame:
    """``lab_ab.ab_frame`` of two sides, each ``(run id, value label, rate)``: the points
    of that knob value and rate (every repeat). The bootstrap is cached: ~0.4 s a pair."""

    def side(key: lab_ab_module.SideKey) -> lab_ab_module.Side:
        run_id, label, rate = key
        reader = _lab(url)
        run = None if reader is None else reader.lab_run(run_id)
        points = () if run is None else tuple(
            p for p in lab_points(url, run_id)
            if lab_frames.value_label(run, p.knob_value) == label and p.rate == rate
        )  # fmt: skip
        return lab_ab_module.Side(str(key), points, bool(run and run.simulated), key)

    return lab_ab_module.ab_frame(side(side_a), side(side_b))


@st.cache_data(ttl=TTL_SECONDS, max_entries=32, show_spinner=False)
def knob_changes(url: str, start: float, end: float) -> tuple[KnobChange, ...]:
    """The live knob changes in ``[start, end]`` (``alerts.triage.gather.knob_changes``)."""
    from alerts.triage import knob_changes as gather_knob_changes

    return gather_knob_changes(_metrics(url), start, end)


@st.cache_data(ttl=TTL_SECONDS, max_entries=MAX_ENTRIES, show_spinner=False)
def _data_span(url, family, selector: Selector, start, end, step):
    return metric_frames.data_span(_metrics(url), family, dict(selector), start, end, step)


def data_span(url: str, family: str, f: Filters) -> metric_frames.DataSpan | None:
    """The part of the filters' range ``family``'s selected series hold readings in
    (``metric_frames.data_span``): what a rate over the range is divided by."""
    return _data_span(
        url, family, _sel(f.selector()), f.start_seconds, f.end_seconds, f.step_seconds
    )


def rate_over_data(url: str, family: str, f: Filters, increase: float | None) -> float | None:
    """``increase`` per second over the part of the range that holds ``family``'s readings
    (not the whole range: two minutes of traffic in an hour's range is that traffic's rate)."""
    span = data_span(url, family, f)
    if increase is None or span is None or span.seconds <= 0:
        return None
    return increase / span.seconds


#: Counters whose readings say a target was up and scraped (the first one a target has).
OBSERVED_FAMILIES = (c.REQUESTS_TOTAL, c.GENERATION_TOKENS_TOTAL)


def observed_spans(url: str, f: Filters) -> dict[str, tuple[float, float]]:
    """Target → the first and last reading of its counters in the filters' range (the chosen
    target, or every target; tenant aside: a replica's GPU serves every tenant): the span
    the Cost page bills it for."""
    targets = (f.target,) if f.target else tuple(catalog(url)["target"])
    selector = {k: v for k, v in f.selector().items() if k != c.LABEL_TENANT}
    out = {}
    for target in targets:
        one = {**selector, c.LABEL_TARGET: target}
        for family in OBSERVED_FAMILIES:
            span = _data_span(
                url, family, _sel(one), f.start_seconds, f.end_seconds, f.step_seconds
            )
            if span is not None:
                first = max(f.start_seconds, span.first_seconds)  # NOTE: billed inside the range
                out[target] = (first, max(first, span.last_seconds))
                break
    return out


@st.cache_data(ttl=60, max_entries=8, show_spinner=False)
def nvml_gpus(url: str) -> int:
    """GPUs NVML reported to the collector (distinct devices), 0 without GPU telemetry."""
    series = _metrics(url).series(c.GPU_MEMORY_TOTAL_BYTES)
    return len({(dict(s.labels).get(c.LABEL_TARGET), dict(s.labels).get(c.LABEL_UUID))
                for s in series})  # fmt: skip


def request_rate(url: str, f: Filters) -> float | None:
    """Requests per second over the window's data (``requests_total``'s increase over the
    span its readings cover, :func:`data_span`)."""
    return rate_over_data(url, c.REQUESTS_TOTAL, f, counter_total(url, c.REQUESTS_TOTAL, f))


def _digest(token: str) -> str:
    # NOTE: the cache is keyed on a digest, so a wrong token's answer is never served for
    # the right one, and the token itself is kept out of every key.
    return hashlib.sha256(token.encode()).hexdigest()


@st.cache_data(ttl=LAB_TTL_SECONDS, max_entries=16, show_spinner=False)
def _engine_knobs(engine_url: str, token_digest: str, _token: str) -> lab_knobs.KnobReply:
    return lab_knobs.read_knobs(engine_url, _token)


def engine_knobs(engine_url: str, token: str) -> lab_knobs.KnobReply:
    """The knobs in force at ``engine_url`` (``GET /admin/config``), or why not."""
    return _engine_knobs(engine_url, _digest(token), token)


def set_engine_knobs(
    engine_url: str, token: str, changes: Mapping[str, Any]
) -> lab_knobs.KnobReply:
    """``PATCH /admin/config``; a success drops the cached knobs and knob changes."""
    reply = lab_knobs.patch_knobs(engine_url, token, changes)
    if not reply.error:
        _engine_knobs.clear()
        knob_changes.clear()
        annotations.clear()
    return reply
