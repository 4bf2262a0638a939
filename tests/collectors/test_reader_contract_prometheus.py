"""The reader contract on real servers: :class:`PrometheusReader` over Debian's Prometheus
(2.42, backfilled with promtool) and Debian's VictoriaMetrics (imported), each compared read by
read with :class:`FakeMetricsReader` holding the same history.

One history, in engine metric names (vLLM, SGLang and the bundled engine's per-tenant series),
holds the data sets of ``test_reader_contract.py``, each under its own ``model`` so that they
do not mix: ``m`` (two targets, a reset, a late start), ``lay`` (a third target with other
buckets), ``chg`` (a restart with new buckets), ``flag`` (SGLang beside vLLM: other semantic
flags), ``ten`` (per-tenant series beside the fleet's). The fake is fed the same scrapes
through the collector's own parser and dialect table, so the two sides share no code but
``slo``. Every read of :data:`READS` must give the fake's answer (errors included, word for
word), on Prometheus under ``prometheus-2``, on VictoriaMetrics under ``exact``; a read that
cannot is listed in :data:`DIFFERENCES` with the reason, and the test checks that it does
differ, and how.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
from prometheus_client.openmetrics.parser import text_string_to_metric_families

from alerts import evaluate_rule
from alerts.rules import BUILTIN_RULES
from collectors.dialects import normalise
from collectors.prometheus import PrometheusReader, PrometheusSourceError
from collectors.store import LayoutChangeError, ScrapeRecord, SemanticsMismatchError
from collectors.store.fake import FakeMetricsReader
from collectors.store.protocols import MetricsReader
from console import metric_frames
from slo import ClassicHistogram, LayoutMismatchError, QuantileResult
from tests.collectors.metrics_servers import (
    Point,
    backfilled_prometheus,
    exposition,
    imported_victoriametrics,
)

#: Where the history starts: two days ago on a whole hour (VictoriaMetrics refuses samples
#: older than its retention, and a backfilled block is best away from "now").
T = float((int(time.time()) // 3600 - 48) * 3600)
B = (0.1, 1.0, math.inf)
OTHER = (0.5, math.inf)
TTFT, ITL, TOKENS, REQUESTS = "ttft_seconds", "itl_seconds", "prompt_tokens_total", "requests_total"
RUNNING = "requests_running"
TYPES = {
    "vllm:time_to_first_token_seconds": "histogram",
    "vllm:inter_token_latency_seconds": "histogram",
    "sglang:inter_token_latency_seconds": "histogram",
    "vllm:prompt_tokens": "counter",
    "sglang:prompt_tokens": "counter",
    "vllm:request_success": "counter",
    "tailwatch:tenant_requests": "counter",
    "vllm:num_requests_running": "gauge",
    "up": "gauge",
}

Snap = tuple[float, tuple[float, ...], float, float]  # time, cumulative counts, sum, counter
SCRAPES: dict[str, list[Snap]] = {  # as in test_reader_contract.py
    "a": [
        (0.0, (1, 2, 3), 1.0, 10.0),
        (30.0, (2, 4, 6), 2.5, 20.0),
        (60.0, (0, 1, 1), 0.5, 5.0),
        (90.0, (1, 2, 3), 1.5, 15.0),
        (120.0, (1, 3, 5), 3.0, 30.0),
    ],
    "b": [
        (10.0, (0, 0, 1), 0.25, 0.0),
        (40.0, (1, 1, 2), 1.0, 4.0),
        (70.0, (1, 2, 4), 2.0, 8.0),
        (100.0, (2, 3, 6), 3.0, 12.0),
        (130.0, (2, 3, 6), 3.0, 12.0),
    ],
}


def _histogram(name, labels, t, bounds, counts, sum_value) -> list[Point]:
    out = [
        Point(f"{name}_bucket", (*labels, ("le", _le(b))), float(n), T + t)
        for b, n in zip(bounds, counts, strict=True)
    ]
    out.append(Point(f"{name}_sum", labels, sum_value, T + t))
    out.append(Point(f"{name}_count", labels, float(counts[-1]), T + t))
    return out


def _le(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(bound)


def _history() -> list[Point]:
    points: list[Point] = []

    def snaps(model, target, items, bounds=B, ttft="vllm:time_to_first_token_seconds",
              tokens="vllm:prompt_tokens_total"):  # fmt: skip
        labels = (("instance", target), ("model_name", model))
        for t, counts, sum_value, value in items:
            if ttft:
                points.extend(_histogram(ttft, labels, t, bounds, counts, sum_value))
            if tokens:
                points.append(Point(tokens, labels, value, T + t))

    for target, items in SCRAPES.items():
        snaps("m", target, items)
        for k, (t, *_) in enumerate(items):  # running: 1, 4, 2, 0, 3 (a) and 2, 0, 3, 1, 4 (b)
            running = (1 + 3 * k) % 5 if target == "a" else (2 + 3 * k) % 5
            labels = (("instance", target), ("model_name", "m"))
            points.append(Point("vllm:num_requests_running", labels, float(running), T + t))
        snaps("lay", target, items)
    snaps("lay", "c", [(15.0, (1, 2), 0.5, 0.0), (45.0, (2, 4), 1.0, 1.0)], bounds=OTHER)
    snaps("chg", "d", [(0.0, (1, 2, 3), 1.0, 0.0), (30.0, (2, 4, 6), 2.0, 1.0)])
    snaps("chg", "d", [(60.0, (1, 1), 0.5, 2.0), (90.0, (2, 3), 1.5, 3.0)], bounds=OTHER)
    snaps("flag", "a", SCRAPES["a"], ttft="vllm:inter_token_latency_seconds")
    snaps("flag", "b", SCRAPES["b"], ttft="sglang:inter_token_latency_seconds",
          tokens="sglang:prompt_tokens_total")  # fmt: skip
    for t, k in ((0.0, 1), (60.0, 2)):
        fleet = (("finished_reason", "stop"), ("instance", "a"), ("model_name", "ten"))
        points.append(Point("vllm:request_success_total", fleet, 10.0 * k, T + t))
        for tenant, n in (("acme", 4.0), ("zeta", 6.0)):
            labels = (("instance", "a"), ("model_name", "ten"), ("tenant", tenant))
            points.append(Point("tailwatch:tenant_requests_total", labels, n * k, T + t))
    for target in ("a", "b", "c", "d"):
        times = sorted({p.t for p in points if ("instance", target) in p.labels})
        points += [Point("up", (("instance", target),), 1.0, t) for t in times]
    points.append(Point("up", (("instance", "a"),), 0.0, T + 45.0))  # a failed scrape
    return points


def _fake(points: list[Point]) -> FakeMetricsReader:
    """The fake fed scrape by scrape through the collector's parser and dialect table."""
    scrapes: dict[tuple[str, float], list[Point]] = {}
    for p in points:
        labels = dict(p.labels)
        target = labels.pop("instance")
        scrapes.setdefault((target, p.t), []).append(
            Point(p.name, tuple(labels.items()), p.value, p.t)
        )
    records = []
    for (target, t), items in sorted(scrapes.items(), key=lambda kv: (kv[0][1], kv[0][0])):
        up = [p for p in items if p.name == "up"]
        if up and up[0].value == 0:
            records.append(ScrapeRecord(target, t, is_up=False, error="down in Prometheus (up=0)"))
            continue
        text = exposition([p for p in items if p.name != "up"], TYPES)
        families = list(text_string_to_metric_families(text))
        records.append(ScrapeRecord.from_normalised(target, t, normalise(families, target)))
    return FakeMetricsReader(records)


