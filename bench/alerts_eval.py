"""Alert evaluation cost: one :meth:`alerts.evaluator.Evaluator.evaluate_once` of every
built-in rule, plus the page and ticket burn-rate rules of 2 SLOs (TTFT latency, errors), over a
SQLite store holding 24 h of 4, 16 and 64 replicas scraped every 15 s, rolled up and settled
as the collector's maintenance leaves it a few cycles on (every stored minute read from
roll-ups).

Each replica's scrape holds what the built-in rules read: TTFT, ITL, e2e and queue-time
histograms (vLLM 0.33's TTFT and ITL layouts), requests by ``finished_reason``, preemptions,
prefix-cache queries and hits, and the waiting, running and KV-usage gauges; healthy traffic
(nothing fires). Seeding goes through bulk inserts and is not measured. The figure is the CPU
seconds of one evaluation cycle (``time.process_time``; SQLite runs in-process), median of
``REPEATS`` cycles at successive 15 s ticks, and that as a share of one core at a 15 s
evaluation interval (the target: at most 10 % for 16 replicas).

``TAILWATCH_BENCH_HOURS`` shortens the seeded day (a quick check).
"""

from __future__ import annotations

import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

from sqlalchemy import func, insert, select

from alerts import Evaluator, MemoryAlertState, evaluate_rule
from alerts.kept_steps import KeptSteps
from alerts.rules import builtin_rule_set
from bench._report import print_table
from bench._slos import SLOS
from bench.slo_fidelity import ITL_BOUNDS, TTFT_BOUNDS
from collectors import canonical as c
from collectors.canonical import CanonicalHistogram, CanonicalSample, Kind
from collectors.store import ScrapeRecord, Store, sqlite_url
from collectors.store.models import HistogramSnapshotRow, Scrape, Series, Target, ValueSample

HOURS = float(os.environ.get("TAILWATCH_BENCH_HOURS", "24"))
INTERVAL = 15.0
START = 1_767_225_600.0  # 2026-01-01T00:00:00Z
REPLICA_COUNTS = (4, 16, 64)
REPEATS = 5
E2E_BOUNDS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 60.0, 120.0)
#: family → (layout with +Inf, the share of one interval's observations in each bucket, the
#: observations per request, a mean value for the sum).
HISTOGRAMS = {
    c.TTFT_SECONDS: ((*TTFT_BOUNDS, math.inf), 1, 0.08),
    c.QUEUE_SECONDS: ((*TTFT_BOUNDS, math.inf), 1, 0.01),
    c.ITL_SECONDS: ((*ITL_BOUNDS, math.inf), 40, 0.02),
    c.E2E_SECONDS: ((*E2E_BOUNDS, math.inf), 1, 1.2),
}
REQUESTS_PER_INTERVAL = 60.0  # 4 requests/s per replica


def _per_interval(bounds: tuple[float, ...], per_request: int, mean: float) -> list[float]:
    """Cumulative bucket counts of one interval: observations spread lognormally around
    ``mean`` (a smooth, healthy distribution)."""
    n = REQUESTS_PER_INTERVAL * per_request
    out = []
    for bound in bounds:
        if math.isinf(bound):
            out.append(n)
            continue
        z = math.log(bound / mean) / 0.6
        out.append(round(n * 0.5 * (1 + math.erf(z / math.sqrt(2)))))
    return out


def _labels(target: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted({"model": "m", "target": target, **extra}.items()))


def _samples(target: str, k: int) -> list[CanonicalSample]:
    counter, gauge = Kind.COUNTER, Kind.GAUGE
    lab = _labels(target)
    n = REQUESTS_PER_INTERVAL * k
    return [
        CanonicalSample(c.REQUESTS_TOTAL, _labels(target, finished_reason="stop"), n, counter),
        CanonicalSample(c.REQUESTS_TOTAL, _labels(target, finished_reason="error"), 0.0, counter),
        CanonicalSample(c.PREEMPTIONS_TOTAL, lab, 0.0, counter),
        CanonicalSample(c.PREFIX_CACHE_QUERIES_TOTAL, lab, 1000.0 * k, counter),
        CanonicalSample(c.PREFIX_CACHE_HITS_TOTAL, lab, 600.0 * k, counter),
        CanonicalSample(c.REQUESTS_WAITING, lab, float(k % 3), gauge),
        CanonicalSample(c.REQUESTS_RUNNING, lab, 8.0, gauge),
        CanonicalSample(c.KV_CACHE_USAGE, lab, 0.4, gauge),
    ]


def _histograms(target: str, k: int) -> list[CanonicalHistogram]:
    out = []
    for family, (bounds, per_request, mean) in HISTOGRAMS.items():
        counts = [x * k for x in _per_interval(bounds, per_request, mean)]
        out.append(
            CanonicalHistogram(
                family, _labels(target), bounds, tuple(counts), counts[-1] * mean, counts[-1]
            )
        )
    return out


