"""A smoke test of ``bench/alerts_eval.py`` on a few minutes of data: the seeding matches
the store's schema, every rule evaluates without error, and healthy traffic fires nothing (so
the benchmark measures the quiet cycle it says it measures)."""

from __future__ import annotations

from bench import alerts_eval
from collectors.store import Store, sqlite_url


def test_the_benchmark_store_evaluates_cleanly(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(alerts_eval, "HOURS", 0.1)
    store = Store(sqlite_url(tmp_path / "bench.db"))
    try:
        rows, last = alerts_eval._seed(store, 4)
        assert rows == 4 * 24 * (8 + 4)  # 24 scrapes after the first, 8 samples + 4 histograms
        while store.maintain(last - 120.0).more_to_do:
            pass
        store.maintain(last + 90.0)
        store.maintain(last + 150.0)
        assert store.rollup_coverage() == float("inf")  # the benchmark reads roll-ups
        cpu, wall, result = alerts_eval.measure(store, last, repeats=2)
    finally:
        store.close()
    assert cpu > 0 and wall > 0
    assert result.errors == () and result.alerts == ()
