"""What every page shares: the context the entrypoint built (store URL, filters, SLOs), the
empty states that say what to do next, and number formatting. Stored strings are written as
text (``st.text``, ``st.dataframe``, markdown-escaped captions), never as HTML."""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import streamlit as st

from console.filters import Filters
from console.metric_frames import DataSpan
from console.settings import ConsoleSettings
from slo import QuantileResult, SLOSpec

_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
CONTEXT_KEY = "_tailwatch_context"
#: The page files, relative to the entrypoint (``st.page_link`` and ``AppTest.switch_page``).
OVERVIEW_PAGE = "app_pages/overview.py"
INCIDENTS_PAGE = "app_pages/incidents.py"
SLOS_PAGE = "app_pages/slos.py"
COST_PAGE = "app_pages/cost.py"
CAPACITY_PAGE = "app_pages/capacity.py"
TRACES_PAGE = "app_pages/traces.py"
KNOB_LAB_PAGE = "app_pages/knob_lab.py"


@dataclass(frozen=True)
class PageContext:
    """``problem``: why the store cannot be read (with what to do), empty when it can."""

    settings: ConsoleSettings
    filters: Filters
    slos: tuple[SLOSpec, ...]
    slo_problem: str
    problem: str
    live_seconds: float | None = None

    @property
    def url(self) -> str:
        return self.settings.db_url

    @property
    def start(self) -> pd.Timestamp:
        return pd.Timestamp(self.filters.start_seconds, unit="s", tz="UTC")

    @property
    def end(self) -> pd.Timestamp:
        return pd.Timestamp(self.filters.end_seconds, unit="s", tz="UTC")


def page_context(*, needs_store: bool = True) -> PageContext:
    """The entrypoint's context; a page that needs the store stops at an empty state that
    says how to fix it when the store cannot be read."""
    ctx: PageContext = st.session_state[CONTEXT_KEY]
    if needs_store and ctx.problem:
        st.warning("**No store to read.** " + escape(ctx.problem))
        st.markdown(
            "Start collecting with `tailwatch collect` (it creates and migrates the store), "
            "or point the console at an existing one with `tailwatch console --db URL`."
        )
        st.stop()
    return ctx


def escape(text: str) -> str:
    """``text`` safe inside Streamlit markdown: every ASCII punctuation character
    backslash-escaped (CommonMark), so a stored string can never become markup, HTML or a
    link; newlines become spaces."""
    return "".join(
        "\\" + ch if ch in _PUNCTUATION else (" " if ch in "\r\n" else ch) for ch in text
    )


def empty(what: str, next_step: str) -> None:
    """An empty state: what is missing and what to do next."""
    st.info(f"**{what}** {next_step}")


def ms(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds):
        return "—"
    return f"{seconds * 1000:,.0f} ms" if seconds * 1000 >= 10 else f"{seconds * 1000:.2f} ms"


def ms_value(seconds: float | None) -> str:
    """Seconds as a number of milliseconds without the unit (the label carries it)."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    value = seconds * 1000
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def bound_text(result: QuantileResult) -> str:
    """The bucket interval that holds the true quantile, e.g. ``in (100 ms, 250 ms]``."""
    low, high = result.lower_bound, result.upper_bound
    if math.isnan(low) or math.isnan(high):
        return "no bucket bound"
    if math.isinf(high):
        return f"above {ms(low)} (+Inf bucket)"
    return f"in ({ms(low)}, {ms(high)}]"


def percent(x: float | None, digits: int = 2) -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x * 100:.{digits}f} %"


def rate(x: float | None, unit: str = "/s") -> str:
    if x is None or not math.isfinite(x):
        return "—"
    return f"{x:,.2f}{unit}"


def duration_text(seconds: float) -> str:
    """``45 s``, ``2 min``, ``1 h 5 min``, ``2 d 3 h``: a span to its two largest units."""
    whole = max(0, round(seconds))
    if whole < 60:
        return f"{whole} s"
    for unit, size, smaller, smaller_size in (("d", 86400, "h", 3600), ("h", 3600, "min", 60)):
        if whole >= size:
            rest = (whole % size) // smaller_size
            return f"{whole // size} {unit} {rest} {smaller}" if rest else f"{whole // size} {unit}"
    return f"{round(whole / 60)} min"


def utc_minute(seconds: float, day_of: float) -> str:
    """``11:02 UTC``, with the date when it is not ``day_of``'s."""
    moment = pd.Timestamp(seconds, unit="s", tz="UTC")
    same_day = moment.date() == pd.Timestamp(day_of, unit="s", tz="UTC").date()
    return f"{moment:%H:%M} UTC" if same_day else f"{moment:%Y-%m-%d %H:%M} UTC"