# -- the reads -------------------------------------------------------------------------------

Read = Callable[[MetricsReader, str], object]


def _gauge_rows(reader, labels, start, end, step, across) -> list[tuple[float, float]]:
    """The console's gauge chart (``gauge_frame``): on a server one ``query_range``."""
    frame = metric_frames.gauge_frame(reader, RUNNING, labels, start, end, step, across=across)
    return [
        (ts.timestamp() - T, float(v)) for ts, v in zip(frame["ts"], frame["value"], strict=True)
    ]


def _m(model: str, **labels: str) -> dict[str, str]:
    return {"model": model, **labels}


READS: dict[str, Read] = {
    # windows: resets corrected, targets merged, a late start, empty windows
    "window-merged": lambda r, s: r.histogram_window(TTFT, _m("m"), T, T + 120, semantics=s),
    "window-one-target": lambda r, s: r.histogram_window(TTFT, _m("m", target="a"), T, T + 120, semantics=s),
    "window-inner": lambda r, s: r.histogram_window(TTFT, _m("m"), T + 45, T + 100, semantics=s),
    "counter-merged": lambda r, s: r.counter_window(TOKENS, _m("m"), T, T + 120, semantics=s),
    "counter-inner": lambda r, s: r.counter_window(TOKENS, _m("m"), T + 45, T + 100, semantics=s),
    "counter-to-reset": lambda r, s: r.counter_window(TOKENS, _m("m"), T, T + 60, semantics=s),
    "counter-from-reset": lambda r, s: r.counter_window(TOKENS, _m("m", target="a"), T + 60, T + 120, semantics=s),
    "counter-unaligned": lambda r, s: r.counter_window(TOKENS, _m("m"), T + 15, T + 115, semantics=s),
    "window-one-snapshot": lambda r, s: r.histogram_window(TTFT, _m("m", target="a"), T + 120, T + 200, semantics=s),
    "window-no-series": lambda r, s: r.counter_window(TOKENS, {"target": "nope"}, T, T + 120, semantics=s),
    "window-empty": lambda r, s: [r.histogram_window(TTFT, _m("m"), T + 60, T + 60, semantics=s),
                                  r.counter_window(TOKENS, _m("m"), T + 90, T + 30, semantics=s)],
    "window-late-start": lambda r, s: r.histogram_window(TTFT, _m("m", target="b"), T + 40, T + 100, semantics=s),
    # step series
    "histogram-series": lambda r, s: r.histogram_series(TTFT, _m("m"), T, T + 240, 60, semantics=s),
    "counter-series": lambda r, s: r.counter_series(TOKENS, _m("m"), T, T + 240, 60, semantics=s),
    "counter-series-50s": lambda r, s: r.counter_series(TOKENS, _m("m", target="b"), T, T + 150, 50, semantics=s),
    "quantile-series": lambda r, s: r.quantile_series(TTFT, _m("m"), T, T + 240, (0.5, 0.9), 60, semantics=s),
    # per target, as the per-replica rules read them (one query for every target)
    "windows-by-target": lambda r, s: r.histogram_windows_by_target(TTFT, _m("m"), T, T + 120, semantics=s),
    "counters-by-target": lambda r, s: r.counter_windows_by_target(TOKENS, _m("m"), T, T + 120, semantics=s),
    "counter-series-by-target": lambda r, s: r.counter_series_by_target(TOKENS, _m("m"), T, T + 240, 60, semantics=s),
    "histogram-series-chosen-targets": lambda r, s: r.histogram_series_by_target(TTFT, _m("m"), T, T + 240, 60, targets=["a", "nope"], semantics=s),
    "by-target-layouts-apart": lambda r, s: r.histogram_windows_by_target(TTFT, _m("lay"), T, T + 60, semantics=s),
    "by-target-layout-change": lambda r, s: r.histogram_windows_by_target(TTFT, _m("chg"), T, T + 90, semantics=s),
    "by-target-flags": lambda r, s: r.counter_windows_by_target(TOKENS, _m("flag"), T, T + 120, semantics=s),
    "by-target-no-series": lambda r, s: r.counter_windows_by_target(TOKENS, {"target": "nope"}, T, T + 120, semantics=s),
    "scrapes-by-target": lambda r, s: (r.scrapes_by_target(["a", "b", "nobody"], T, T + 200), r.scrapes_by_target([])),
    # gauges averaged per step within a series, then added (or maxed) across series
    "gauge-sum": lambda r, s: _gauge_rows(r, _m("m"), T, T + 240, 60, "sum"),
    "gauge-max": lambda r, s: _gauge_rows(r, _m("m"), T, T + 240, 60, "max"),
    "gauge-cut-steps": lambda r, s: _gauge_rows(r, _m("m"), T + 15, T + 115, 50, "sum"),
    "gauge-one-step": lambda r, s: _gauge_rows(r, _m("m", target="b"), T + 5, T + 50, 60, "max"),
    "gauge-no-series": lambda r, s: _gauge_rows(r, {"target": "nope"}, T, T + 120, 60, "sum"),
    # what may not be merged
    "layouts-differ": lambda r, s: r.histogram_window(TTFT, _m("lay"), T, T + 60, semantics=s),
    "layouts-differ-series": lambda r, s: r.histogram_series(TTFT, _m("lay"), T, T + 120, 60, semantics=s),
    "layouts-apart": lambda r, s: r.histogram_window(TTFT, _m("lay", target="c"), T, T + 60, semantics=s),
    "layouts-counter": lambda r, s: r.counter_window(TOKENS, _m("lay"), T, T + 60, semantics=s),
    "layout-change": lambda r, s: r.histogram_window(TTFT, _m("chg"), T, T + 90, semantics=s),
    "layout-change-series": lambda r, s: r.histogram_series(TTFT, _m("chg"), T, T + 120, 60, semantics=s),
    "layout-new-only": lambda r, s: r.histogram_window(TTFT, _m("chg"), T + 60, T + 90, semantics=s),
    "layout-old-only": lambda r, s: r.histogram_window(TTFT, _m("chg"), T, T + 30, semantics=s),
    "flags-counter": lambda r, s: r.counter_window(TOKENS, _m("flag"), T, T + 120, semantics=s),
    "flags-histogram": lambda r, s: r.quantile_series(ITL, _m("flag"), T, T + 120, semantics=s),
    "flags-one-target": lambda r, s: r.counter_window(TOKENS, _m("flag", target="b"), T, T + 120, semantics=s),
    "flags-series": lambda r, s: sorted(i.flags for i in r.series(TOKENS, _m("flag"))),
    "tenant-unnamed": lambda r, s: (r.series(REQUESTS, _m("ten")),
                                    r.counter_window(REQUESTS, _m("ten"), T, T + 60, semantics=s)),
    "tenant-named": lambda r, s: (r.series(REQUESTS, _m("ten", tenant="acme")),
                                  r.counter_window(REQUESTS, _m("ten", tenant="zeta"), T, T + 60, semantics=s)),
    "tenant-nobody": lambda r, s: r.series(REQUESTS, _m("ten", tenant="nobody")),
    "unknown-family": lambda r, s: (r.series("ttft"), r.histogram_window("ttft", None, T, T + 60, semantics=s)),
    # raw reads
    "series": lambda r, s: sorted(r.series(TTFT, _m("m")), key=lambda i: i.labels),
    "samples": lambda r, s: r.samples(TOKENS, _m("m", target="a"), T + 30, T + 120),
    "samples-none-after": lambda r, s: r.samples(TOKENS, _m("m", target="a"), T + 121, T + 200),
    "samples-of-a-histogram": lambda r, s: r.samples(TTFT, _m("m", target="b"), T, T + 200),
    "snapshots": lambda r, s: r.snapshots(TTFT, _m("m"), T + 40, T + 70),
    "scrapes": lambda r, s: (r.scrapes("a"), r.scrapes("a", T + 30, T + 45), r.scrapes("nobody")),
    # argument errors
    "bad-semantics": lambda r, s: r.histogram_window(TTFT, None, T, T + 60, semantics="prometheus-4"),
    "bad-step": lambda r, s: r.counter_series(TOKENS, None, T, T + 60, 0, semantics=s),
    "too-many-steps": lambda r, s: r.counter_series(TOKENS, None, T, T + 1e9, 1, semantics=s),
}  # fmt: skip


