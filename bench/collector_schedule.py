"""Collector schedule with a hanging target: are the healthy targets' scrapes stored on time?

The real ``Scraper`` + ``Collector.run`` + SQLite ``Store`` scrape, every ``interval`` (1 s),
``N`` healthy simulated vLLM 0.33 targets (``bench.collector_ingest.SimulatedVllm``: every
default-on family, two models) and three faulty ones: one that never answers, one that answers
after 0.7 × the interval, and one that answers 200 and 500 in turn. The targets are served by
another process. Each configuration runs ``TAILWATCH_BENCH_INTERVALS`` intervals (30) with the
scrape timeout equal to the interval (the longest the configuration allows) and with the
default (0.8 × the interval).

Reported per configuration: healthy scrapes stored / scheduled slots (a target's slots that
began during the run but its last interval, from its phase offset), the most slots any healthy target skipped, the
write delay after a scrape (from the end of the scrape, ``timestamp + duration``, to the
return of the transaction that stored it, both ``time.time()``): median, p99 and maximum over
every stored healthy scrape, and the hanging target's skipped slots. ``python -m bench
collector_schedule``.
"""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import tempfile
import time
from typing import ClassVar

from bench.collector_ingest import TargetHandler, target_server

INTERVAL_SECONDS = 1.0
SLOW_SHARE = 0.7
NUM_HEALTHY = 4
FAULTY = ("hang", "slow", "flap")


class _FaultyTargets(TargetHandler):
    flaps: ClassVar[list[int]] = [0]

    def do_GET(self) -> None:
        kind = self.path.strip("/").split("/")[0]  # /ok/<i>, /hang, /slow, /flap
        if kind == "hang":
            time.sleep(3600)  # NOTE: a daemon thread; the process is terminated at the end
            return
        if kind == "slow":
            time.sleep(SLOW_SHARE * INTERVAL_SECONDS)
        status = 200
        if kind == "flap":
            self.flaps[0] += 1
            status = 200 if self.flaps[0] % 2 else 500
        index = int(self.path.strip("/").split("/")[1]) if kind == "ok" else 0
        self.send_target(index, status)


def measure(base_url: str, db_url: str, timeout_seconds: float, num_intervals: int) -> dict:
    from collectors import collector_metrics as cm
    from collectors.collector import Collector
    from collectors.scrape import Scraper, Target
    from collectors.scrape_schedule import phase_offset_seconds
    from collectors.store import Store

    store = Store(db_url)
    delays: list[float] = []

    class TimedStore:
        def write_scrapes(self, records):
            written = store.write_scrapes(records)
            committed = time.time()
            delays.extend(
                committed - (r.timestamp_seconds + (r.duration_seconds or 0.0))
                for r in records
                if r.target.startswith("ok-")
            )
            return written

    healthy = [Target(f"ok-{i}", f"{base_url}/ok/{i}/metrics") for i in range(NUM_HEALTHY)]
    faulty = [Target(name, f"{base_url}/{name}/metrics") for name in FAULTY]

    async def run() -> tuple[Collector, float, float]:
        async with Scraper(timeout_seconds=timeout_seconds) as scraper:
            collector = Collector([*healthy, *faulty], TimedStore(), scraper, INTERVAL_SECONDS)
            stop = asyncio.Event()
            started = time.monotonic()
            running = asyncio.create_task(collector.run(stop))
            await asyncio.sleep(num_intervals * INTERVAL_SECONDS)
            stopped = time.monotonic()
            stop.set()
            await running
            return collector, started, stopped

    wall_minus_monotonic = time.time() - time.monotonic()
    try:
        collector, started, stopped = asyncio.run(run())
        # NOTE: the last interval is left out of both counts: a slot due just before the
        # stop may not have begun by then, which says nothing about the schedule.
        end = stopped - INTERVAL_SECONDS
        stamps = {t.name: [stamp for stamp, _, _ in store.scrapes(t.name)] for t in healthy}
    finally:
        store.close()

    def slots(name: str) -> int:  # the target's slots that began in [started, end)
        first = started + phase_offset_seconds(name, INTERVAL_SECONDS)
        return max(0, math.ceil((end - first) / INTERVAL_SECONDS))

    def stored_in_slots(name: str) -> int:
        """The target's slots before ``end`` that have a stored scrape (a scrape belongs to
        the slot it started in; a late start on a busy loop counts up to 0.75 interval)."""
        first = started + phase_offset_seconds(name, INTERVAL_SECONDS)
        indices = {
            math.floor((stamp - wall_minus_monotonic - first) / INTERVAL_SECONDS + 0.25)
            for stamp in stamps[name]
        }
        return len(indices & set(range(slots(name))))

    stored = {t.name: stored_in_slots(t.name) for t in healthy}

    metric = collector.registry.get_sample_value
    skipped = {t.name: metric(cm.SKIPPED_SCRAPES + "_total", {"target": t.name}) for t in healthy}
    return {
        "timeout": timeout_seconds,
        "stored": sum(stored.values()),
        "scheduled": sum(slots(t.name) for t in healthy),
        "min_per_target": min(stored.values()),
        "max_skipped_healthy": max(skipped.values()),
        "median_delay": statistics.median(delays) if delays else math.nan,
        "p99_delay": statistics.quantiles(delays, n=100, method="inclusive")[98]
        if len(delays) > 1
        else math.nan,
        "max_delay": max(delays) if delays else math.nan,
        "hang_skipped": metric(cm.SKIPPED_SCRAPES + "_total", {"target": "hang"}),
        "slow_up": metric(cm.TARGET_UP, {"target": "slow"}),
    }


def main() -> None:
    num_intervals = int(os.environ.get("TAILWATCH_BENCH_INTERVALS", "30"))
    print(
        f"{NUM_HEALTHY} healthy simulated vLLM 0.33 targets + one hanging, one answering after "
        f"{SLOW_SHARE:g} x the interval, one flapping; interval {INTERVAL_SECONDS:g} s, "
        f"{num_intervals} intervals, SQLite"
    )
    rows = []
    with (
        target_server(NUM_HEALTHY, _FaultyTargets) as base_url,
        tempfile.TemporaryDirectory() as tmp,
    ):
        for share in (1.0, 0.8):
            db_url = f"sqlite:///{tmp}/schedule-{share:g}.db"
            rows.append(measure(base_url, db_url, share * INTERVAL_SECONDS, num_intervals))
    print(
        "| timeout | healthy scrapes stored / slots | fewest per target | most slots skipped "
        "(healthy) | write delay after scrape, median / p99 / max | hanging target: slots skipped |"
    )
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['timeout']:g} s | {r['stored']} / {r['scheduled']} | {r['min_per_target']} | "
            f"{r['max_skipped_healthy']:g} | {1000 * r['median_delay']:.1f} / "
            f"{1000 * r['p99_delay']:.1f} / {1000 * r['max_delay']:.1f} ms | "
            f"{r['hang_skipped']:g} |"
        )


if __name__ == "__main__":
    main()
