"""The console's entrypoint (``tailwatch console``; ``streamlit run console/streamlit_app.py``).

A frame around every page: ``st.navigation`` over ``app_pages/``, and the shared filters
(time range, model, target, tenant) in the sidebar, seeded from the URL and written back to
it, so any view is a link. URL values are untrusted: each is checked against the known
choices (:mod:`console.filters`) and dropped with a warning when it is not one.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

# NOTE: `streamlit run` puts this file's folder on sys.path, not the repository root.
_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

import streamlit as st  # noqa: E402

from console import data, filters  # noqa: E402
from console.page_kit import (  # noqa: E402
    CAPACITY_PAGE,
    CONTEXT_KEY,
    COST_PAGE,
    INCIDENTS_PAGE,
    KNOB_LAB_PAGE,
    OVERVIEW_PAGE,
    SLOS_PAGE,
    TRACES_PAGE,
    PageContext,
    escape,
)

ALL = "all"

st.set_page_config(page_title="Tailwatch", page_icon=":material/monitoring:", layout="wide")

pages = {
    "Monitor": [
        st.Page(OVERVIEW_PAGE, title="Overview", icon=":material/monitoring:", default=True),
        st.Page(
            INCIDENTS_PAGE,
            title="Incidents",
            icon=":material/notifications_active:",
            url_path="incidents",
        ),
        st.Page(TRACES_PAGE, title="Traces", icon=":material/timeline:", url_path="traces"),
    ],
    "Plan": [
        st.Page(SLOS_PAGE, title="SLOs & goodput", icon=":material/target:", url_path="slos"),
        st.Page(COST_PAGE, title="Cost", icon=":material/payments:", url_path="cost"),
        st.Page(CAPACITY_PAGE, title="Capacity", icon=":material/calculate:", url_path="capacity"),
        st.Page(KNOB_LAB_PAGE, title="Knob lab", icon=":material/tune:", url_path="knob_lab"),
    ],
}
navigation = st.navigation(pages)

settings = data.settings()
status = data.store_status(settings.db_url)
warnings: list[str] = []


def _seed(key: str, value: str) -> None:
    """A widget's first value comes from the URL; later runs keep the user's choice."""
    if key not in st.session_state:
        st.session_state[key] = value


params = st.query_params
range_key, warning = filters.parse_range(params.get(filters.RANGE_PARAM))
warnings += [warning] if warning else []
until, warning = filters.parse_until(params.get(filters.UNTIL_PARAM))
warnings += [warning] if warning else []
# NOTE: whole seconds, so the URL written back parses again (parse_until takes <= 6 decimals)
_seed("f_until", "" if until is None else f"{until:.0f}")

choices = data.catalog(settings.db_url) if status.store is not None else {"model": [], "target": []}
with st.sidebar:
    st.markdown("### Tailwatch")
    _seed("f_range", range_key)
    st.selectbox("Time range", list(filters.RANGES), key="f_range")
    pinned = st.session_state["f_until"]
    if pinned:
        st.caption(
            f"Pinned to {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(float(pinned)))} UTC"
        )
        if st.button("Follow now", key="f_follow"):
            st.session_state["f_until"] = ""
            pinned = ""
    end_seconds = float(pinned) if pinned else data.now()
    step = filters.step_for(filters.RANGES[st.session_state["f_range"]])
    end_seconds = filters.floor_to_step(end_seconds, step)
    tenant_choices: list[str] = []
    if status.store is not None:
        start = end_seconds - filters.RANGES[st.session_state["f_range"]]
        tenant_choices = data.tenants(settings.db_url, start, end_seconds)
    chosen: dict[str, str | None] = {}
    for name, options in (
        (filters.MODEL_PARAM, choices["model"]),
        (filters.TARGET_PARAM, choices["target"]),
        (filters.TENANT_PARAM, tenant_choices),
    ):
        value, warning = filters.parse_choice(name, params.get(name), options)
        warnings += [warning] if warning else []
        key = f"f_{name}"
        _seed(key, value or ALL)
        if st.session_state[key] not in (ALL, *options):
            st.session_state[key] = ALL  # a choice that left the store (retention)
        label = "Target (replica)" if name == filters.TARGET_PARAM else name.capitalize()
        st.selectbox(label, [ALL, *options], key=key)
        picked = st.session_state[key]
        chosen[name] = None if picked == ALL else picked
    has_live = settings.live_seconds is not None
    is_live = st.toggle(
        "Live refresh",
        value=has_live,
        key="f_live",
        disabled=not has_live,
        help=f"Re-read the store every {settings.live_seconds:g} s"
        if has_live
        else "TAILWATCH_LIVE=0",
    )
    shown = [f"{k}={v}" for k, v in chosen.items() if v is not None]
    if shown:
        # NOTE: stored label values are shown escaped: a tenant named <script> is text.
        st.caption("Showing " + escape(", ".join(shown)))
    for text in warnings:
        st.warning(text, icon="⚠️")

current = filters.Filters(
    range_key=st.session_state["f_range"],
    end_seconds=end_seconds,
    model=chosen[filters.MODEL_PARAM],
    target=chosen[filters.TARGET_PARAM],
    tenant=chosen[filters.TENANT_PARAM],
)
configured = data.slos(settings.config_path)
live_seconds = settings.live_seconds if is_live and not st.session_state["f_until"] else None
st.session_state[CONTEXT_KEY] = PageContext(
    settings, current, configured.slos, configured.problem, status.problem, live_seconds
)

# Write the filters back to the URL (defaults removed), leaving the page's own parameters.
wanted = {
    filters.RANGE_PARAM: None if current.range_key == filters.DEFAULT_RANGE else current.range_key,
    filters.UNTIL_PARAM: st.session_state["f_until"] or None,
    filters.MODEL_PARAM: current.model,
    filters.TARGET_PARAM: current.target,
    filters.TENANT_PARAM: current.tenant,
}
for name, value in wanted.items():
    if value is None:
        if name in st.query_params:
            del st.query_params[name]
    elif st.query_params.get(name) != value:
        st.query_params[name] = value

navigation.run()