@dataclass(frozen=True)
class Difference:
    """A read whose answer on a server differs from the fake's, and why: ``check`` asserts
    what the server answers instead (given the server's and the fake's answers)."""

    reason: str
    check: Callable[[object, object], None]


def _born_inside(extra: tuple[float, ...], extra_sum: float, step: int | None = None):
    """VictoriaMetrics counted ``extra`` (the first snapshot of a series born inside the
    range) on top of the fake's answer, in the window or in step ``step`` of a series."""

    def check(server: object, fake: object) -> None:
        if step is not None:  # a step series: that step differs, the others are the fake's
            for k, (got, want) in enumerate(zip(server, fake, strict=True)):
                if k != step:
                    _same(got, want, f"step {k}")
            server, fake = server[step][1], fake[step][1]
        if isinstance(fake, tuple):  # quantiles: those of the fake's step plus ``extra``
            # the fake's first step of "histogram-series" is (2, 4, 5), sum 2.75
            counts = tuple(x + y for x, y in zip((2.0, 4.0, 5.0), extra, strict=True))
            merged = ClassicHistogram(B, counts, 2.75 + extra_sum)
            assert fake == tuple(
                ClassicHistogram(B, (2.0, 4.0, 5.0), 2.75).quantile(q) for q in (0.5, 0.9)
            )
            _same(server, tuple(merged.quantile(q) for q in (0.5, 0.9)), "quantiles")
            return
        counts = [
            g - w for g, w in zip(server.cumulative_counts, fake.cumulative_counts, strict=True)
        ]
        assert counts == list(extra), counts
        assert math.isclose(server.sum_value - fake.sum_value, extra_sum)

    return check


