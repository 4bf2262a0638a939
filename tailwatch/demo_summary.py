"""The demo's end-of-run check: what the store holds of the run against the engine's own
counters, read once the engine is idle (so both sides count the same requests).

Every request the engine finished (``vllm:request_success_total``, any finish reason,
aborts included) must have exactly one request record, derived from its span; the TTFT
observations in the stored histograms must equal the engine's TTFT count. The stored
window needs a scrape before the first request (the baseline) and one after the last
(:func:`wait_for_scrape` waits for each).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from rich.console import Console

from slo import histogram_quantile

REQUEST_SUCCESS = "vllm:request_success"  # a counter family: samples end in _total
TTFT = "vllm:time_to_first_token_seconds"


@dataclass(frozen=True)
class RunCounts:
    """One side's count of the run: finished requests by finish reason, and TTFT
    observations."""

    finished_by_reason: Mapping[str, int]
    num_ttft_observations: int

    @property
    def num_finished(self) -> int:
        return sum(self.finished_by_reason.values())

    def describe(self) -> str:
        reasons = ", ".join(f"{k} {v}" for k, v in sorted(self.finished_by_reason.items()) if v)
        return f"{self.num_finished} ({reasons or 'none'})"


def engine_counts(families: Mapping) -> RunCounts:
    """The engine's counters from its parsed ``/metrics`` (name → metric family)."""
    by_reason: Counter[str] = Counter()
    family = families.get(REQUEST_SUCCESS)
    for sample in family.samples if family is not None else ():
        if sample.name == f"{REQUEST_SUCCESS}_total":
            by_reason[sample.labels.get("finished_reason", "")] += int(sample.value)
    ttft = families.get(TTFT)
    count = sum(
        s.value for s in (ttft.samples if ttft is not None else ()) if s.name == f"{TTFT}_count"
    )
    return RunCounts(dict(by_reason), int(count))


@dataclass(frozen=True)
class StoreReport:
    num_scrapes: int
    num_up: int
    counts: RunCounts
    ttft_p50_seconds: float
    ttft_p99_seconds: float


def store_report(db_url: str, target: str, start: float, end: float) -> StoreReport:
    """What the store holds of ``target`` over [start, end]; raises what the store raises."""
    from collectors.store import Store

    store = Store(db_url, migrate=False)  # NOTE: a report reads; the collector migrated
    try:
        scrapes = store.scrapes(target, start, end)
        records = store.requests(start, end, limit=10_000_000)
        window = store.histogram_window("ttft_seconds", {"target": target}, start, end)
    finally:
        store.close()
    by_reason = Counter(r.finish_reason or "" for r in records)
    count = window.cumulative_counts[-1] if window is not None else 0.0
    p50 = p99 = float("nan")
    if window is not None and count > 0:
        buckets = list(zip(window.upper_bounds, window.cumulative_counts, strict=True))
        p50, p99 = (histogram_quantile(q, buckets).value for q in (0.5, 0.99))
    return StoreReport(
        num_scrapes=len(scrapes),
        num_up=sum(1 for s in scrapes if s[1]),
        counts=RunCounts(dict(by_reason), int(count)),
        ttft_p50_seconds=p50,
        ttft_p99_seconds=p99,
    )


def wait_for_scrape(db_url: str, target: str, after: float, timeout_seconds: float) -> bool:
    """Wait until the store holds a successful scrape of ``target`` taken at or after
    ``after`` (epoch seconds); False after the timeout."""
    from collectors.store import Store

    deadline = time.monotonic() + timeout_seconds
    store = Store(db_url)
    try:
        while True:
            # NOTE: the collector may hold the database's write lock for a moment.
            with contextlib.suppress(Exception):
                if any(up and t >= after for t, up, _ in store.scrapes(target)):
                    return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.25)
    finally:
        store.close()


def mismatches(engine: RunCounts, stored: RunCounts) -> list[str]:
    """What differs between the engine's counts and the store's; empty when they agree."""
    problems = []
    reasons = set(engine.finished_by_reason) | set(stored.finished_by_reason)
    for reason in sorted(reasons):
        want = engine.finished_by_reason.get(reason, 0)
        got = stored.finished_by_reason.get(reason, 0)
        if want != got:
            problems.append(f"{reason or 'no reason'}: engine {want}, records {got}")
    if engine.num_ttft_observations != stored.num_ttft_observations:
        problems.append(
            f"TTFT observations: engine {engine.num_ttft_observations}, "
            f"stored {stored.num_ttft_observations}"
        )
    return problems


def print_summary(
    console: Console,
    db_url: str,
    target: str,
    start: float,
    end: float,
    final: tuple[RunCounts, float] | None,
) -> bool:
    """Print what the collector stored of this run (scrapes, request records, the run's
    TTFT percentiles from the stored histograms) and the engine's own counters; returns
    whether they agree (False too when either side could not be read)."""
    try:
        report = store_report(db_url, target, start, end)
    except Exception as error:  # NOTE: a summary must never turn a finished demo into a crash
        console.print(f"(no store summary: {error})")
        return False
    stored = report.counts
    line = (
        f"The store holds {report.num_scrapes} scrapes of {target} ({report.num_up} up) and "
        f"{stored.num_finished} request records from the traces"
    )
    if stored.num_ttft_observations:
        line += (
            f"; over the run, TTFT p50 {format_ms(report.ttft_p50_seconds)} ms and p99 "
            f"{format_ms(report.ttft_p99_seconds)} ms from {stored.num_ttft_observations} stored "
            "observations"
        )
    console.print(line + ".", highlight=False, soft_wrap=True)
    if final is None:
        console.print("(the engine's own counters could not be read at the end of the run)")
        return False
    engine = final[0]
    console.print(
        f"The engine's own counters: {engine.describe()} finished requests "
        f"(vllm:request_success_total) and {engine.num_ttft_observations} TTFT observations; "
        f"request records by finish reason: {stored.describe()}.",
        highlight=False,
        soft_wrap=True,
    )
    problems = mismatches(engine, stored)
    if problems:
        console.print(
            "[bold red]mismatch:[/] the store does not match the engine: " + "; ".join(problems)
        )
        return False
    console.print("Every finished request has exactly one request record: the store matches.")
    return True


def format_ms(seconds: float) -> str:
    """Seconds as whole milliseconds; ``-`` for NaN (no observation)."""
    return "-" if seconds != seconds else f"{seconds * 1000:.0f}"
