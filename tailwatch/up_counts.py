"""``tailwatch up --demo``'s end-of-run check: what the store holds of the run against the
engines' own counters, read once every engine is idle (so both sides count the same
requests).

Every request the engines finished (``vllm:request_success_total``, any finish reason,
aborts included) must have exactly one request record, derived from its span; the TTFT
observations in the stored histograms must equal the engines' TTFT count. The stored window
needs a scrape of every replica before the first request (the baseline) and one after the
last (:meth:`RunCheck.baseline` and :meth:`RunCheck.finish` wait for each); the comparison
is read after the engines have drained and flushed their spans and the collector has
written what it holds (:meth:`RunCheck.report`, after the stack's stop).
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import httpx
from prometheus_client.parser import text_string_to_metric_families

from collectors.store import Store
from slo import histogram_quantile
from slo.window import merge_histograms

REQUEST_SUCCESS = "vllm:request_success"  # a counter family: samples end in _total
TTFT = "vllm:time_to_first_token_seconds"
RUNNING = "vllm:num_requests_running"
WAITING = "vllm:num_requests_waiting"
#: Seconds the engines get to finish what they hold before their counters are read.
IDLE_TIMEOUT_SECONDS = 30.0
#: Beyond three scrape intervals, seconds to wait for the collector to store a scrape.
SCRAPE_WAIT_MARGIN_SECONDS = 10.0


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


def added(counts: Iterable[RunCounts]) -> RunCounts:
    """Several replicas' counts as one."""
    by_reason: Counter[str] = Counter()
    num_ttft = 0
    for one in counts:
        by_reason.update(one.finished_by_reason)
        num_ttft += one.num_ttft_observations
    return RunCounts(dict(by_reason), num_ttft)


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


def _scrape(base_url: str) -> dict:
    text = httpx.get(f"{base_url}/metrics", timeout=5).text
    return {f.name: f for f in text_string_to_metric_families(text)}


def _busy(families: Mapping) -> float:
    return sum(
        s.value for name in (RUNNING, WAITING) if name in families for s in families[name].samples
    )


def idle_counts(
    engine_urls: Sequence[str], timeout_seconds: float = IDLE_TIMEOUT_SECONDS
) -> tuple[RunCounts, float] | None:
    """The engines' counters, added, once none holds a request (twice in a row, so an abort
    still on its way is counted), and the wall time they were read; None if one does not
    answer or they stay busy past ``timeout_seconds``."""
    deadline = time.monotonic() + timeout_seconds
    num_idle = 0
    while time.monotonic() < deadline:
        try:
            read = [_scrape(url) for url in engine_urls]
        except httpx.HTTPError:
            return None
        num_idle = num_idle + 1 if sum(_busy(f) for f in read) == 0 else 0
        if num_idle == 2:
            return added(engine_counts(f) for f in read), time.time()
        time.sleep(0.25)
    return None


@dataclass(frozen=True)
class StoreReport:
    num_scrapes: int
    num_up: int
    counts: RunCounts
    ttft_p50_seconds: float
    ttft_p99_seconds: float


def store_report(db_url: str, targets: Sequence[str], start: float, end: float) -> StoreReport:
    """What the store holds of ``targets`` (their names) over [start, end]; raises what the
    store raises."""
    store = Store(db_url, migrate=False)  # NOTE: a report reads; the collector migrated
    try:
        scrapes = [s for target in targets for s in store.scrapes(target, start, end)]
        records = store.requests(start, end, limit=10_000_000)
        windows = [
            store.histogram_window("ttft_seconds", {"target": target}, start, end)
            for target in targets
        ]
    finally:
        store.close()
    by_reason = Counter(r.finish_reason or "" for r in records)
    held = [w for w in windows if w is not None]
    window = merge_histograms(held) if held else None
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


def wait_for_scrape(
    db_url: str, targets: Sequence[str], after: float, timeout_seconds: float
) -> bool:
    """Wait until the store holds a successful scrape of each of ``targets`` taken at or
    after ``after`` (epoch seconds); False after the timeout."""
    deadline = time.monotonic() + timeout_seconds
    store = Store(db_url, migrate=False)
    try:
        while True:
            # NOTE: the collector may hold the database's write lock for a moment.
            with contextlib.suppress(Exception):
                if all(
                    any(up and t >= after for t, up, _ in store.scrapes(target, after))
                    for target in targets
                ):
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