def _born_inside_targets(born: dict[str, tuple[tuple[float, ...], float]]):
    """:func:`_born_inside` (``extra``, ``extra_sum``) for the windows of the targets in
    ``born`` of a by-target read; the other targets' windows equal the fake's."""

    def check(server: object, fake: object) -> None:
        assert isinstance(server, dict) and isinstance(fake, dict) and set(server) == set(fake)
        for key in fake:
            if key in born:
                _born_inside(*born[key])(server[key], fake[key])
            else:
                _same(server[key], fake[key], key)

    return check


#: VictoriaMetrics' increase() does not extrapolate and starts from the last sample before the
#: range, as the store's exact window; but a series with no sample before the range (born
#: inside it) counts its first sample as an increase from zero, where the exact window starts
#: from that sample (metricsql's rollupIncreasePure). Target b's +Inf bucket starts at 1, c's
#: buckets at (1, 2).
FIRST_SAMPLE_FROM_ZERO = (
    "VictoriaMetrics' increase() counts the first sample of a series born inside the range "
    "as an increase from zero; the exact window starts from that sample"
)

#: Reads that cannot equal the fake's, per server, with the reason.
DIFFERENCES: dict[str, dict[str, Difference]] = {
    "prometheus": {},
    "victoriametrics": {
        "window-merged": Difference(FIRST_SAMPLE_FROM_ZERO, _born_inside((0, 0, 1), 0.25)),
        "layouts-apart": Difference(FIRST_SAMPLE_FROM_ZERO, _born_inside((1, 2), 0.5)),
        "histogram-series": Difference(FIRST_SAMPLE_FROM_ZERO, _born_inside((0, 0, 1), 0.25, 0)),
        "quantile-series": Difference(FIRST_SAMPLE_FROM_ZERO, _born_inside((0, 0, 1), 0.25, 0)),
        "windows-by-target": Difference(
            FIRST_SAMPLE_FROM_ZERO, _born_inside_targets({"b": ((0, 0, 1), 0.25)})
        ),
        "by-target-layouts-apart": Difference(
            FIRST_SAMPLE_FROM_ZERO,
            _born_inside_targets({"b": ((0, 0, 1), 0.25), "c": ((1, 2), 0.5)}),
        ),
    },
}