def span_text(span: DataSpan | None, f: Filters) -> str:
    """What a rate over ``span`` is over, for a caption: ``over the last 1h`` when the data
    fills the range; ``over the last 2 min (data starts 11:02 UTC)`` when it begins inside
    it; ``over 2 min of data (11:02 UTC to 11:04 UTC)`` when it stopped before its end."""
    if span is None:
        return f"over the last {f.range_key}: no data"
    if span.ends_early:
        first = utc_minute(span.first_seconds, span.last_seconds)
        last = utc_minute(span.last_seconds, f.end_seconds)
        return f"over {duration_text(span.seconds)} of data ({first} to {last})"
    if span.starts_late:
        first = utc_minute(span.first_seconds, f.end_seconds)
        return f"over the last {duration_text(span.seconds)} (data starts {first})"
    return f"over the last {f.range_key}"


def section(title: str, caption: str = "") -> None:
    st.subheader(title, divider="gray")
    if caption:
        st.caption(caption)


def live_filters(ctx: PageContext) -> Filters:
    """The filters, with the window moved up to now on a live refresh (a fragment rerun does
    not rerun the entrypoint); a pinned (``until``) view never moves."""
    if ctx.live_seconds is None:
        return ctx.filters
    from dataclasses import replace

    from console import data
    from console.filters import floor_to_step

    end = floor_to_step(data.now(), ctx.filters.step_seconds)
    return replace(ctx.filters, end_seconds=max(end, ctx.filters.end_seconds))


def span(f: Filters) -> tuple[pd.Timestamp, pd.Timestamp]:
    return (
        pd.Timestamp(f.start_seconds, unit="s", tz="UTC"),
        pd.Timestamp(f.end_seconds, unit="s", tz="UTC"),
    )


def versus_target(attainment: float | None, target: float | None) -> str | None:
    """A metric's delta: attainment minus the SLO target in percentage points (green above,
    red below); ``None`` when either is unknown."""
    if attainment is None or target is None or not math.isfinite(attainment):
        return None
    return f"{(attainment - target) * 100:+.2f} pp vs target {target * 100:g} %"


class UncheckedChart:
    """An Altair chart as Streamlit's conversion reads it (its ``to_dict()``, under
    Streamlit's data transformer and theme), without Altair's check of the spec against the
    Vega-Lite JSON schema unless asked (``to_dict(validate=True)``)."""

    def __init__(self, chart) -> None:  # type: ignore[no-untyped-def]
        self.chart = chart

    def to_dict(self, validate: bool = False, **kwargs):  # type: ignore[no-untyped-def]
        return self.chart.to_dict(validate=validate, **kwargs)


def show_chart(chart, **kwargs) -> None:  # type: ignore[no-untyped-def]
    """``st.altair_chart`` without Altair's check of the spec against the Vega-Lite JSON
    schema, which Streamlit's conversion runs on every draw (``to_dict()``): a third of a
    second for the Overview's eleven charts on every run, cold or warm, for specs built by
    the same code each time. The tests check every chart each page draws against the schema
    instead (``tests/console/test_pages.py``)."""
    st.altair_chart(UncheckedChart(chart), **kwargs)
