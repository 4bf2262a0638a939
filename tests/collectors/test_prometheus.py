"""Parity with a real Prometheus: two bundled engine replicas under load, scraped at the same
interval by Tailwatch's collector (into a SQLite store) and by Prometheus (Debian's package,
started here on loopback); the p99 TTFT over one window must agree.

Alignment (docs/collectors.md, "Parity with Prometheus"): the window [t0, t1] starts and ends
in quiet periods, so every counter is flat at both edges and both systems see the same total
increase. Prometheus's ``increase()`` then differs from ours only by its extrapolation, which
this test reproduces from Prometheus's own raw samples (fetched over the API) with
``slo.extrapolated_increase``: our p99 must equal the p99 of the raw samples' plain
differences exactly, and Prometheus's answer must equal the p99 of the extrapolated
increases to float rounding.

On windows whose edges fall in traffic the two also take different samples. There the
store's ``semantics="prometheus-2"``, on Prometheus's own samples read back through
``PrometheusSource``, must equal Prometheus's answers exactly (20 s windows, q=0.9, every
``le``, a counter), while the exact semantics must differ.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import defaultdict

import httpx
from prometheus_client.parser import text_string_to_metric_families

from collectors.collector import Collector
from collectors.promql import PrometheusSource
from collectors.scrape import Scraper, Target
from collectors.store import Store
from loadgen import build_schedule, parse_workload, run_schedule
from loadgen.replicas import bundled_replicas
from slo import RangeSemantics, Sample, extrapolated_increase, histogram_quantile, merge_histograms
from tests.collectors.prometheus_server import PrometheusServer, running_prometheus
from tests.services import prometheus_binary

ENGINE = {"model": "tiny", "max_model_len": 256, "num_gpu_blocks": 128}
INTERVAL_SECONDS = 1.0
WAIT_SECONDS = 120.0  # bound on each wait for scrapes; generous for a contended machine
BUCKET = "vllm:time_to_first_token_seconds_bucket"
COUNTER = "vllm:prompt_tokens_total"
Q = 0.99
#: Short windows under load, where the store's exact windows and Prometheus's differ.
SHORT_WINDOW_SECONDS = 20.0
SHORT_STEP_SECONDS = 0.5
SHORT_Q = 0.9
# NOTE: float tolerance for Prometheus's answer against our reproduction of it. Both apply
# the same ~10 float64 operations per series to the same integer counts and the same
# millisecond time differences, so they differ by a few ulps (~1e-15 relative). Any real
# disagreement (one sample more or less in a series, another extrapolation rule) moves a
# 1 s-interval, ~10 s window by well over 1e-3 relative.
REL_TOLERANCE = 1e-9


def test_store_p99_over_two_replicas_equals_prometheus_histogram_quantile(tmp_path):
    prometheus_binary()  # skip (or fail in CI) before starting anything
    with bundled_replicas(2, ENGINE) as urls:
        hostports = [url.removeprefix("http://") for url in urls]
        with running_prometheus(
            tmp_path / "prometheus", hostports, interval_seconds=INTERVAL_SECONDS
        ) as prometheus:
            store = Store(f"sqlite:///{tmp_path / 'tailwatch.db'}")
            try:
                asyncio.run(_parity(urls, hostports, prometheus, store, tmp_path))
            finally:
                store.close()


async def _parity(urls, hostports, prometheus: PrometheusServer, store: Store, tmp_path):
    targets = [Target(hp, f"{url}/metrics") for hp, url in zip(hostports, urls, strict=True)]
    stop = asyncio.Event()
    async with Scraper(timeout_seconds=INTERVAL_SECONDS) as scraper:
        collector = Collector(targets, store, scraper, interval_seconds=INTERVAL_SECONDS)
        collecting = asyncio.create_task(collector.run(stop))
        try:
            # Warm-up: every replica's TTFT series exists and holds an observation before t0.
            async with httpx.AsyncClient(timeout=120) as client:
                for url in urls:
                    answer = await client.post(
                        f"{url}/v1/completions",
                        json={"model": "tiny", "prompt": "warm up", "max_tokens": 2},
                    )
                    assert answer.status_code == 200, answer.text
            quiet = time.time()
            await _until_both_scraped_after(quiet, hostports, prometheus, store)
            t0 = _ms(time.time())
            await _until_both_scraped_after(t0, hostports, prometheus, store)
            before = [await _own_buckets(url) for url in urls]

            state = await run_schedule(urls, build_schedule([_workload()]))
            load_end = time.time()
            succeeded = [r for r in state.results if r.succeeded]
            assert len(succeeded) == len(state.results), [r.error for r in state.results]

            quiet = time.time()
            await _until_both_scraped_after(quiet, hostports, prometheus, store)
            after = [await _own_buckets(url) for url in urls]
            t1 = _ms(time.time())
        finally:
            stop.set()
            await collecting
    assert not collector.num_buffered
    t0_ms, window = _int_ms(t0), _int_ms(t1) - _int_ms(t0)  # t0 and t1 are whole ms

    # 1. The merge over two replicas is the bucket-wise sum of each replica's own delta.
    merged = store.histogram_window("ttft_seconds", {"model": "tiny"}, t0, t1)
    per_target = [
        store.histogram_window("ttft_seconds", {"target": hp}, t0, t1) for hp in hostports
    ]
    assert merged is not None and None not in per_target
    assert merged.cumulative_counts == merge_histograms(per_target).cumulative_counts
    own_delta = defaultdict(float)
    for start, end in zip(before, after, strict=True):
        assert start.keys() == end.keys()
        for le in start:
            own_delta[le] += end[le] - start[le]
    assert dict(zip(merged.upper_bounds, merged.cumulative_counts, strict=True)) == own_delta
    assert merged.cumulative_counts[-1] == len(succeeded)  # one TTFT per request
    assert len(succeeded) >= 8, "too little load to compare a p99"

    # 2. Prometheus's raw samples over the same window, their plain differences, and the
    #    extrapolated increases Prometheus computes from them.
    build = prometheus.api("status/buildinfo")["version"]
    semantics, small_delta = _prometheus_rules(build)
    plain, extrapolated = defaultdict(float), defaultdict(float)
    series = prometheus.raw_samples(BUCKET, t0, t1)
    assert {s["metric"]["instance"] for s in series} == set(hostports)
    for item in series:
        le = float(item["metric"]["le"])
        # NOTE: times in seconds since t0, from whole milliseconds, as Prometheus computes
        # them (int64 ms differences / 1000); Unix seconds as float64 carry ~2.4e-7 s of
        # rounding each, which would dominate the comparison below.
        samples = [Sample((_int_ms(t) - t0_ms) / 1000, float(v)) for t, v in item["values"]]
        assert len(samples) >= 3, item  # both quiet edges and the load in between
        assert samples[0].timestamp_seconds >= 0 and samples[-1].timestamp_seconds <= window / 1000
        plain[le] += samples[-1].value - samples[0].value  # no resets: replicas never restart
        extrapolated[le] += extrapolated_increase(samples, window / 1000, window / 1000, semantics)
    assert dict(zip(merged.upper_bounds, merged.cumulative_counts, strict=True)) == plain

    # 3. Prometheus's own increase() and histogram_quantile over [t0, t1], evaluated at t1.
    increases = prometheus.api(
        "query", query=f"sum by (le) (increase({BUCKET}[{window}ms]))", time=f"{t1:.3f}"
    )["result"]
    answered = {float(r["metric"]["le"]): float(r["value"][1]) for r in increases}
    assert answered.keys() == extrapolated.keys()
    for le, value in answered.items():
        assert math.isclose(value, extrapolated[le], rel_tol=REL_TOLERANCE), (le, value)
    (result,) = prometheus.api(
        "query",
        query=f"histogram_quantile({Q}, sum by (le) (increase({BUCKET}[{window}ms])))",
        time=f"{t1:.3f}",
    )["result"]
    prometheus_p99 = float(result["value"][1])
    predicted = histogram_quantile(Q, extrapolated.items(), small_delta_tolerance=small_delta).value
    ours = histogram_quantile(
        Q, zip(merged.upper_bounds, merged.cumulative_counts, strict=True)
    ).value
    assert ours == histogram_quantile(Q, plain.items()).value
    assert math.isclose(prometheus_p99, predicted, rel_tol=REL_TOLERANCE), (
        f"Prometheus p99 {prometheus_p99} vs its extrapolation reproduced {predicted} "
        f"(ours without extrapolation: {ours})"
    )

    # 4. The same window read back from Prometheus through collectors.promql.
    via_api = Store(f"sqlite:///{tmp_path / 'promql.db'}")
    try:
        with PrometheusSource(prometheus.url) as source:
            for record in source.read(t0 - 30, t1):
                via_api.write_scrape(record)
        from_prometheus = via_api.histogram_window("ttft_seconds", {"model": "tiny"}, t0, t1)
        assert from_prometheus is not None
        assert from_prometheus.cumulative_counts == merged.cumulative_counts

        # 5. Prometheus semantics: on Prometheus's own samples, the option answers what
        #    Prometheus answers, here and on short windows under load, where the exact
        #    window (last sample at or before each edge, no extrapolation) differs.
        option = semantics.value
        whole = via_api.histogram_window("ttft_seconds", {"model": "tiny"}, t0, t1, semantics=option)  # fmt: skip
        assert whole is not None
        assert dict(zip(whole.upper_bounds, whole.cumulative_counts, strict=True)) == answered
        ends = [
            _ms(state.started_at + SHORT_WINDOW_SECONDS + k * SHORT_STEP_SECONDS)
            for k in range(round((load_end - state.started_at) / SHORT_STEP_SECONDS))
        ]
        ends = [t for t in ends if t <= load_end]
        assert len(ends) >= 8, "the load was too short for the short windows"
        differences = []
        for t in ends:
            ours, theirs = _short_window(prometheus, via_api, t, option, small_delta)
            assert _nan_is_nan(ours) == _nan_is_nan(theirs), (t, ours, theirs)
            ((at, step),) = via_api.quantile_series(
                "ttft_seconds", {"model": "tiny"}, t - SHORT_WINDOW_SECONDS, t, (SHORT_Q,),
                SHORT_WINDOW_SECONDS, semantics=option, small_delta_tolerance=small_delta,
            )  # fmt: skip
            assert at == t and _nan_is_nan((step[0].value,)) == _nan_is_nan(theirs[1:2])
            exact = via_api.histogram_window(
                "ttft_seconds", {"model": "tiny"}, t - SHORT_WINDOW_SECONDS, t
            )
            assert exact is not None
            exact_q = exact.quantile(SHORT_Q).value
            if math.isfinite(exact_q) and math.isfinite(theirs[1]) and theirs[1] > 0:
                differences.append(abs(exact_q - theirs[1]) / theirs[1])
        # NOTE: the option reproduces Prometheus bit for bit, and the exact semantics does
        # not: were the two semantics equal here, the equalities above would prove nothing.
        assert differences and max(differences) > 1e-6, differences
        print(
            f"\nshort windows: {len(ends)} x {SHORT_WINDOW_SECONDS:g} s, q={SHORT_Q}: "
            f"semantics={option!r} equals Prometheus {build} exactly (every le, the quantile,"
            f" the counter); exact vs Prometheus: max relative difference "
            f"{max(differences):.4f}, median {sorted(differences)[len(differences) // 2]:.4f}"
        )
    finally:
        via_api.close()


def _workload():
    # NOTE: long enough for 20 s windows ending inside the load, at both of whose edges the
    # counters move: there the two semantics take different samples.
    return parse_workload(
        {"rate": 3, "duration": 27, "prompt_tokens": 24, "output_tokens": 4, "seed": 7}
    )


def _nan_is_nan(answer: tuple[object, ...]) -> tuple[object, ...]:
    """``answer`` with NaN spelled ``"NaN"``, so that equal answers compare equal."""
    return tuple("NaN" if isinstance(x, float) and math.isnan(x) else x for x in answer)


def _short_window(
    prometheus: PrometheusServer, store: Store, t: float, option: str, small_delta: float
) -> tuple[tuple[object, ...], tuple[object, ...]]:
    """``(buckets, q-quantile, counter increase)`` of the ``SHORT_WINDOW_SECONDS`` window
    ending at ``t``, from the store with Prometheus semantics and from Prometheus itself."""
    rng, at = f"[{SHORT_WINDOW_SECONDS:g}s]", f"{t:.3f}"
    buckets = prometheus.api("query", query=f"sum by (le) (increase({BUCKET}{rng}))", time=at)
    quantile = prometheus.api(
        "query",
        query=f"histogram_quantile({SHORT_Q}, sum by (le) (increase({BUCKET}{rng})))",
        time=at,
    )["result"]
    counter = prometheus.api("query", query=f"sum(increase({COUNTER}{rng}))", time=at)["result"]
    theirs = (
        {float(r["metric"]["le"]): float(r["value"][1]) for r in buckets["result"]},
        float(quantile[0]["value"][1]) if quantile else None,
        float(counter[0]["value"][1]) if counter else None,
    )
    window = store.histogram_window(
        "ttft_seconds", {"model": "tiny"}, t - SHORT_WINDOW_SECONDS, t, semantics=option
    )
    ours = (
        {} if window is None else dict(zip(window.upper_bounds, window.cumulative_counts, strict=True)),
        None if window is None else window.quantile(SHORT_Q, small_delta_tolerance=small_delta).value,
        store.counter_window(
            "prompt_tokens_total", {"model": "tiny"}, t - SHORT_WINDOW_SECONDS, t, semantics=option
        ),
    )  # fmt: skip
    return ours, theirs


def _ms(seconds: float) -> float:
    """``seconds`` on a whole millisecond (Prometheus's resolution)."""
    return round(seconds * 1000) / 1000


def _int_ms(seconds: float | str) -> int:
    return round(float(seconds) * 1000)


def _prometheus_rules(version: str) -> tuple[RangeSemantics, float]:
    """Range semantics and histogram_quantile's small-delta tolerance of a Prometheus
    version (shared/reference/prometheus-slo.md §1.5, §2)."""
    major, minor = (int(p) for p in version.split(".")[:2])
    if major >= 3:
        return RangeSemantics.PROMETHEUS_3, 1e-12
    assert (major, minor) < (2, 51), f"Prometheus {version}: 2.51-2.55 rules are not modelled"
    return RangeSemantics.PROMETHEUS_2, (1e-12 if minor >= 49 else 0.0)


async def _own_buckets(url: str) -> dict[float, float]:
    """One replica's own TTFT buckets, read straight from its /metrics."""
    async with httpx.AsyncClient(timeout=30) as client:
        body = (await client.get(f"{url}/metrics", headers={"Accept": "text/plain"})).text
    buckets = {}
    for family in text_string_to_metric_families(body):
        if family.name == BUCKET.removesuffix("_bucket"):
            for sample in family.samples:
                if sample.name == BUCKET:
                    buckets[float(sample.labels["le"])] = sample.value
    assert buckets, "no TTFT histogram on the replica"
    return buckets


async def _until_both_scraped_after(
    moment: float, hostports, prometheus: PrometheusServer, store: Store
) -> None:
    """Wait (bounded) until Prometheus and the store each hold a scrape of every replica
    taken after ``moment``."""

    def done() -> bool:
        recent = prometheus.raw_samples(
            BUCKET.replace("_bucket", "_count"), moment, time.time() + 1
        )
        seen_by_prometheus = {s["metric"]["instance"] for s in recent if s["values"]}
        seen_by_us = {
            hp for hp in hostports if any(t > moment and up for t, up, _ in store.scrapes(hp))
        }
        return seen_by_prometheus == seen_by_us == set(hostports)

    deadline = time.monotonic() + WAIT_SECONDS
    while not await asyncio.to_thread(done):
        assert time.monotonic() < deadline, (
            f"no scrape of every replica after {moment} within {WAIT_SECONDS:g} s:\n"
            + prometheus.log_tail()
        )
        await asyncio.sleep(0.2)