# -- fixtures --------------------------------------------------------------------------------

HISTORY = _history()


@pytest.fixture(scope="module")
def fake() -> FakeMetricsReader:
    return _fake(HISTORY)


@pytest.fixture(scope="module", params=["prometheus", "victoriametrics"])
def server(
    request: pytest.FixtureRequest, tmp_path_factory
) -> Iterator[tuple[str, PrometheusReader]]:
    directory = tmp_path_factory.mktemp(request.param)
    start = (
        backfilled_prometheus(directory, HISTORY, TYPES)
        if request.param == "prometheus"
        else imported_victoriametrics(directory, HISTORY)
    )
    with start as running, PrometheusReader(running.url) as reader:
        yield request.param, reader


# -- the tests -------------------------------------------------------------------------------


def test_the_reader_states_the_servers_semantics(server) -> None:
    kind, reader = server
    assert isinstance(reader, MetricsReader)
    want = {"prometheus": "prometheus-2", "victoriametrics": "exact"}[kind]
    assert reader.semantics.value == want


@pytest.mark.parametrize("name", sorted(READS))
def test_each_read_equals_the_fakes(server, fake, name: str) -> None:
    kind, reader = server
    semantics = reader.semantics.value
    read = READS[name]
    want, got = _outcome(read, fake, semantics), _outcome(read, reader, semantics)
    difference = DIFFERENCES[kind].get(name)
    if difference is None:
        _same(got, want, name)
    else:
        with pytest.raises(AssertionError):
            _same(got, want, name)
        difference.check(got, want)


def test_hand_worked_figures_hold_on_the_server(server) -> None:
    """Figures of test_reader_contract.py, not only agreement with the fake."""
    _, reader = server
    # 2.x takes the sample at the range's start (60): 5 -> 15 -> 30; the exact window too
    assert reader.counter_window(TOKENS, _m("m", target="a"), T + 60, T + 120) == 25.0
    histogram = reader.histogram_window(TTFT, _m("chg"), T + 60, T + 90)
    assert histogram is not None and histogram.upper_bounds == OTHER
    with pytest.raises(LayoutChangeError) as caught:
        reader.histogram_window(TTFT, _m("chg"), T, T + 90)
    assert (caught.value.target, caught.value.first_new_seconds) == ("d", T + 60)


def test_exact_is_answered_with_the_servers_own_rule(server, fake) -> None:
    """Every reader's default, ``semantics="exact"``, reads as the server evaluates; asking
    for another Prometheus's rule is refused, since no query can give it."""
    _, reader = server
    own = reader.semantics.value
    by_default = reader.counter_window(TOKENS, _m("m"), T + 15, T + 115)
    assert by_default == fake.counter_window(TOKENS, _m("m"), T + 15, T + 115, semantics=own)
    other = "prometheus-3" if own != "prometheus-3" else "prometheus-2"
    with pytest.raises(ValueError, match=f"evaluates windows as '{own}'"):
        reader.counter_window(TOKENS, _m("m"), T, T + 60, semantics=other)


def test_a_server_window_needs_finite_edges(server) -> None:
    """NOTE: the store's exact window takes infinite edges (nothing lies outside them); a
    server evaluates a range at a time, so the reader refuses them."""
    _, reader = server
    with pytest.raises(ValueError, match="finite"):
        reader.counter_window(TOKENS, None, -math.inf, T + 120)


def test_user_mistakes_are_one_clear_error(server, tmp_path) -> None:
    _, reader = server
    with pytest.raises(ValueError, match="not a label name"):
        reader.series(TTFT, {"bad-name": "x"})
    with pytest.raises(PrometheusSourceError, match="expected http"):
        PrometheusReader("prometheus:9090")
    down = PrometheusReader("http://127.0.0.1:1", timeout=2)
    with pytest.raises(PrometheusSourceError, match=r"cannot reach Prometheus at http://127\.0"):
        down.series(TTFT)
    with pytest.raises(PrometheusSourceError, match=r"refused .*(parse|syntax|unexpected)"):
        reader.api.query("sum(", T)
    wrong = PrometheusReader(reader.api.url + "/nope")
    with pytest.raises(PrometheusSourceError, match=r"HTTP 4\d\d|did not answer like"):
        wrong.series(TTFT)
    for opened in (down, wrong):
        opened.close()