def _seed(store: Store, replicas: int) -> tuple[int, float]:
    """``HOURS`` of scrapes of ``replicas`` targets; the first through the store's API, the
    rest as bulk inserts (as ``bench/collector_query.py`` does). Returns rows and the last t."""
    steps = int(HOURS * 3600 / INTERVAL) + 1
    names = [f"replica-{i:02d}" for i in range(replicas)]
    for name in names:
        store.write_scrape(ScrapeRecord(name, START, tuple(_samples(name, 0)), tuple(_histograms(name, 0))))  # fmt: skip
    with store.engine.begin() as conn:
        targets = dict(conn.execute(select(Target.name, Target.id)).all())
        series = {
            (json.loads(labels)["target"], family, json.loads(labels).get("finished_reason")): (sid, kind)
            for sid, labels, family, kind in conn.execute(select(Series.id, Series.labels_json, Series.family, Series.kind))
        }  # fmt: skip
        layouts = dict(
            conn.execute(
                select(HistogramSnapshotRow.series_id, HistogramSnapshotRow.layout_id)
            ).all()
        )
        next_id = conn.execute(select(func.max(Scrape.id))).scalar() + 1
        rows = 0
        for chunk in range(1, steps, 240):
            scrapes, values, snapshots = [], [], []
            for k in range(chunk, min(chunk + 240, steps)):
                t = START + k * INTERVAL
                for name in names:
                    scrapes.append({"id": next_id, "target_id": targets[name], "timestamp_seconds": t, "duration_seconds": 0.01, "is_up": True, "error": ""})  # fmt: skip
                    for s in _samples(name, k):
                        sid, _ = series[name, s.family, dict(s.labels).get("finished_reason")]
                        values.append({"series_id": sid, "scrape_id": next_id, "timestamp_seconds": t, "value": s.value})  # fmt: skip
                    for h in _histograms(name, k):
                        sid, _ = series[name, h.family, None]
                        snapshots.append({"series_id": sid, "scrape_id": next_id, "timestamp_seconds": t, "layout_id": layouts[sid], "counts_json": json.dumps(list(h.cumulative_counts)), "sum_value": h.sum_value, "count": h.count})  # fmt: skip
                    next_id += 1
            conn.execute(insert(Scrape), scrapes)
            conn.execute(insert(ValueSample), values)
            conn.execute(insert(HistogramSnapshotRow), snapshots)
            rows += len(values) + len(snapshots)
    return rows, START + (steps - 1) * INTERVAL


def measure(store: Store, now: float, repeats: int = REPEATS) -> tuple[float, float, object]:
    """Median CPU and wall seconds of ``repeats`` evaluation cycles at 15 s ticks from ``now``,
    and the last result."""
    rules, _ = builtin_rule_set(SLOS)
    evaluator = Evaluator(rules, store, MemoryAlertState(), clock=lambda: now)
    cpus, walls, result = [], [], None
    for i in range(repeats):
        wall, cpu = time.perf_counter(), time.process_time()
        result = evaluator.evaluate_once(now + i * INTERVAL)
        cpus.append(time.process_time() - cpu)
        walls.append(time.perf_counter() - wall)
    return statistics.median(cpus), statistics.median(walls), result


def per_rule(store: Store, now: float) -> list[tuple[str, str]]:
    """CPU milliseconds of each rule's evaluation alone (median of ``REPEATS``), through the
    kept steps the evaluator reads through (``alerts.kept_steps``), one reader a rule."""
    rules, _ = builtin_rule_set(SLOS)
    out = []
    for rule in rules:
        cpus = []
        reader = KeptSteps(store)
        for i in range(REPEATS):
            reader.at(now + i * INTERVAL)
            cpu = time.process_time()
            evaluate_rule(rule, reader, now + i * INTERVAL)
            cpus.append(time.process_time() - cpu)
        out.append((rule.name, f"{statistics.median(cpus) * 1000:.0f}"))
    return out


def main() -> None:
    rules, _ = builtin_rule_set(SLOS)
    table = []
    breakdown: list[tuple[str, str]] = []
    for replicas in REPLICA_COUNTS:
        with tempfile.TemporaryDirectory(prefix="tailwatch-bench-") as folder:
            store = Store(sqlite_url(Path(folder) / "alerts.db"))
            started = time.perf_counter()
            rows, last = _seed(store, replicas)
            seeded = time.perf_counter() - started
            started = time.perf_counter()
            while store.maintain(last - 120.0).more_to_do:
                pass
            # NOTE: two more calls later, as the collector's next cycles make them: they settle
            # the backlog's ids, and only settled minutes are read from roll-ups.
            store.maintain(last + 90.0)
            store.maintain(last + 150.0)
            coverage = store.rollup_coverage()
            rolled = time.perf_counter() - started
            size = (Path(folder) / "alerts.db").stat().st_size
            print(
                f"{replicas} replicas: {rows} rows seeded in {seeded:.0f} s, rolled up in "
                f"{rolled:.0f} s; SQLite {size / 2**20:.0f} MiB; roll-ups read "
                f"{'for every stored minute' if coverage == math.inf else 'NOT FOR ALL MINUTES'}",
                flush=True,
            )
            cpu, wall, result = measure(store, last)
            if replicas == 16:
                breakdown = per_rule(store, last)
            store.close()
            # The same cycles read through the reference loops (the path before issue 13).
            reference = Store(sqlite_url(Path(folder) / "alerts.db"), migrate=False, vectorised=False)  # fmt: skip
            ref_cpu, _, ref_result = measure(reference, last)
            reference.close()
        assert result is not None and ref_result is not None
        assert (result.alerts, result.errors) == (ref_result.alerts, ref_result.errors)
        table.append((
            replicas, len(rules), f"{cpu * 1000:.0f}", f"{wall * 1000:.0f}",
            f"{cpu / INTERVAL:.1%}", f"{ref_cpu * 1000:.0f}", f"{ref_cpu / INTERVAL:.1%}",
            len(result.alerts), len(result.errors),
        ))  # fmt: skip
    print(
        f"\none evaluation cycle of {len(rules)} rules over {HOURS:g} h at {INTERVAL:g} s "
        f"scrapes; median of {REPEATS} cycles"
    )
    print_table(
        (
            "replicas",
            "rules",
            "CPU ms",
            "wall ms",
            "share of a core at 15 s",
            "reference CPU ms",
            "reference share",
            "alerts",
            "errors",
        ),
        table,
    )
    print(f"\nper rule, 16 replicas (each rule alone, median of {REPEATS})")
    print_table(("rule", "CPU ms"), breakdown)
