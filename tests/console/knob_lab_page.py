"""The knob lab page under AppTest, shared by the tests of its job forms (sweeps, replays):
the console's environment pointed at one store, the page opened, its texts read."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import streamlit as st
from streamlit.testing.v1 import AppTest

from console.page_kit import KNOB_LAB_PAGE
from console.settings import ADMIN_TOKEN_ENV, CONFIG_ENV, LIVE_ENV

APP = str(Path(__file__).resolve().parents[2] / "console" / "streamlit_app.py")


def console_env(url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fixture body: the console reads ``url``, with no config, no live refresh and no
    admin token; a started job's log goes under ``tmp_path``; Streamlit's caches are
    cleared before and after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(CONFIG_ENV, raising=False)
    monkeypatch.setenv(LIVE_ENV, "0")
    monkeypatch.setenv("TAILWATCH_DB_URL", url)
    monkeypatch.delenv(ADMIN_TOKEN_ENV, raising=False)
    st.cache_data.clear()
    st.cache_resource.clear()
    yield url
    st.cache_data.clear()
    st.cache_resource.clear()


def open_page() -> AppTest:
    at = AppTest.from_file(APP, default_timeout=60)
    at.switch_page(KNOB_LAB_PAGE).run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def plain(text: str) -> str:
    return text.replace("\\", "")  # NOTE: the page escapes Markdown


def page_texts(at: AppTest) -> str:
    kinds = (at.info, at.error, at.caption, at.success)
    return " ".join(plain(e.value) for kind in kinds for e in kind)