def test_the_builtin_rules_evaluate_alike(server, fake) -> None:
    """The evaluator's reads, rule by rule, at the end of the history: the same instances
    (or the same error) on the server as on the fake. Rules read with the default
    semantics, which the fake answers exactly and the server with its own rule, so the fake
    is asked with the server's."""
    _, reader = server

    class AsServer:  # the fake, reading every window with the server's semantics
        def __getattr__(self, name: str):
            method = getattr(fake, name)
            if name.endswith(("_window", "_series")):
                return lambda *a, **k: method(*a, **{**k, "semantics": reader.semantics})
            return method

    for rule in BUILTIN_RULES:
        want = _outcome(lambda r, _s, rule=rule: evaluate_rule(rule, r, T + 120), AsServer(), "")
        got = _outcome(lambda r, _s, rule=rule: evaluate_rule(rule, r, T + 120), reader, "")
        _same(got, want, rule.name)


def test_every_read_pushes_down(server) -> None:
    """A window is one query per engine metric, whatever the number of samples: nothing of
    the history is copied to answer it. A fleet histogram read is preceded by one layout
    check of its range, which is remembered: a read inside a checked range sends none, and a
    read past it checks only the part after it."""
    reader = PrometheusReader(server[1].api.url)  # NOTE: nothing checked by an earlier test
    reader.semantics, reader.metric_names()  # found once, then cached
    reader.counter_window(TOKENS, _m("m"), T, T + 60)  # which dialects hold series: cached
    before = reader.api.num_requests
    reader.histogram_window(TTFT, _m("m"), T, T + 120)  # check [T, T + 120], then the window
    reader.counter_series(TOKENS, _m("m"), T, T + 240, 60)
    reader.quantile_series(TTFT, _m("m"), T, T + 240, (0.5, 0.99), 15)  # check past T + 120
    assert reader.api.num_requests - before == 5
    checks = []
    reader.api.query = _recording(reader.api.query, checks)
    reader.histogram_window(TTFT, _m("m"), T + 60, T + 180)
    assert checks == ["increase"], "a range already checked is not checked again"
    checks.clear()
    reader.histogram_window(TTFT, _m("m"), T + 300, T + 420)  # apart from [T, T + 240]
    reader.histogram_window(TTFT, _m("m"), T + 200, T + 330)  # joins the two
    reader.histogram_window(TTFT, _m("m"), T + 30, T + 400)
    assert checks == ["count_over_time", "increase"] * 2 + ["increase"], (
        "ranges that overlap make one checked range"
    )


@pytest.mark.parametrize("rows_seconds", [0.0, 3600.0], ids=["rows-per-series", "on-server"])
def test_a_layout_change_after_a_checked_range_is_found(server, fake, rows_seconds) -> None:
    """A range found to hold one layout is remembered; a later read past it checks the part
    after it against that layout, and a change there is not summed into one histogram (read
    per target, it gives the fake's answer: the change named). Both ways of checking: from a
    row per bucket series (long ranges), and on the server (short ones)."""
    reader = PrometheusReader(server[1].api.url)
    reader.layout_recheck_seconds = 0.0  # NOTE: only the part after the checked range
    reader.layout_rows_seconds = rows_seconds
    semantics = reader.semantics.value
    read = READS["layout-old-only"]
    assert _outcome(read, reader, semantics) == _outcome(read, fake, semantics)
    for name in ("layout-change", "layout-change-series"):
        want = _outcome(READS[name], fake, semantics)
        _same(_outcome(READS[name], reader, semantics), want, name)
    for name in ("layouts-differ", "layouts-differ-series", "layout-new-only", "window-merged"):
        fresh = PrometheusReader(server[1].api.url)
        fresh.layout_rows_seconds = rows_seconds
        want = _outcome(READS[name], fake, semantics)
        got, difference = _outcome(READS[name], fresh, semantics), DIFFERENCES[server[0]].get(name)
        if difference is None:
            _same(got, want, name)
        else:
            difference.check(got, want)