def summary(
    report: StoreReport, targets: Sequence[str], final: tuple[RunCounts, float] | None
) -> tuple[list[str], bool]:
    """The lines that say what the collector stored of this run (scrapes, request records,
    the run's TTFT percentiles from the stored histograms) and the engines' own counters,
    and whether they agree (False too when the engines could not be read)."""
    stored = report.counts
    line = (
        f"The store holds {report.num_scrapes} scrapes of {', '.join(targets)} "
        f"({report.num_up} up) and {stored.num_finished} request records from the traces"
    )
    if stored.num_ttft_observations:
        line += (
            f"; over the run, TTFT p50 {format_ms(report.ttft_p50_seconds)} ms and p99 "
            f"{format_ms(report.ttft_p99_seconds)} ms from {stored.num_ttft_observations} stored "
            "observations"
        )
    lines = [line + "."]
    if final is None:
        lines.append("(the engines' own counters could not be read at the end of the run)")
        return lines, False
    engine = final[0]
    lines.append(
        f"The engines' own counters: {engine.describe()} finished requests "
        f"(vllm:request_success_total) and {engine.num_ttft_observations} TTFT observations; "
        f"request records by finish reason: {stored.describe()}."
    )
    problems = mismatches(engine, stored)
    if problems:
        lines.append("mismatch: the store does not match the engines: " + "; ".join(problems))
        return lines, False
    lines.append("Every finished request has exactly one request record: the store matches.")
    return lines, True


def format_ms(seconds: float) -> str:
    """Seconds as whole milliseconds; ``-`` for NaN (no observation)."""
    return "-" if seconds != seconds else f"{seconds * 1000:.0f}"


def target_names(collector_url: str, engine_urls: Sequence[str]) -> tuple[list[str], float]:
    """The collector's names for the engines at ``engine_urls`` and its longest scrape
    interval, from its ``GET /targets``; raises ``httpx.HTTPError`` when it does not
    answer."""
    body = httpx.get(f"{collector_url}/targets", timeout=5).json()["targets"]
    wanted = {f"{url}/metrics" for url in engine_urls}
    mine = [t for t in body if t["url"].rstrip("/") in wanted]
    interval = max((float(t["interval_seconds"]) for t in mine), default=0.0)
    return [t["target"] for t in mine], interval


class RunCheck:
    """The check over one ``tailwatch up --demo`` run: :meth:`baseline` before the traffic,
    :meth:`finish` once it has stopped (the stack still up), :meth:`report` once the stack
    has stopped."""

    def __init__(
        self, db_url: str, collector_url: str, engine_urls: Sequence[str], started_at: float
    ) -> None:
        self.db_url, self.engine_urls, self.started_at = db_url, list(engine_urls), started_at
        self.targets, interval = target_names(collector_url, engine_urls)
        self.scrape_wait_seconds = 3 * interval + SCRAPE_WAIT_MARGIN_SECONDS
        self.final: tuple[RunCounts, float] | None = None

    def baseline(self, say: Callable[[str], None]) -> None:
        """Wait for a stored scrape of every replica before the first request."""
        if not wait_for_scrape(
            self.db_url, self.targets, self.started_at, self.scrape_wait_seconds
        ):
            say("(the collector has not stored a scrape of every engine yet)")

    def finish(self, say: Callable[[str], None]) -> None:
        """Read the engines' counters once they are idle, then wait for a stored scrape of
        every replica after that."""
        self.final = idle_counts(self.engine_urls)
        if self.final is not None and not wait_for_scrape(
            self.db_url, self.targets, self.final[1], self.scrape_wait_seconds
        ):
            say("(the collector stored no scrape of every engine after the traffic)")

    def report(self, say: Callable[[str], None]) -> bool:
        """Say what the store holds beside the engines' counters; whether they agree."""
        try:
            report = store_report(self.db_url, self.targets, self.started_at, time.time())
        except Exception as error:  # NOTE: a summary must never turn a clean stop into a crash
            say(f"(no store summary: {error})")
            return False
        lines, matches = summary(report, self.targets, self.final)
        for line in lines:
            say(line)
        return matches
