"""A smoke test of ``bench/console_query.py`` on a few minutes of data: the seeded histograms
are cumulative across buckets (as a scrape's are), and both read paths answer the same."""

from __future__ import annotations

import numpy as np

from bench import collector_query, console_query
from collectors.store import Store, sqlite_url


def test_both_paths_read_the_benchmark_store_alike(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(collector_query, "HOURS", 0.1)
    monkeypatch.setattr(console_query, "REPEATS", 1)
    url = sqlite_url(tmp_path / "bench.db")
    store = Store(url)
    try:
        _, last = collector_query._seed(store, np.random.default_rng(1))
        while store.maintain(last - 1.0).more_to_do:
            pass
        for later in (30.0, 90.0, 150.0):
            store.maintain(last + later)
        series = store.histogram_series("ttft_seconds", {"model": "m"}, last - 300, last, 60.0)
    finally:
        store.close()
    histograms = [h for _, h in series if h is not None]
    assert histograms
    for h in histograms:  # le-cumulative: +Inf holds the total
        assert list(h.cumulative_counts) == sorted(h.cumulative_counts)
    for read in ("quantile_series", "histogram_series", "histogram_window"):
        old = console_query._measure(url, False, read, last - 300, last)
        new = console_query._measure(url, True, read, last - 300, last)
        assert old["result"] == new["result"], read
