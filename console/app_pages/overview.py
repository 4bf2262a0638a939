"""Overview: user experience, engine saturation, traffic shape, hardware (seed Q36's four
groups). Percentiles are merged across the selected replicas by the store and shown with the
bucket interval that bounds each; SLO thresholds are rules, alert transitions annotations."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from collectors import canonical as c
from console import charts, data, metric_frames
from console.incidents import rule_health
from console.page_kit import (
    INCIDENTS_PAGE,
    bound_text,
    empty,
    live_filters,
    ms_value,
    page_context,
    percent,
    rate,
    section,
    show_chart,
    span,
    span_text,
    versus_target,
)
from console.slo_frames import latency_thresholds
from slo import LatencyIndicator, LatencyMetric, Objectives, Outcome, finished_reason_outcome

ctx = page_context()
LATENCY = ((c.TTFT_SECONDS, "TTFT"), (c.ITL_SECONDS, "ITL"), (c.E2E_SECONDS, "E2E"))
#: The traffic shape's heatmaps: family, title, unit.
TRAFFIC = (
    (c.PROMPT_TOKENS, "Prompt length", "tokens"),
    (c.GENERATION_TOKENS, "Output length", "tokens"),
    (c.TTFT_SECONDS, "TTFT", "seconds"),
)


def _percentile_source(url: str, f) -> str:  # type: ignore[no-untyped-def]
    """Where the latency percentiles come from: the replicas' buckets, or the server's
    recording rules (``tailwatch rules export``) for the families that have them."""
    recorded = {
        name: record
        for family, name in LATENCY
        if (record := data.recorded_from(url, family, f)) is not None
    }
    if not recorded:
        return "percentiles merged across the selected replicas from stored buckets"
    names = ", ".join(f"{name} from `{record}`" for name, record in recorded.items())
    return (
        f"percentiles from Prometheus's recording rules ({names}): each step is the recorded "
        "5-minute rate averaged over the step, close to the replicas' own buckets but not "
        "equal to them"
    )


def _objectives() -> Objectives:
    """The strictest threshold per metric of the latency SLOs (ITL left out: records lack
    the worst gap)."""
    best: dict[str, float] = {}
    for spec in ctx.slos:
        ind = spec.indicator
        if isinstance(ind, LatencyIndicator) and ind.metric is not LatencyMetric.ITL:
            name = ind.metric.objective_field
            best[name] = min(best.get(name, math.inf), ind.threshold_seconds)
    return Objectives(**best)


def _strictest_target() -> float | None:
    targets = [s.target for s in ctx.slos if isinstance(s.indicator, LatencyIndicator)]
    return max(targets) if targets else None


def _chart(chart) -> None:
    show_chart(chart, width="stretch")


@dataclass(frozen=True)
class RequestCounts:
    """What the Overview's request figures count, and from which family."""

    family: str
    what: str
    error_name: str
    total: float
    errors: float
    shed: float | None  # None: not observable from this family


def _request_counts(url: str, f) -> RequestCounts:  # type: ignore[no-untyped-def]
    """The API's HTTP responses where an engine counts them (the bundled engine); else, as on
    a vLLM fleet read from Prometheus, the requests the engines finished by reason."""
    responses = data.increase_by(url, c.HTTP_RESPONSES_TOTAL, c.LABEL_CODE, f)
    if sum(responses.values()):
        return RequestCounts(
            c.HTTP_RESPONSES_TOTAL,
            "the API's responses (/v1/ routes; probes and scrapes are not counted)",
            "5xx",
            sum(responses.values()),
            sum(v for k, v in responses.items() if k.startswith("5")),
            responses.get("429", 0.0),
        )
    finished = data.increase_by(url, c.REQUESTS_TOTAL, c.LABEL_FINISHED_REASON, f)
    return RequestCounts(
        c.REQUESTS_TOTAL,
        "the requests the engines finished (their request counter by finished_reason; "
        "no HTTP responses counter is exported)",
        "errors",
        sum(finished.values()),
        sum(v for k, v in finished.items() if finished_reason_outcome(k) is Outcome.ERROR),
        None,
    )


