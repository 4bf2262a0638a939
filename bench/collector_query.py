"""Query benchmark: merged p50/p95/p99 TTFT and ITL series at 1-minute resolution, read
from raw snapshots vs from 1-minute roll-ups, side by side in one run.

A SQLite store is seeded with 24 h of 16 replicas scraped every 5 s (TTFT and ITL histograms
with vLLM 0.33's bucket layouts, ``shared/reference/engine-metrics.md`` §3; one replica
restarts mid-day, so the counters reset). Seeding goes through bulk inserts and is not
measured; ``Store.maintain`` then rolls up the whole day (timed once, as a backlog, and
again for one steady-state minute). Each query computes both families'
``quantile_series(..., qs=(0.5, 0.95, 0.99), step_seconds=60)`` over the last 1 h, 6 h and
24 h, for 4, 8 and 16 replicas, once with ``use_rollups=False`` (raw snapshots only) and once
with roll-ups; the two results are checked to be identical. The machine is shared, so each
figure is the median of ``REPEATS`` runs, in CPU time (``time.process_time``) as well as wall
time.

``TAILWATCH_BENCH_HOURS`` shortens the seeded day (for a quick check).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from sqlalchemy import func, insert, select

from bench._report import print_table
from bench.slo_fidelity import ITL_BOUNDS, TTFT_BOUNDS
from collectors.canonical import CanonicalHistogram
from collectors.store import ScrapeRecord, Store, sqlite_url
from collectors.store.models import HistogramSnapshotRow, Scrape, Series, Target

SEED = 20_260_102
REPLICAS = 16
INTERVAL_SECONDS = 5.0
HOURS = float(os.environ.get("TAILWATCH_BENCH_HOURS", "24"))
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z, minute-aligned
WINDOWS_HOURS = tuple(h for h in (1, 6, 24) if h <= HOURS)
REPLICA_COUNTS = (4, 8, 16)
REPEATS = 3
QS = (0.5, 0.95, 0.99)
FAMILIES = {
    "ttft_seconds": ((*TTFT_BOUNDS, math.inf), 0.35, 1.0),  # layout, median s, sigma
    "itl_seconds": ((*ITL_BOUNDS, math.inf), 0.03, 0.6),
}
REQUESTS_PER_SECOND = 4.0  # per replica; ITL observations: ~60 per request


def _selector(replicas: int) -> dict[str, str]:
    """Replicas 0-3 carry ``in4=1``, 0-7 ``in8=1``: a label selects 4, 8 or all 16."""
    return {"model": "m"} if replicas == REPLICAS else {f"in{replicas}": "1"}


def _labels(replica: int) -> tuple[tuple[str, str], ...]:
    return (
        ("in4", "1" if replica < 4 else "0"),
        ("in8", "1" if replica < 8 else "0"),
        ("model", "m"),
        ("target", f"replica-{replica:02d}"),
    )


def _cumulative(rng: np.random.Generator, bounds: tuple[float, ...], median: float,
                sigma: float, per_scrape: float, steps: int) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """Cumulative bucket counts and sums of one replica at each scrape (resets included)."""
    edges = np.log(np.array(bounds[:-1]) / median) / sigma
    cdf = np.concatenate([0.5 * (1 + np.vectorize(math.erf)(edges / math.sqrt(2))), [1.0]])
    probabilities = np.diff(np.concatenate([[0.0], cdf]))
    arrivals = rng.poisson(per_scrape, size=steps)
    per_bucket = np.array([rng.multinomial(n, probabilities) for n in arrivals], dtype=float)
    mids = np.array([*bounds[:-1], bounds[-2] * 2]) * 0.75
    sums = per_bucket @ mids
    # NOTE: le-cumulative across the buckets (+Inf holds the total), then over time.
    return np.cumsum(np.cumsum(per_bucket, axis=1), axis=0), np.cumsum(sums)


def _seed(store: Store, rng: np.random.Generator) -> tuple[int, float]:
    steps = int(HOURS * 3600 / INTERVAL_SECONDS) + 1
    times = START + np.arange(steps) * INTERVAL_SECONDS
    restart = steps // 2
    data = {}
    for replica in range(REPLICAS):
        for family, (bounds, median, sigma) in FAMILIES.items():
            per_scrape = REQUESTS_PER_SECOND * INTERVAL_SECONDS * (60 if family == "itl_seconds" else 1)  # fmt: skip
            counts, sums = _cumulative(rng, bounds, median, sigma, per_scrape, steps)
            if replica == 3:  # a restart mid-day: counters start again from zero
                counts[restart:] -= counts[restart - 1]
                sums[restart:] -= sums[restart - 1]
            data[replica, family] = (bounds, counts, sums)
    # The first scrape of each replica goes through the store's API (targets, series,
    # layouts); the rest are bulk inserts.
    for replica in range(REPLICAS):
        histograms = tuple(
            CanonicalHistogram(
                family,
                _labels(replica),
                bounds,
                tuple(counts[0]),
                float(sums[0]),
                float(counts[0][-1]),
            )
            for family, (bounds, counts, sums) in ((f, data[replica, f]) for f in FAMILIES)
        )
        store.write_scrape(ScrapeRecord(f"replica-{replica:02d}", float(times[0]), histograms=histograms))  # fmt: skip
    with store.engine.begin() as conn:
        targets = dict(conn.execute(select(Target.name, Target.id)).all())
        series = {
            (json.loads(labels)["target"], family): (sid, layout)
            for sid, labels, family, layout in conn.execute(
                select(Series.id, Series.labels_json, Series.family, HistogramSnapshotRow.layout_id)
                .join(HistogramSnapshotRow, HistogramSnapshotRow.series_id == Series.id)
            )
        }  # fmt: skip
        next_id = conn.execute(select(func.max(Scrape.id))).scalar() + 1
        rows = 0
        for chunk_start in range(1, steps, 720):  # one hour of scrapes per transaction chunk
            scrapes, snapshots = [], []
            for step in range(chunk_start, min(chunk_start + 720, steps)):
                t = float(times[step])
                for replica in range(REPLICAS):
                    name = f"replica-{replica:02d}"
                    scrapes.append({"id": next_id, "target_id": targets[name], "timestamp_seconds": t,
                                    "duration_seconds": 0.01, "is_up": True, "error": ""})  # fmt: skip
                    for family in FAMILIES:
                        _, counts, sums = data[replica, family]
                        sid, layout = series[name, family]
                        snapshots.append({"series_id": sid, "scrape_id": next_id, "timestamp_seconds": t,
                                          "layout_id": layout, "counts_json": json.dumps(counts[step].tolist()),
                                          "sum_value": float(sums[step]), "count": float(counts[step][-1])})  # fmt: skip
                    next_id += 1
            conn.execute(insert(Scrape), scrapes)
            conn.execute(insert(HistogramSnapshotRow), snapshots)
            rows += len(snapshots)
    return rows, float(times[-1])


def _measure(run: Callable[[], object]) -> tuple[float, float, object]:
    """Median wall and CPU seconds of ``REPEATS`` runs, and the last result."""
    walls, cpus, result = [], [], None
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        result = run()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
    return statistics.median(walls), statistics.median(cpus), result


def _query(store: Store, replicas: int, start: float, end: float, use_rollups: bool) -> list:
    return [
        store.quantile_series(
            family, _selector(replicas), start, end, QS, 60.0, use_rollups=use_rollups
        )
        for family in FAMILIES
    ]


def _quantiles(merged: list) -> list:
    """Only the quantiles of already merged series (both paths spend this much on them)."""
    return [[None if h is None else [h.quantile(q) for q in QS] for _, h in s] for s in merged]


def _same(left: list, right: list) -> bool:
    def values(result: list) -> list:
        return [
            [None if qs is None else [q.value for q in qs] for _, qs in series] for series in result
        ]

    return json.dumps(values(left)) == json.dumps(values(right))


def main() -> None:
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory(prefix="tailwatch-bench-") as folder:
        store = Store(sqlite_url(Path(folder) / "bench.db"))
        started = time.perf_counter()
        rows, last = _seed(store, rng)
        seeded = time.perf_counter() - started
        size = (Path(folder) / "bench.db").stat().st_size
        print(
            f"seeded {HOURS:g} h x {REPLICAS} replicas at {INTERVAL_SECONDS:g} s: "
            f"{rows} histogram snapshots (TTFT {len(FAMILIES['ttft_seconds'][0])} buckets, "
            f"ITL {len(FAMILIES['itl_seconds'][0])}) in {seeded:.0f} s; SQLite {size / 2**20:.0f} MiB"
        )
        # The backlog: everything but the last minute, as a store upgraded to roll-ups finds.
        wall, cpu = time.perf_counter(), time.process_time()
        calls = 0
        while True:
            calls += 1
            if not store.maintain(last - 1.0).more_to_do:
                break
        backlog_wall, backlog_cpu = time.perf_counter() - wall, time.process_time() - cpu
        # Steady state: the call that rolls up one new minute (16 x 12 scrapes, 32 series).
        wall, cpu = time.perf_counter(), time.process_time()
        minute = store.maintain(last + 30.0)
        minute_wall, minute_cpu = time.perf_counter() - wall, time.process_time() - cpu
        store.maintain(last + 90.0)  # settles the ids of the backlog ...
        store.maintain(last + 150.0)  # ... and of the last minute
        # A call with nothing due, as most collector cycles find it.
        wall, cpu = time.perf_counter(), time.process_time()
        store.maintain(last + 155.0)
        idle_wall, idle_cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"maintain: backlog ({HOURS:g} h but the last minute) in {calls} calls, "
            f"{backlog_wall:.1f} s wall / {backlog_cpu:.1f} s CPU; one new minute "
            f"({minute.scrapes_rolled_up} scrapes, {minute.rollup_rows_written} roll-up rows) "
            f"{minute_wall * 1000:.0f} ms wall / {minute_cpu * 1000:.0f} ms CPU; a call with "
            f"nothing due {idle_wall * 1000:.1f} ms wall / {idle_cpu * 1000:.1f} ms CPU; "
            f"read from roll-ups: {'every stored minute' if store.rollup_coverage() == math.inf else 'NOT ALL'}"
        )
        table = []
        for hours in WINDOWS_HOURS:
            end = START + math.floor(HOURS * 3600 / 60) * 60
            start = end - hours * 3600
            for replicas in REPLICA_COUNTS:
                raw_wall, raw_cpu, raw = _measure(lambda: _query(store, replicas, start, end, False))  # noqa: B023 # fmt: skip
                up_wall, up_cpu, up = _measure(lambda: _query(store, replicas, start, end, True))  # noqa: B023 # fmt: skip
                steps = len(raw[0])
                merged = [store.histogram_series(f, _selector(replicas), start, end) for f in FAMILIES]  # fmt: skip
                _, quantile_cpu, _ = _measure(lambda: _quantiles(merged))  # noqa: B023
                table.append((
                    f"{hours} h", replicas, steps,
                    f"{raw_wall * 1000:.0f}", f"{raw_cpu * 1000:.0f}",
                    f"{up_wall * 1000:.0f}", f"{up_cpu * 1000:.0f}", f"{quantile_cpu * 1000:.0f}",
                    f"{raw_cpu / up_cpu:.1f}x" if up_cpu > 0 else "-",
                    "yes" if _same(raw, up) else "NO",
                ))  # fmt: skip
        print(f"\nmerged p50/p95/p99 of TTFT and ITL per 1-minute step; median of {REPEATS} runs")
        print_table(
            (
                "window",
                "replicas",
                "steps",
                "raw wall ms",
                "raw CPU ms",
                "roll-up wall ms",
                "roll-up CPU ms",
                "of which quantiles CPU ms",
                "raw/roll-up CPU",
                "identical",
            ),
            table,
        )
        store.close()