def test_a_gauge_chart_is_one_query(server, fake) -> None:
    """The console's gauge chart is averaged and added on the server: one ``query_range``
    for the whole steps, whatever the number of readings, and the fake's figures."""
    reader = PrometheusReader(server[1].api.url)
    reader.semantics, reader.metric_names(), reader.series(RUNNING, _m("m"))
    before = reader.api.num_requests
    rows = _gauge_rows(reader, _m("m"), T, T + 240, 60, "sum")
    assert reader.api.num_requests - before == 1
    # a at 30, 60 | 90, 120: 4, 2 | 0, 3 and b at 10, 40 | 70, 100 | 130: 2, 0 | 3, 1 | 4
    # (a's reading at 0 is on the range's open edge): means 3 + 1, 1.5 + 2, 4
    assert rows == _gauge_rows(fake, _m("m"), T, T + 240, 60, "sum") == [
        (60.0, 4.0), (120.0, 3.5), (180.0, 4.0)
    ]  # fmt: skip


def test_a_mean_per_replica_reads_only_sums_and_counts(server, fake) -> None:
    """``histogram_means_by_target``: each target's window sum and count, as the fake's
    windows have them, from one query of the ``_sum`` and ``+Inf`` series alone."""
    reader = PrometheusReader(server[1].api.url)
    reader.semantics, reader.metric_names(), reader.series(TTFT, _m("m"))
    semantics = reader.semantics.value
    windows = fake.histogram_windows_by_target(TTFT, _m("m"), T, T + 120, semantics=semantics)
    before = reader.api.num_requests
    got = reader.histogram_means_by_target(TTFT, _m("m"), T, T + 120)
    assert reader.api.num_requests - before == 1
    assert got is not None and set(got) == set(windows) and windows
    for target, window in windows.items():
        if DIFFERENCES[server[0]].get("window-merged") is None:
            _same(got[target], (window.sum_value, window.cumulative_counts[-1]), target)
    assert reader.histogram_means_by_target(TTFT, _m("m"), T + 120, T + 120) is None


def test_the_latest_reading_is_one_row_from_the_server(server, fake) -> None:
    """``latest_reading_seconds``: what the readings' latest time is, from one query (of the
    family's names, the one the server holds series of: vLLM's, not SGLang's), and read from the readings only where the
    server's lookback holds none and the range is longer (Prometheus; VictoriaMetrics'
    ``tlast_over_time`` takes any range)."""
    reader = PrometheusReader(server[1].api.url)
    reader.semantics, reader.metric_names(), reader.series(TOKENS, _m("m"))
    reader.is_victoriametrics  # noqa: B018 (asked once, before counting)
    windows = [
        (_m("m"), T, T + 200),  # b's last reading, 130
        (_m("m", target="a"), T, T + 200),  # a's, 120
        (_m("m"), T + 30, T + 95),  # 90, inside
        (_m("m"), T + 131, T + 200),  # none after the last reading
        (_m("m"), T - 100, T - 1),  # none before the first
        (_m("m", target="nobody"), T, T + 200),
    ]
    for labels, start, end in windows:
        readings = fake.samples(TOKENS, labels, start, end)
        times = [t for series in readings.values() for t, _ in series]
        reader._held_sources(TOKENS, labels)  # NOTE: which names are held is asked once
        before = reader.api.num_requests
        got = reader.latest_reading_seconds(TOKENS, labels, start, end)
        assert got == (max(times) if times else None), (labels, start - T, end - T, got)
        if times:
            assert reader.api.num_requests - before == 1, (labels, start - T, end - T)
    # nothing in the five minutes before the end: the readings are read on Prometheus
    assert reader.latest_reading_seconds(TOKENS, _m("m"), T, T + 1000) == T + 130
    assert reader.latest_reading_seconds(TOKENS, _m("m"), T + 200, T + 100) is None


class _Readings:
    """A server's reader without ``latest_reading_seconds``: the readings are read."""

    def __init__(self, reader: PrometheusReader) -> None:
        self.reader = reader

    def counter_series(self, *args):
        return self.reader.counter_series(*args)

    def samples(self, *args):
        return self.reader.samples(*args)


@pytest.mark.parametrize(
    ("labels", "start", "end", "step"),
    [
        (_m("m"), T + 30, T + 150, 30),  # readings before the range
        (_m("m", target="a"), T - 90, T + 150, 30),  # the data starts inside the range
        (_m("m"), T - 600, T + 1200, 60),  # and stops inside it, beyond the lookback
    ],
)
def test_a_rates_span_from_the_latest_readings_is_the_readings_own(
    server, labels, start, end, step
) -> None:
    """The span a rate is over (``console.metric_frames.data_span``), placed on the scrapes
    from the server's one-row answers, is the one the readings themselves give."""
    reader = PrometheusReader(server[1].api.url)
    pushed = metric_frames.data_span(reader, TOKENS, labels, start, end, step)
    read = metric_frames.data_span(_Readings(reader), TOKENS, labels, start, end, step)
    assert pushed is not None and pushed == read


