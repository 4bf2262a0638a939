"""A small store for the knob lab's tests, written directly (no engine run): one engine target
scraped every 30 s for ten minutes at a known request rate with TTFT/ITL histograms, two
stored sweeps (a finished simulated one with three repeats per point, and a running one), a
replay, and — when asked — a live knob change on the target after the finished sweep."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from collectors import canonical as c
from collectors.canonical import CanonicalHistogram, CanonicalSample, Kind, RawSample
from collectors.store import ScrapeRecord, Store, sqlite_url
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from collectors.store.protocols import LabStore

KNOB = "max_num_batched_tokens"
VALUES = (512, 4096)
RATES = (5.0, 10.0, 20.0)
REPEATS = 3
#: Mean SLO attainment per (value, rate): 512's knee is 10 req/s, 4096's 20 req/s.
ATTAINMENT = {512: (1.0, 0.95, 0.7), 4096: (1.0, 0.93, 0.91)}
REQUESTS_PER_SECOND = 4.0
SCRAPE_EVERY_SECONDS = 30.0
BOUNDS = (0.01, 0.05, 0.1, 0.5, 1.0, math.inf)


@dataclass(frozen=True)
class LabSeeded:
    url: str
    target: str
    sweep_id: int
    running_id: int
    replay_id: int
    swept_at: float  # when the finished sweep finished
    until: float  # pin the page here: the whole seeded window is in its 15 m range
    changed_at: float | None  # the knob change's scrape, when one was written


def _scrape(target: str, t: float, n: int, knob_changes: float | None) -> ScrapeRecord:
    labels = c.labels_key({"model": "tiny", "target": target})
    count = REQUESTS_PER_SECOND * SCRAPE_EVERY_SECONDS * n
    # NOTE: every request at 30 ms TTFT and 8 ms gaps: one bucket each, a flat p95 line
    ttft = tuple(0.0 if b < 0.05 else count for b in BOUNDS)
    itl = tuple(0.0 if b < 0.01 else count * 5 for b in BOUNDS)
    histograms = (
        CanonicalHistogram(c.TTFT_SECONDS, labels, BOUNDS, ttft, 0.03 * count, count),
        CanonicalHistogram(c.ITL_SECONDS, labels, BOUNDS, itl, 0.008 * count * 5, count * 5),
    )
    finished = c.labels_key({"model": "tiny", "target": target, c.LABEL_FINISHED_REASON: "stop"})
    samples = (CanonicalSample(c.REQUESTS_TOTAL, finished, count, Kind.COUNTER),)
    raw = ()
    if knob_changes is not None:
        knob_labels = c.labels_key({"model": "tiny", "target": target, "knob": KNOB, "engine": "0"})
        raw = (RawSample("tailwatch:knob_changes_total", knob_labels, knob_changes, "counter"),)
    return ScrapeRecord(target, t, samples=samples, histograms=histograms, raw=raw)


def _samples(rng: np.random.Generator, value: int, rate: float) -> dict[str, list[float]]:
    # NOTE: 4096 lets long prefills stall decodes: a clearly higher ITL tail than 512
    itl_scale = 8.0 if value == 512 else 14.0
    return {
        "ttft_ms": list(rng.lognormal(np.log(40 + rate), 0.3, 120)),
        "itl_ms": list(rng.lognormal(np.log(itl_scale), 0.35, 400)),
        "e2e_ms": list(rng.lognormal(np.log(900), 0.2, 120)),
    }


def _summary(attainment: float, samples: dict[str, list[float]], rate: float) -> dict:
    def stats(values):
        return {f"p{p}": float(np.percentile(values, p)) for p in (50, 90, 95, 99)}

    return {
        "slo_attainment": attainment,
        "request_goodput": attainment * rate,
        "request_throughput": rate,
        "num_scheduled": int(rate * 30),
        "ttft_ms": stats(samples["ttft_ms"]),
        "itl_ms": stats(samples["itl_ms"]),
        "e2el_ms": stats(samples["e2e_ms"]),
    }


def seed_lab(lab: LabStore, now: float, *, target_knobs: dict | None = None) -> tuple[int, ...]:
    """The sweeps and the replay; ``target_knobs``: the shared knobs of the finished sweep
    (default: a simulated 8B on an H100)."""
    rng = np.random.default_rng(3)
    knobs = target_knobs or {"model": "sim:llama-3.1-8b@h100"}
    sweep = LabRun(
        LabRunKind.SWEEP, "mnbt 512 vs 4096", now - 120, "sim:llama-3.1-8b@h100", True,
        knobs, {"prompt_tokens": 1024}, KNOB, VALUES, RATES, REPEATS,
        len(VALUES) * len(RATES) * REPEATS,
    )  # fmt: skip
    sweep_id = lab.create_lab_run(sweep)
    for value in VALUES:
        for rate, attainment in zip(RATES, ATTAINMENT[value], strict=True):
            for repeat in range(REPEATS):
                samples = _samples(rng, value, rate)
                summary = _summary(attainment, samples, rate)
                lab.add_lab_point(LabPoint(sweep_id, value, rate, repeat, summary, samples))
    lab.finish_lab_run(sweep_id, LabRunStatus.FINISHED)
    running = LabRun(
        LabRunKind.SWEEP, "rates only, running", now - 30, "tiny", False, {"model": "tiny"},
        {}, None, (), (2.0, 4.0, 8.0, 16.0), 1, 4,
    )  # fmt: skip
    running_id = lab.create_lab_run(running)
    samples = _samples(rng, 512, 2.0)
    lab.add_lab_point(LabPoint(running_id, None, 2.0, 0, _summary(1.0, samples, 2.0), samples))
    replay = LabRun(
        LabRunKind.REPLAY, "yesterday's peak", now - 20, "sim:llama-3.1-8b@h100", True,
        {"model": "sim:llama-3.1-8b@h100"}, {}, window=(now - 4000, now - 3400),
    )  # fmt: skip
    replay_id = lab.create_lab_run(replay)
    production = _summary(0.97, _samples(rng, 512, 5.0), 5.0)
    replayed = _summary(0.99, _samples(rng, 512, 5.0), 5.0)
    lab.add_lab_point(
        LabPoint(replay_id, None, 5.0, 0, {"replay": replayed, "production": production})
    )
    lab.add_lab_point(LabPoint(replay_id, None, 5.0, 1, {"unexpected": 1}))
    # NOTE: tailwatch replay's own shape: the replay's summary at the top level
    written = {**replayed, "production": {**production, "itl_ms": {"p50": None}},
               "replay": {"speed": 1.0, "virtual_time": True, "timed_at": "server",
                          "replicas": 2, "route": "as-recorded"}}  # fmt: skip
    lab.add_lab_point(LabPoint(replay_id, None, 5.0, 2, written))
    lab.finish_lab_run(replay_id, LabRunStatus.FINISHED)
    return sweep_id, running_id, replay_id


def seed_store(
    folder: Path,
    *,
    target: str = "127.0.0.1:9",
    knob_change: bool = True,
    sweep_knobs=None,
    scrapes_after_sweep: bool = True,
) -> LabSeeded:
    """The store in ``folder``; ``sweep_knobs``: the finished sweep's shared knobs;
    ``scrapes_after_sweep`` off ends the written scrapes at the sweep (a real collector
    scrapes the target next)."""
    url = sqlite_url(folder / "lab.db")
    store = Store(url)
    now = time.time()
    sweep_id, running_id, replay_id = seed_lab(store, now, target_knobs=sweep_knobs)
    swept_at = store.lab_run(sweep_id).finished_at
    changed_at = None
    last = swept_at + (31 if scrapes_after_sweep else -1)
    for n, t in enumerate(np.arange(swept_at - 600, last, SCRAPE_EVERY_SECONDS)):
        changes = None
        if knob_change and t > swept_at:
            changes = 1.0
            changed_at = changed_at or float(t)
        store.write_scrape(_scrape(target, float(t), n, changes))
    store.close()
    return LabSeeded(
        url, target, sweep_id, running_id, replay_id, swept_at, swept_at + 60, changed_at
    )