def _goodput_shown(good, objectives: Objectives, url: str, f) -> tuple[str, str]:  # type: ignore[no-untyped-def]
    """The goodput figure and its help: exact from request records; without them (engines
    read from Prometheus keep none), the latency SLOs' attainment from the histograms, which
    is the goodput itself for one objective and an upper bound on it for several."""
    given = ", ".join(f"{k} ≤ {v:g} s" for k, v in objectives.given()) or "no latency SLO"
    if good is not None:
        return percent(good.attainment), f"exact, from request records: good / all requests against {given}"  # fmt: skip
    latency = [s for s in ctx.slos if isinstance(s.indicator, LatencyIndicator)
               and s.indicator.metric is not LatencyMetric.ITL]  # fmt: skip
    shares = [data.slo_status(url, s, f) for s in latency]
    known = [s.attainment for s in shares if not math.isnan(s.attainment)]
    if not known:
        return "—", f"no request records and no latency histograms in this window ({given})"
    if len(known) == 1:
        return percent(known[0]), (
            f"from the latency histograms (no request records): requests within {given}, "
            "to the bucket bounds"
        )
    return "≤ " + percent(min(known)), (
        f"from the latency histograms (no request records): at most the lowest of the SLOs' "
        f"attainments ({given}); request records give the joint figure"
    )


def _read_ahead(url: str, f) -> list:  # type: ignore[no-untyped-def]
    """The page's reads, each as :func:`overview` calls it, costliest first: what
    ``data.reading_ahead`` starts while the page draws (on a metrics server, a day of a large
    fleet is ~50 queries; one after the other, they took longer than the page's 2 s)."""
    objectives = _objectives()
    latency = [s for s in ctx.slos if isinstance(s.indicator, LatencyIndicator)
               and s.indicator.metric is not LatencyMetric.ITL]  # fmt: skip

    def request_span() -> None:
        counts = _request_counts(url, f)
        if counts.total:
            data.data_span(url, counts.family, f)

    def attainment() -> None:
        good = data.goodput(url, f, objectives) if list(objectives.given()) else None
        if good is None:
            for spec in latency:
                data.slo_status(url, spec, f)

    reads = [lambda family=family: data.quantile_by_target(url, family, f)
             for family, _ in LATENCY[:2]]  # fmt: skip
    reads += [request_span, attainment]
    reads += [lambda family=family: data.percentile_frame(url, family, f) for family, _ in LATENCY]
    reads += [
        lambda: data.counter_rate(url, c.HTTP_RESPONSES_TOTAL, f, split_by=c.LABEL_CODE),
        lambda: data.counter_rate(url, c.REQUESTS_TOTAL, f, split_by=c.LABEL_FINISHED_REASON),
        lambda: data.gauge(url, c.REQUESTS_RUNNING, f),
        lambda: data.gauge(url, c.REQUESTS_WAITING, f),
        lambda: data.gauge(url, c.KV_CACHE_USAGE, f, across="max"),
        lambda: data.counter_rate(url, c.PREEMPTIONS_TOTAL, f, per_seconds=60.0),
        lambda: data.ratio(url, c.PREFIX_CACHE_HITS_TOTAL, c.PREFIX_CACHE_QUERIES_TOTAL, f),
    ]
    reads += [lambda family=family: data.heatmap(url, family, f) for family, _, _ in TRAFFIC]
    return reads


@st.fragment(run_every=ctx.live_seconds)
def overview() -> None:
    f = live_filters(ctx)
    with data.reading_ahead(ctx.url, _read_ahead(ctx.url, f)):
        _draw(f)


