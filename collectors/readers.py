"""One place that opens a metrics reader from a URL: the store for a database URL, the
push-down reader for a Prometheus-compatible server. The evaluator, triage and the console
take a :class:`~collectors.store.protocols.MetricsReader` and do not know which answered; the
store keeps Tailwatch's own records (alerts, incidents, silences, requests, traces, lab runs)
either way.
"""

from __future__ import annotations

from collections.abc import Mapping

from collectors.metrics_source import MetricsSource
from collectors.prometheus import PrometheusReader
from collectors.store import Store
from collectors.store.protocols import MetricsReader

_SERVER_SCHEMES = ("http://", "https://")
_DATABASE_SCHEMES = ("sqlite", "postgresql")


def reader_for(
    url: str,
    *,
    match: str = "",
    headers: Mapping[str, str] | None = None,
    semantics: str | None = None,
) -> MetricsReader:
    """``http(s)://…``: a :class:`PrometheusReader` on that server (``match``, ``headers``,
    ``semantics`` as it takes them); ``sqlite:///…`` or ``postgresql…://…``: the
    :class:`Store` at that URL. Anything else is a ``ValueError`` naming the URL."""
    if url.startswith(_SERVER_SCHEMES):
        return PrometheusReader(url, match=match, headers=headers, semantics=semantics)
    if url.split(":", 1)[0].split("+", 1)[0] in _DATABASE_SCHEMES:
        if match or headers or semantics:
            raise ValueError(f"{url}: match, headers and semantics are for a Prometheus URL")
        return Store(url)
    raise ValueError(
        f"metrics URL {url!r}: expected a Prometheus-compatible server (http(s)://host:port) "
        "or a store database (sqlite:///path.db, postgresql+psycopg://…)"
    )


def metrics_reader(source: MetricsSource | None, store: MetricsReader) -> MetricsReader:
    """The reader the evaluator, triage and the console read metrics through: the server of
    ``source`` (a ``prometheus:`` section or ``TAILWATCH_METRICS_URL``), else ``store`` itself.
    Either way ``store`` keeps Tailwatch's own records."""
    if source is None:
        return store
    return reader_for(source.url, match=source.match, headers=source.headers or None)
