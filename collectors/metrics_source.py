"""Where the metrics are read from: ``tailwatch.yaml``'s ``prometheus:`` section (or
``TAILWATCH_METRICS_URL``), validated into :class:`MetricsSource`.

```yaml
prometheus:                        # read the fleet's metrics from this server, pushed down
  url: http://prometheus:9090      # Prometheus, Thanos Query, Mimir, VictoriaMetrics
  match: '{job="vllm"}'            # optional: matchers added to every query
  headers: {X-Scope-OrgID: team-a} # optional: sent with every request
```

Without it the evaluator and the console read the store's own scraped metrics, as before.
With it they read the server through :func:`collectors.readers.reader_for`, and the store keeps
only Tailwatch's own records (alerts, incidents, silences, request records, traces, lab runs).
``TAILWATCH_METRICS_URL`` (and ``TAILWATCH_METRICS_MATCH``) set it from the environment, which
is how ``tailwatch console`` hands it to the Streamlit process; the environment wins over the
file, as ``TAILWATCH_DB_URL`` does over ``database_url``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from collectors.config import ConfigError, check_mapping
from collectors.urls import url_problem

METRICS_URL_ENV = "TAILWATCH_METRICS_URL"
METRICS_MATCH_ENV = "TAILWATCH_METRICS_MATCH"
SECTION = "prometheus"


@dataclass(frozen=True)
class MetricsSource:
    """A Prometheus-compatible server the metrics are read from (``match``: matchers such as
    ``job="vllm"`` added to every query; ``headers``: sent with every request)."""

    url: str
    match: str = ""
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


def check_metrics_url(url: str, where: str) -> str:
    """``url`` stripped of a trailing ``/``; a ``ConfigError`` naming ``where`` when it is not
    an http(s) URL."""
    problem = url_problem(url) if isinstance(url, str) else f"expected a URL, got {url!r}"
    if problem is not None:
        raise ConfigError(f"{where}: {problem} (a Prometheus-compatible server, e.g. "
                          "http://127.0.0.1:9090)")  # fmt: skip
    return url.rstrip("/")


def parse_prometheus_section(data: Any, key: str = SECTION) -> MetricsSource | None:
    """The ``prometheus:`` section; ``None`` when absent (``data`` is ``None``)."""
    if data is None:
        return None
    section = check_mapping(data, key, {"url", "match", "headers"})
    if "url" not in section:
        raise ConfigError(f"{key}.url: required (the server's URL, e.g. http://127.0.0.1:9090)")
    url = check_metrics_url(section["url"], f"{key}.url")
    match = section.get("match", "")
    if not isinstance(match, str):
        raise ConfigError(
            f"{key}.match: expected matchers such as '{{job=\"vllm\"}}', got {match!r}"
        )
    headers = check_mapping(section.get("headers", {}), f"{key}.headers", None)
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise ConfigError(f"{key}.headers: expected strings, got {name!r}: {value!r}")
    return MetricsSource(url, match.strip(), MappingProxyType(dict(headers)))


def metrics_source_of(
    configured: MetricsSource | None, environ: Mapping[str, str]
) -> MetricsSource | None:
    """``TAILWATCH_METRICS_URL`` (with ``TAILWATCH_METRICS_MATCH``) when set, else
    ``configured``; the file's headers are kept when the URL is the same."""
    url = environ.get(METRICS_URL_ENV, "").strip()
    if not url:
        return configured
    url = check_metrics_url(url, METRICS_URL_ENV)
    match = environ.get(METRICS_MATCH_ENV, "").strip()
    same = configured is not None and configured.url == url
    headers = configured.headers if same and configured is not None else MappingProxyType({})
    if not match and same and configured is not None:
        match = configured.match
    return MetricsSource(url, match, headers)