def test_final_steps_are_asked_for_once(server) -> None:
    """A step series read again, shifted by a step on the step grid (the next evaluation's
    baseline), asks the server only for the new step, once the others are old enough to be
    final; steps newer than that are asked for again. The answers are those of a reader that
    keeps none."""
    asked: list[tuple[float, float]] = []
    now = [T + 10_000.0]
    reader = PrometheusReader(server[1].api.url, clock=lambda: now[0])
    reader.semantics, reader.metric_names(), reader.series(TTFT, _m("m"))
    query_range, query = reader.api.query_range, reader.api.query

    def ranged(expr, start, end, step, **kw):  # type: ignore[no-untyped-def]
        asked.append((start, end))
        return query_range(expr, start, end, step, **kw)

    def instant(expr, at, **kw):  # type: ignore[no-untyped-def]
        if not expr.startswith("count"):  # NOTE: the layout check is not a step
            asked.append((at, at))
        return query(expr, at, **kw)

    reader.api.query_range, reader.api.query = ranged, instant
    semantics = reader.semantics
    for start, end in ((T, T + 180), (T + 60, T + 240), (T + 60, T + 240)):
        got = reader.histogram_series(TTFT, _m("m"), start, end, 60, semantics=semantics)
        fresh = PrometheusReader(server[1].api.url)
        want = fresh.histogram_series(TTFT, _m("m"), start, end, 60, semantics=semantics)
        _same(got, want, f"histogram_series {start}..{end}")
    assert asked == [(T + 60, T + 180), (T + 240, T + 240)]
    asked.clear()
    now[0] = T + 240 + reader.kept.final_after_seconds - 1  # NOTE: T + 240 not final yet
    reader.kept.clear()
    for _ in range(2):
        reader.counter_series(TOKENS, _m("m"), T + 60, T + 240, 60, semantics=semantics)
    assert asked == [(T + 120, T + 240), (T + 240, T + 240)], "the step not final is asked again"


def _recording(query, log: list[str]):  # type: ignore[no-untyped-def]
    def recorded(expr: str, *args, **kwargs):  # type: ignore[no-untyped-def]
        log.append("count_over_time" if "count_over_time" in expr else "increase")
        return query(expr, *args, **kwargs)

    return recorded


def test_a_per_replica_read_is_one_query_for_every_target(server) -> None:
    """The per-replica rules read every target at once: as many queries as a fleet read."""
    reader = PrometheusReader(server[1].api.url)  # NOTE: no answers kept by an earlier test
    reader.semantics, reader.metric_names()
    reader.counter_window(TOKENS, _m("m"), T, T + 60)
    before = reader.api.num_requests
    windows = reader.histogram_windows_by_target(TTFT, _m("m"), T, T + 120)
    counters = reader.counter_series_by_target(TOKENS, _m("m"), T, T + 240, 60)
    scrapes = reader.scrapes_by_target(["a", "b"], T, T + 200)
    assert reader.api.num_requests - before == 3
    assert set(windows) == set(counters) == set(scrapes) == {"a", "b"}


# -- comparing -------------------------------------------------------------------------------


def _outcome(read: Read, reader, semantics: str) -> object:
    try:
        return read(reader, semantics)
    except (ValueError, LayoutMismatchError, SemanticsMismatchError) as error:
        return error


def _same(got: object, want: object, where: str) -> None:
    """Equal, floats to 1e-12 relative (the server adds in an order of its own), NaN equal to
    NaN, errors of one type and one message."""
    if isinstance(want, BaseException):
        assert type(got) is type(want), f"{where}: {got!r} != {want!r}"
        assert str(got) == str(want), where
        return
    if isinstance(want, float) or isinstance(got, float):
        assert isinstance(got, (int, float)) and isinstance(want, (int, float)), (
            f"{where}: {got!r} != {want!r}"
        )
        assert (math.isnan(got) and math.isnan(want)) or math.isclose(
            got, want, rel_tol=1e-12, abs_tol=1e-12
        ), f"{where}: {got!r} != {want!r}"
        return
    if isinstance(want, QuantileResult) or (isinstance(want, tuple) and hasattr(want, "_fields")):
        assert type(got) is type(want), f"{where}: {got!r} != {want!r}"
    if isinstance(want, dict):
        assert isinstance(got, dict) and set(got) == set(want), f"{where}: {got!r} != {want!r}"
        for key in want:
            _same(got[key], want[key], f"{where}[{key!r}]")
        return
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want), (
            f"{where}: {got!r} != {want!r}"
        )
        for i, (g, w) in enumerate(zip(got, want, strict=True)):
            _same(g, w, f"{where}[{i}]")
        return
    if hasattr(want, "__dataclass_fields__"):
        assert type(got) is type(want), where
        for name in want.__dataclass_fields__:
            _same(getattr(got, name), getattr(want, name), f"{where}.{name}")
        return
    assert got == want, f"{where}: {got!r} != {want!r}"