def _draw(f) -> None:  # type: ignore[no-untyped-def]
    start, end = span(f)
    url = ctx.url
    notes = data.annotations(url, f.start_seconds, f.end_seconds)
    thresholds = latency_thresholds(ctx.slos)
    st.title("Overview")
    st.caption(
        f"{f.range_key} to {end:%Y-%m-%d %H:%M:%S} UTC · step {f.step_seconds:g} s · "
        + _percentile_source(url, f)
    )
    recorded_note = st.empty()  # NOTE: filled once the charts below are read
    _RECORDED.clear()
    health = rule_health.problems(data.evaluation_health(url), data.now())
    if health.any:  # NOTE: a silently broken rule or a stopped evaluator means no alerts
        st.warning(rule_health.headline(health), icon=":material/error:")
        st.page_link(
            INCIDENTS_PAGE,
            label="Alert rules on the Incidents page",
            icon=":material/arrow_forward:",
        )
    section("User experience", "Each percentile's bucket interval bounds the true value.")
    headline = {family: data.window_percentiles(url, family, f) for family, _ in LATENCY}
    if all(v is None for v in headline.values()):
        empty(
            "No latency histograms in this window.",
            "Check that `tailwatch collect` scrapes your engines (targets in tailwatch.yaml) "
            "and widen the time range.",
        )
    else:
        groups = st.columns(3)
        for group, (family, name) in zip(groups, LATENCY, strict=True):
            results = headline[family]
            with group.container(border=True):
                st.markdown(f"**{name}** (ms)")
                cols = st.columns(3)
                for col, p in zip(cols, ("p50", "p95", "p99"), strict=True):
                    result = None if results is None else results[p]
                    col.metric(
                        f"{name} {p}",
                        "—" if result is None else ms_value(result.value),
                        help=None if result is None else f"true value {bound_text(result)}",
                    )
    objectives = _objectives()
    good = data.goodput(url, f, objectives) if list(objectives.given()) else None
    goodput, goodput_help = _goodput_shown(good, objectives, url, f)
    a, b, d, e = st.columns(4)
    a.metric(
        "Goodput attainment",
        goodput,
        delta=versus_target(None if good is None else good.attainment, _strictest_target()),
        help=goodput_help,
        border=True,
    )
    counts = _request_counts(url, f)
    total, errors, shed = counts.total, counts.errors, counts.shed
    per_second = data.rate_over_data(url, counts.family, f, total) if total else None
    counted = data.data_span(url, counts.family, f) if total else None
    over = span_text(counted, f) if total else ""
    b.metric("Request rate", rate(per_second), border=True, help=f"{counts.what}, {over}")
    d.metric(f"Error rate ({counts.error_name})", percent(errors / total if total else None),
             border=True, help=f"{counts.error_name} share of {counts.what}, {over}")  # fmt: skip
    e.metric("429 rate", percent(shed / total if total is not None and shed is not None and total else None),
             border=True, help=f"429 share of {counts.what}, {over}" if shed is not None
             else "the engines' counters do not say which requests were refused with 429")  # fmt: skip
    if total:
        st.caption(f"Request, error and 429 rates {over}.")
        if counted is not None and counted.recorded is not None:
            _RECORDED.add(counted.recorded)
    if not ctx.slos:
        st.caption(
            "No SLOs configured: add `slos:` to tailwatch.yaml and start the console with "
            "`--config` to see attainment and thresholds."
        )
    cols = st.columns(3)
    for col, (family, name) in zip(cols, LATENCY, strict=True):
        with col:
            st.markdown(f"**{name} percentiles**")
            frame = data.percentile_frame(url, family, f)
            if frame.empty:
                _no_data(f"{name} observations")
            else:
                _chart(
                    charts.percentile_chart(
                        frame, start, end, thresholds=thresholds.get(family, ()), annotations=notes
                    )
                )
    cols = st.columns(2)
    for col, (family, name) in zip(cols, (LATENCY[0], LATENCY[1]), strict=True):
        with col:
            st.markdown(f"**{name} p99 per replica** (ms)")
            _series(data.quantile_by_target(url, family, f), start, end, notes, y="ms",
                    title="ms", series="series")  # fmt: skip
    shown, held = metric_frames.MAX_BREAKDOWN_SERIES, len(data.catalog(url)["target"])
    if not f.target and held > shown:
        st.caption(
            f"p99 per replica: the first {shown} of {held} replicas by name. Choose a replica "
            "in the sidebar to see it alone."
        )
    cols = st.columns(2)
    with cols[0]:
        st.markdown("**Responses by status code** (per second)")
        frame = data.counter_rate(url, c.HTTP_RESPONSES_TOTAL, f, split_by=c.LABEL_CODE)
        _series(frame, start, end, notes, y="rate", title="req/s", series="series")
    with cols[1]:
        st.markdown("**Finished requests by reason** (per second)")
        frame = data.counter_rate(url, c.REQUESTS_TOTAL, f, split_by=c.LABEL_FINISHED_REASON)
        _series(frame, start, end, notes, y="rate", title="req/s", series="series")

    section("Engine saturation")
    cols = st.columns(4)
    running = data.gauge(url, c.REQUESTS_RUNNING, f).assign(series="running")
    waiting = data.gauge(url, c.REQUESTS_WAITING, f).assign(series="waiting")
    for frame in (running, waiting):  # NOTE: pd.concat keeps only the attrs they share
        _RECORDED.update(frame.attrs.get(metric_frames.RECORDED, ()))
    with cols[0]:
        st.markdown("**Requests running and waiting**")
        _series(pd.concat([running, waiting]), start, end, notes, y="value", title="requests",
                series="series")  # fmt: skip
    with cols[1]:
        st.markdown("**KV cache usage** (fullest replica)")
        _series(data.gauge(url, c.KV_CACHE_USAGE, f, across="max"), start, end, notes,
                y="value", title="KV usage", percent=True)  # fmt: skip
    with cols[2]:
        st.markdown("**Preemptions** (per minute)")
        frame = data.counter_rate(url, c.PREEMPTIONS_TOTAL, f, per_seconds=60.0)
        _series(frame, start, end, notes, y="rate", title="per min")
    with cols[3]:
        st.markdown("**Prefix cache hit rate**")
        frame = data.ratio(url, c.PREFIX_CACHE_HITS_TOTAL, c.PREFIX_CACHE_QUERIES_TOTAL, f)
        _series(frame, start, end, notes, y="value", title="hit rate", percent=True)

    section("Traffic shape", "Heatmaps from the stored histogram buckets, per step.")
    cols = st.columns(3)
    for col, (family, title, unit) in zip(cols, TRAFFIC, strict=True):
        with col:
            st.markdown(f"**{title}**")
            frame = data.heatmap(url, family, f)
            if frame.empty:
                _no_data(f"{title.lower()} observations")
            else:
                _chart(
                    charts.heatmap_chart(frame, start, end, step_seconds=f.step_seconds, unit=unit)
                )

    section("Hardware")
    gpu = data.gpu_families(url)
    if not gpu:
        empty(
            "No GPU telemetry.",
            "The collector stored no NVML readings: its host has no NVIDIA GPU (or no driver), "
            "or `collector.gpu` is `off` in tailwatch.yaml. Run `tailwatch collect` on the GPU "
            "host with `gpu: auto` or `on`.",
        )
    else:
        shown = [
            (c.GPU_UTILIZATION, "GPU utilisation", True, "max"),
            (c.GPU_MEMORY_USED_BYTES, "GPU memory used (bytes)", False, "sum"),
            (c.GPU_POWER_WATTS, "Power (W)", False, "sum"),
            (c.GPU_TEMPERATURE_CELSIUS, "Temperature (°C, hottest)", False, "max"),
        ]
        cols = st.columns(4)
        for col, (family, title, is_percent, across) in zip(cols, shown, strict=True):
            with col:
                st.markdown(f"**{title}**")
                if family not in gpu:
                    st.caption("not reported by this GPU")
                    continue
                _series(data.gauge(url, family, f, across=across), start, end, notes,
                        y="value", title=title, percent=is_percent)  # fmt: skip
    if _RECORDED:
        recorded_note.caption(_recorded_note(_RECORDED))


def _recorded_note(names: set[str]) -> str:
    """What the counts and saturation charts were read from, where a record answered."""
    listed = ", ".join(f"`{n}`" for n in sorted(names))
    return (
        f"Counts, rates and saturation from Prometheus's recording rules ({listed}): each "
        "step is the recorded value averaged over the step, close to the replicas' own series "
        "but not equal to them; the rest from the replicas' series."
    )


def _no_data(what: str) -> None:
    if ctx.filters.tenant is not None:
        # NOTE: engines break only some families down by tenant (the bundled one: TTFT,
        # tokens and finished requests), so a tenant filter empties the others.
        st.caption(f"no per-tenant {what} in this window: this family has no tenant breakdown")
    else:
        st.caption(f"no {what} in this window")


#: The server's records the charts drawn so far were read from (``metric_frames.RECORDED``).
_RECORDED: set[str] = set()


def _series(frame, start, end, notes, **kwargs) -> None:
    _RECORDED.update(frame.attrs.get(metric_frames.RECORDED, ()))
    if frame.empty:
        _no_data("data")
        return
    _chart(charts.series_chart(frame, start, end, annotations=notes, **kwargs))


overview()
