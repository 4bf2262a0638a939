"""Console read benchmark: the reads behind the console's Overview and SLOs (merged TTFT and
ITL p50/p95/p99 per 1-minute step, the step histograms, one window over the whole range) over
the last 1 h and 24 h of 16 replicas, read by the reference loops (``Store(vectorised=False)``,
the path before issue 13) and by the vectorised path, side by side on one store, cold and warm.

The store is ``bench/collector_query.py``'s: 24 h of 16 replicas scraped every 5 s, rolled
up and settled. "Cold": a new ``Store`` per read (a fresh engine and connection, empty id and
layout caches, SQLite's page cache empty; the OS file cache is warm, which this machine
cannot drop). "Warm": the same read again on that store. Each figure is the median of
``REPEATS`` runs, CPU (``time.process_time``; SQLite runs in-process) and wall; "identical"
compares the ``repr`` of both paths' results (every float, bit for bit).

``TAILWATCH_BENCH_HOURS`` shortens the seeded day (a quick check; the 24 h rows are then
skipped).
"""

from __future__ import annotations

import math
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from bench import collector_query as cq
from bench._report import print_table
from collectors.store import Store, sqlite_url

REPEATS = 3
WINDOWS_HOURS = tuple(h for h in (1, 24) if h <= cq.HOURS)
PATHS = {"reference": False, "vectorised": True}


def _reads(store: Store, start: float, end: float) -> dict[str, Callable[[], object]]:
    """The console's reads of both families over [start, end], by name."""
    selector = cq._selector(cq.REPLICAS)

    def quantiles() -> object:
        return [store.quantile_series(f, selector, start, end, cq.QS, 60.0) for f in cq.FAMILIES]

    def steps() -> object:
        return [store.histogram_series(f, selector, start, end, 60.0) for f in cq.FAMILIES]

    def window() -> object:
        return [store.histogram_window(f, selector, start, end) for f in cq.FAMILIES]

    return {"quantile_series": quantiles, "histogram_series": steps, "histogram_window": window}


def _timed(run: Callable[[], object]) -> tuple[float, float, object]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = run()
    return time.perf_counter() - wall, time.process_time() - cpu, result


def _measure(url: str, vectorised: bool, read: str, start: float, end: float) -> dict:
    """Median cold and warm wall and CPU seconds of one read, and its result."""
    cold, warm, result = [], [], None
    for _ in range(REPEATS):
        store = Store(url, migrate=False, vectorised=vectorised)
        try:
            run = _reads(store, start, end)[read]
            wall, cpu, result = _timed(run)
            cold.append((wall, cpu))
            wall, cpu, _ = _timed(run)
            warm.append((wall, cpu))
        finally:
            store.close()
    return {
        "cold wall": statistics.median(w for w, _ in cold),
        "cold CPU": statistics.median(c for _, c in cold),
        "warm wall": statistics.median(w for w, _ in warm),
        "warm CPU": statistics.median(c for _, c in warm),
        "result": repr(result),
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="tailwatch-bench-") as folder:
        path = Path(folder) / "console.db"
        url = sqlite_url(path)
        store = Store(url)
        started = time.perf_counter()
        rows, last = cq._seed(store, np.random.default_rng(cq.SEED))
        while store.maintain(last - 1.0).more_to_do:
            pass
        for later in (30.0, 90.0, 150.0):  # the last minute, then settle every id
            store.maintain(last + later)
        covered = store.rollup_coverage() == math.inf
        store.close()
        print(
            f"seeded {cq.HOURS:g} h x {cq.REPLICAS} replicas at {cq.INTERVAL_SECONDS:g} s: "
            f"{rows} histogram snapshots, rolled up in {time.perf_counter() - started:.0f} s; "
            f"SQLite {path.stat().st_size / 2**20:.0f} MiB; roll-ups read "
            f"{'for every stored minute' if covered else 'NOT FOR ALL MINUTES'}",
            flush=True,
        )
        end = cq.START + math.floor(cq.HOURS * 3600 / 60) * 60
        table = []
        for hours in WINDOWS_HOURS:
            start = end - hours * 3600
            for read in ("quantile_series", "histogram_series", "histogram_window"):
                old = _measure(url, PATHS["reference"], read, start, end)
                new = _measure(url, PATHS["vectorised"], read, start, end)
                row = [f"{hours} h", read]
                for key in ("cold CPU", "warm CPU"):
                    row += [f"{old[key] * 1000:.0f}", f"{new[key] * 1000:.0f}"]
                    row.append(f"{old[key] / new[key]:.1f}x" if new[key] > 0 else "-")
                row += [f"{new['cold wall'] * 1000:.0f}", "yes" if old["result"] == new["result"] else "NO"]  # fmt: skip
                table.append(tuple(row))
                print(f"  {hours} h {read}: done", flush=True)
    print(
        f"\n{cq.REPLICAS} replicas, TTFT and ITL (two reads each); CPU ms, median of {REPEATS}; "
        "ref = reference loops, vec = vectorised"
    )
    print_table(
        (
            "window",
            "read",
            "cold ref",
            "cold vec",
            "cold ratio",
            "warm ref",
            "warm vec",
            "warm ratio",
            "cold vec wall ms",
            "identical",
        ),
        table,
    )
