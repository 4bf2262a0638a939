"""A smoke test of ``bench/console_render.py`` on a few minutes of 2 replicas: the store is
seeded (and then reused), both pages render from the entrypoint cold and warm without an
exception, and the table has every row. No timings are asserted (a shared machine)."""

from __future__ import annotations

import logging

import streamlit as st

from bench import console_render


def test_the_bench_renders_both_pages_and_prints_the_table(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TAILWATCH_LIVE", "0")
    logging.getLogger("streamlit").setLevel(logging.ERROR)
    url, config, last = console_render.seeded_store(tmp_path, hours=0.1, replicas=2)
    assert "seeded 0.1 h x 2 replicas" in capsys.readouterr().out
    again = console_render.seeded_store(tmp_path, hours=0.1, replicas=2)
    assert again == (url, config, last) and "seeded" not in capsys.readouterr().out  # reused
    try:
        rows, breakdown = console_render.measure(url, config, last, repeats=1)
    finally:
        st.cache_data.clear()
        st.cache_resource.clear()
    assert [row[:3] for row in rows] == [("trivial page", "-", "-")] + [
        (page, range_key, cache)
        for page in console_render.PAGES
        for range_key in console_render.TARGETS
        for cache in ("cold", "warm")
    ]
    assert [row[:2] for row in breakdown] == [row[:2] for row in rows[1::2]]
    overview = [row for row in rows if row[0] == "Overview"]
    assert all(row[7] >= 10 for row in overview), "the Overview draws its charts"
    console_render.print_table(console_render.HEADERS, rows)
    printed = capsys.readouterr().out
    assert "| Overview" in printed and "| SLOs" in printed and "≤ 1 s" in printed
