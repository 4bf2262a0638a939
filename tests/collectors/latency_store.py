"""A store seeded with TTFT and ITL histograms whose every window is hand-countable: each
scrape adds the same per-bucket observations, so a window of ``n`` scrape intervals holds
``n`` times them. Shared by the SLO proposal tests (``collectors.slo_proposals`` and
``tailwatch slo propose``)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from collectors import canonical as c
from collectors.canonical import CanonicalHistogram
from collectors.store.records import ScrapeRecord
from engine.metric_names import BUCKETS

#: 2026-01-01T00:00:00Z: the first scrape of every seeded target.
START = 1_767_225_600.0
INTERVAL_SECONDS = 15.0
TTFT_BOUNDS = (*BUCKETS["time_to_first_token"], float("inf"))
ITL_BOUNDS = (*BUCKETS["inter_token_latency"], float("inf"))


def per_bucket(bounds: tuple[float, ...], counts: dict[float, int]) -> list[int]:
    """Observations per bucket of ``bounds`` from ``{upper_bound: count}``."""
    unknown = set(counts) - set(bounds)
    assert not unknown, f"not bucket edges: {unknown}"
    return [counts.get(bound, 0) for bound in bounds]


#: Per scrape: 1000 first tokens, 998 of them (99.8 %) within 0.25 s, the p99 in (0.1, 0.25].
TTFT_STEP = per_bucket(TTFT_BOUNDS, {0.04: 600, 0.1: 300, 0.25: 98, 0.5: 2})
#: Per scrape: 1000 gaps, 998 (99.8 %) within 0.05 s, the p99 in (0.025, 0.05].
ITL_STEP = per_bucket(ITL_BOUNDS, {0.025: 900, 0.05: 98, 0.1: 1, 0.2: 1})


def scrapes(
    target: str,
    model: str,
    num_scrapes: int,
    steps: dict[str, Sequence[int]],
    start: float = START,
) -> list[ScrapeRecord]:
    """``num_scrapes`` scrapes of ``target`` every :data:`INTERVAL_SECONDS` from ``start``;
    at scrape ``i`` each family in ``steps`` (``ttft_seconds``, ``itl_seconds``) holds
    ``i`` times its per-bucket observations, cumulative over the layout."""
    bounds = {c.TTFT_SECONDS: TTFT_BOUNDS, c.ITL_SECONDS: ITL_BOUNDS}
    labels = c.labels_key({c.LABEL_TARGET: target, c.LABEL_MODEL: model})
    records = []
    for i in range(num_scrapes):
        histograms = []
        for family, step in steps.items():
            cumulative = tuple(float(i * n) for n in itertools.accumulate(step))
            histograms.append(
                CanonicalHistogram(family, labels, bounds[family], cumulative, None, cumulative[-1])
            )
        records.append(ScrapeRecord(target, start + i * INTERVAL_SECONDS, (), tuple(histograms)))
    return records
