"""How the console is started: the ``streamlit run`` command line (used by ``tailwatch
console`` and by the browser tests, so both run the same server) and its environment."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from collectors.store.connection import DB_URL_ENV
from console.settings import CONFIG_ENV, LIVE_ENV

APP = Path(__file__).with_name("streamlit_app.py")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8501
#: A Grafana-like dark theme.
THEME = {
    "theme.base": "dark",
    "theme.primaryColor": "#5794f2",
    "theme.backgroundColor": "#111217",
    "theme.secondaryBackgroundColor": "#181b1f",
    "theme.textColor": "#ccccdc",
}


def streamlit_command(host: str = DEFAULT_HOST, port: int = DEFAULT_PORT) -> list[str]:
    """``python -m streamlit run console/streamlit_app.py`` with the server bound to
    ``host:port`` (loopback by default: Streamlit alone binds every interface), headless,
    no usage statistics, no file watcher, XSRF protection left on."""
    options = {
        "server.address": host,
        "server.port": str(port),
        "server.headless": "true",
        "server.fileWatcherType": "none",
        "server.runOnSave": "false",
        "browser.gatherUsageStats": "false",
        "client.toolbarMode": "viewer",
        **THEME,
    }
    flags = [f"--{key}={value}" for key, value in options.items()]
    return [sys.executable, "-m", "streamlit", "run", str(APP), *flags]


def console_environment(
    base: Mapping[str, str], db_url: str, config: str | None, live_seconds: float
) -> dict[str, str]:
    """``base`` with the console's settings (:mod:`console.settings`) set."""
    env = dict(base)
    env[DB_URL_ENV] = db_url
    if config is not None:
        env[CONFIG_ENV] = config
    else:
        env.pop(CONFIG_ENV, None)
    env[LIVE_ENV] = f"{live_seconds:g}"
    return env
