"""Reading canonical families from a Prometheus-compatible server (Prometheus, Thanos, Mimir,
VictoriaMetrics) over its HTTP API, for fleets whose engines that server already scrapes.

What comes back is what a scrape would have given: :meth:`PrometheusSource.read` fetches the
raw samples (range-vector instant queries, which return every stored sample with the
server's own scrape timestamps, never an evaluated or interpolated value), groups them per
target (``instance``) and timestamp, rebuilds the exposition's metric families, runs them
through :func:`collectors.dialects.normalise` (the same mapping as scraping) and returns one
:class:`~collectors.store.ScrapeRecord` per target per scrape. The store keys scrapes by
target and timestamp, so reading an overlapping range again stores nothing twice.

Staleness markers are NaN samples; Prometheus's range selection skips them, and any NaN
value that still arrives is dropped (the JSON API cannot tell a marker from a NaN reading).
``up`` and ``scrape_duration_seconds`` of the same targets give each record its state and
duration; a failed scrape (``up`` 0) becomes a down record.
"""

from __future__ import annotations

import logging
import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from collectors import canonical as c
from collectors.dialect_rules import PREFIXED_RULES, PREFIXES, UNPREFIXED_RULES, Rule
from collectors.dialects import normalise
from collectors.prometheus.api import PrometheusAPI, PrometheusSourceError
from collectors.store.records import ScrapeRecord

if TYPE_CHECKING:
    from collectors.store.repository import Store

logger = logging.getLogger("tailwatch.promql")

DEFAULT_TIMEOUT_SECONDS = 30.0
#: Longest range one query asks for; longer reads are split (Prometheus refuses queries that
#: would load more than ``--query.max-samples``, 50 million by default).
DEFAULT_CHUNK_SECONDS = 1800.0
#: How far back the first :meth:`PrometheusSource.poll` reads, and the longest catch-up.
DEFAULT_LOOKBACK_SECONDS = 3600.0
#: How much of what was already read a poll reads again, for samples that arrive late.
DEFAULT_OVERLAP_SECONDS = 60.0

#: The default selector: every engine dialect's prefix, colon prefixes also in the
#: underscore spelling that Prometheus 2.x stores for prometheus_client 0.26 exporters
#: (``shared/reference/engine-metrics.md`` §8.9).
DEFAULT_MATCH = (
    '{__name__=~"(tailwatch:|vllm[:_]|sglang[:_]|llamacpp[:_]|tgi_|trtllm[:_]|dynamo_|nv_).*"}',
)

TARGET_LABEL = "instance"
UP = "up"
SCRAPE_DURATION = "scrape_duration_seconds"
DOWN_ERROR = "down in Prometheus (up=0)"
#: How long fetched ``/api/v1/metadata`` is reused while it describes every name read.
METADATA_MAX_AGE_SECONDS = 600.0
#: Scrapes written per store transaction by :meth:`PrometheusSource.poll`.
WRITE_BATCH = 500
#: The bundled engine's per-tenant families: their ``tenant`` label may be empty.
TENANT_FAMILY_PREFIX = "tailwatch:tenant_"

_RULES: dict[str, tuple[Rule, ...]] = {**PREFIXED_RULES, **UNPREFIXED_RULES}
_COLON_PREFIXES = tuple(prefix for prefix, _ in PREFIXES if prefix.endswith(":"))
_HISTOGRAM_CHILDREN = ("_bucket", "_sum", "_count", "_created")
_SUMMARY_CHILDREN = ("_sum", "_count", "_created")


@dataclass
class PrometheusSource:
    """Canonical families read from a Prometheus-compatible HTTP API at ``url`` (the base
    URL: ``http://prometheus:9090``, or Mimir's ``http://mimir/prometheus``).

    ``match``: series selectors whose raw samples are read (default: every engine dialect's
    prefix). ``headers``: sent with every request (e.g. ``Authorization``,
    ``X-Scope-OrgID`` for Mimir). ``default_labels``: fill labels a source lacks, as a scrape
    target's labels do. ``delay_seconds``: read only up to ``now - delay`` in :meth:`poll`,
    for backends that make a scrape visible piece by piece (Thanos receive, Mimir); a scrape
    stored while partly visible is not completed later.
    """

    url: str
    match: Sequence[str] = DEFAULT_MATCH
    headers: Mapping[str, str] | None = None
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    default_labels: Mapping[str, str] | None = None
    chunk_seconds: float = DEFAULT_CHUNK_SECONDS
    lookback_seconds: float = DEFAULT_LOOKBACK_SECONDS
    overlap_seconds: float = DEFAULT_OVERLAP_SECONDS
    delay_seconds: float = 0.0
    client: httpx.Client | None = None
    clock: Callable[[], float] = time.time
    #: The newest timestamp read per target, kept by :meth:`poll`.
    last_seen: dict[str, float] = field(default_factory=dict)
    # ``/api/v1/metadata`` answers for the whole server (megabytes on a large one): it is
    # fetched again only when a name read is not described, or after METADATA_MAX_AGE_SECONDS.
    _types: dict[str, str] = field(default_factory=dict, init=False, repr=False)
    _types_fetched_at: float | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        parsed = httpx.URL(self.url)
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise PrometheusSourceError(
                f"Prometheus URL: expected http(s)://host[:port][/prefix], got {self.url!r}"
            )
        if isinstance(self.match, str):
            self.match = (self.match,)
        if not self.match or not all(isinstance(m, str) and m.strip() for m in self.match):
            raise PrometheusSourceError(f"match: expected series selectors, got {self.match!r}")
        for name, value in (("timeout", self.timeout), ("chunk_seconds", self.chunk_seconds)):
            if not value > 0:
                raise PrometheusSourceError(f"{name}={value}: must be > 0")
        self._base = self.url.rstrip("/")
        self._client = self.client or httpx.Client(
            timeout=self.timeout, follow_redirects=False, trust_env=False
        )
        self._api = PrometheusAPI(self._base, self.headers, self.timeout, self._client)

    def close(self) -> None:
        if self.client is None:
            self._client.close()

    def __enter__(self) -> PrometheusSource:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # -- reading ---------------------------------------------------------------------------

    def read(self, start: float, end: float) -> list[ScrapeRecord]:
        """Every scrape the server holds with ``start <= t <= end`` (Unix seconds, at
        millisecond precision, as Prometheus stores them), one record per target and
        timestamp, in time order."""
        if not end >= start:
            raise PrometheusSourceError(f"read: end {end} is before start {start}")
        start_ms, end_ms = math.ceil(start * 1000), math.floor(end * 1000)
        if start_ms > end_ms:  # no whole millisecond in between
            return []
        series: dict[tuple[tuple[str, str], ...], dict[int, float]] = {}
        for selector in self.match:
            for labels, points in self._range_samples(selector, start_ms, end_ms):
                series.setdefault(labels, {}).update(points)
        targets = sorted({dict(k).get(TARGET_LABEL, "") for k in series} - {""})
        health = self._health(targets, start_ms, end_ms) if targets else {}
        metadata = self._metadata_for({dict(k).get("__name__", "") for k in series})
        return _records(series, health, metadata, self.default_labels)

    def poll(self, store: Store, now: float | None = None) -> list[ScrapeRecord]:
        """Read what arrived since the last poll (the first reads ``lookback_seconds``) and
        write it to ``store``; returns the records that were new to the store.

        Each poll starts ``overlap_seconds`` before the oldest newest-timestamp of the
        targets seen (never more than ``lookback_seconds`` back), so late samples are picked
        up; what is read again is already stored and is not written twice."""
        now = self.clock() if now is None else now
        end = now - self.delay_seconds
        floor = end - self.lookback_seconds
        start = floor
        if self.last_seen:
            start = max(floor, min(self.last_seen.values()) - self.overlap_seconds)
        records = self.read(start, end)
        written = _write(store, records)
        for record in records:
            previous = self.last_seen.get(record.target, -math.inf)
            self.last_seen[record.target] = max(previous, record.timestamp_seconds)
        for target in [t for t, seen in self.last_seen.items() if seen < floor]:
            del self.last_seen[target]  # gone for longer than the lookback: stop catching up
        return written

    # -- HTTP ------------------------------------------------------------------------------

    def _range_samples(
        self, selector: str, start_ms: int, end_ms: int
    ) -> Iterable[tuple[tuple[tuple[str, str], ...], dict[int, float]]]:
        """Raw samples of ``selector`` in ``[start_ms, end_ms]``, NaN dropped, in chunks of
        at most ``chunk_seconds``, each keeping ``(low, high]`` whatever the server's range
        semantics (Prometheus 3 selects left-open ranges, 2.x closed ones)."""
        chunk_ms = max(1, int(self.chunk_seconds * 1000))
        low, high = start_ms - 1, min(end_ms, start_ms + chunk_ms)  # keeps (low, high]
        while True:
            # NOTE: a range of high - low ms at high selects (low, high] on Prometheus 3 and
            # [low, high] on 2.x; the sample at low, if any, is dropped below.
            query = f"{selector}[{high - low}ms]"
            data = self._query(query, high)
            for item in data:
                labels = _labels(item, query)
                points = {}
                for point in item.get("values") or ():
                    t_ms, value = _point(point, query)
                    if low < t_ms <= high and not math.isnan(value):
                        points[t_ms] = value
                if points:
                    yield labels, points
            native = sum(1 for item in data if isinstance(item, dict) and item.get("histograms"))
            if native:
                logger.warning("%d native histogram series skipped: %s", native, query)
            if high >= end_ms:
                return
            low, high = high, min(end_ms, high + chunk_ms)

    def _health(
        self, targets: list[str], start_ms: int, end_ms: int
    ) -> dict[tuple[str, int], tuple[float, float | None]]:
        """``(up, scrape_duration_seconds)`` per (target, timestamp) of ``targets``."""
        pattern = "|".join(re.escape(t) for t in targets).replace("\\", "\\\\")
        selector = f'{{__name__=~"{UP}|{SCRAPE_DURATION}",{TARGET_LABEL}=~"{pattern}"}}'
        up: dict[tuple[str, int], float] = {}
        duration: dict[tuple[str, int], float] = {}
        for labels, points in self._range_samples(selector, start_ms, end_ms):
            named = dict(labels)
            into = up if named.get("__name__") == UP else duration
            for t_ms, value in points.items():
                into[(named.get(TARGET_LABEL, ""), t_ms)] = value
        return {key: (value, duration.get(key)) for key, value in up.items()}

    def _metadata_for(self, names: set[str]) -> dict[str, str]:
        """The cached metadata, fetched again when it is older than
        ``METADATA_MAX_AGE_SECONDS`` or does not describe one of ``names``."""
        if not names:
            return {}
        now = self.clock()
        fresh = (
            self._types_fetched_at is not None
            and now - self._types_fetched_at < METADATA_MAX_AGE_SECONDS
        )
        if not fresh or not all(_described(name, self._types) for name in names):
            self._types, self._types_fetched_at = self._metadata(), now
        return self._types

    def _metadata(self) -> dict[str, str]:
        """Metric family name → type, from ``/api/v1/metadata``; empty when the server
        has none (it only knows families of targets it currently scrapes)."""
        try:
            data = self._get_json("GET", "metadata", {}, "metadata")
        except PrometheusSourceError as error:
            logger.info("no metric metadata (%s); types inferred from names", error)
            return {}
        types: dict[str, str] = {}
        if isinstance(data, dict):
            for name, entries in data.items():
                kinds = {e.get("type") for e in entries or () if isinstance(e, dict)}
                if len(kinds) == 1:
                    types[name] = str(kinds.pop())
        return types

    def _query(self, query: str, at_ms: int) -> list[dict]:
        data = self._get_json(
            "POST", "query", {"query": query, "time": f"{at_ms / 1000:.3f}"}, query
        )
        if not isinstance(data, dict) or data.get("resultType") != "matrix":
            kind = data.get("resultType") if isinstance(data, dict) else type(data).__name__
            raise PrometheusSourceError(
                f"{self._base}: query {query!r} returned {kind!r}, not a range vector "
                "(matrix); is this a Prometheus-compatible API?"
            )
        result = data.get("result")
        if not isinstance(result, list):
            raise PrometheusSourceError(f"{self._base}: query {query!r}: malformed result")
        return result

    def _get_json(self, method: str, path: str, params: dict[str, str], what: str) -> object:
        return self._api.get_json(method, path, params, what)


def _write(store: Store, records: list[ScrapeRecord]) -> list[ScrapeRecord]:
    """Write ``records`` in batches (``Store.write_scrapes``); a batch the store refuses for
    good (``DuplicateSeriesError``) is written one record at a time, skipping the bad one."""
    written: list[ScrapeRecord] = []
    for i in range(0, len(records), WRITE_BATCH):
        batch = records[i : i + WRITE_BATCH]
        try:
            flags = store.write_scrapes(batch)
        except ValueError:
            flags = []
            for record in batch:
                try:
                    flags.append(store.write_scrape(record))
                except ValueError as error:
                    logger.error(
                        "store refused %s at %.3f: %s",
                        record.target,
                        record.timestamp_seconds,
                        error,
                    )
                    flags.append(False)
        written.extend(record for record, new in zip(batch, flags, strict=True) if new)
    return written


# -- rebuilding scrapes ----------------------------------------------------------------------


def _labels(item: object, query: str) -> tuple[tuple[str, str], ...]:
    metric = item.get("metric") if isinstance(item, dict) else None
    if not isinstance(metric, dict) or "__name__" not in metric:
        raise PrometheusSourceError(f"query {query!r}: a series without a metric name")
    return tuple(sorted((str(k), str(v)) for k, v in metric.items()))


def _point(point: object, query: str) -> tuple[int, float]:
    try:
        t, value = point  # type: ignore[misc]
        return round(float(t) * 1000), float(value)
    except (TypeError, ValueError):
        raise PrometheusSourceError(f"query {query!r}: malformed sample {point!r}") from None


def _records(
    series: dict[tuple[tuple[str, str], ...], dict[int, float]],
    health: dict[tuple[str, int], tuple[float, float | None]],
    metadata: dict[str, str],
    default_labels: Mapping[str, str] | None,
) -> list[ScrapeRecord]:
    scrapes: dict[tuple[str, int], list[tuple[str, dict[str, str], float]]] = {}
    skipped = 0
    for key, points in series.items():
        labels = dict(key)
        target = labels.pop(TARGET_LABEL, "")
        if not target:
            skipped += 1
            continue
        name = labels.pop("__name__")
        for t_ms, value in points.items():
            scrapes.setdefault((target, t_ms), []).append((name, labels, value))
    if skipped:
        logger.warning("%d series without an %r label skipped", skipped, TARGET_LABEL)
    records = []
    for target, t_ms in sorted(set(scrapes) | {k for k, v in health.items() if v[0] != 1}):
        up, duration = health.get((target, t_ms), (1.0, None))
        if up != 1:
            records.append(
                ScrapeRecord(
                    target, t_ms / 1000, duration_seconds=duration, is_up=False, error=DOWN_ERROR
                )
            )
            continue
        families = _families(scrapes[(target, t_ms)], metadata)
        normalised = normalise(families, target=target, default_labels=default_labels)
        records.append(
            ScrapeRecord.from_normalised(target, t_ms / 1000, normalised, duration_seconds=duration)
        )
    return sorted(records, key=lambda r: (r.timestamp_seconds, r.target))


def _families(
    samples: list[tuple[str, dict[str, str], float]], metadata: dict[str, str]
) -> list[Metric]:
    """The metric families one scrape's samples belong to, as ``prometheus_client``'s
    OpenMetrics parser would have built them (a counter's family drops ``_total``)."""
    names = {_unescape(name, metadata) for name, _, _ in samples}
    histograms = {
        n.removesuffix("_bucket")
        for n in names
        if n.endswith("_bucket")
        and _type(n.removesuffix("_bucket"), metadata) in (None, "histogram", "gaugehistogram")
    }
    families: dict[str, Metric] = {}
    for name, labels, value in samples:
        name = _unescape(name, metadata)
        family, kind = _family_of(name, histograms, metadata)
        if family.startswith(TENANT_FAMILY_PREFIX) and c.LABEL_TENANT not in labels:
            # NOTE: Prometheus does not store empty label values: the bundled engine's
            # tenant="" (requests without a tenant) arrives without the label, and would
            # then collide with the fleet-wide series of the same canonical family.
            labels = {**labels, c.LABEL_TENANT: ""}
        metric = families.get(family)
        if metric is None:
            try:
                metric = families[family] = Metric(family, "", kind)
            except ValueError as error:  # a name prometheus_client cannot hold (UTF-8)
                logger.warning("series %s skipped: %s", name, error)
                continue
        metric.samples.append(Sample(name, labels, value))
    return list(families.values())


def _family_of(name: str, histograms: set[str], metadata: dict[str, str]) -> tuple[str, str]:
    for suffix in _HISTOGRAM_CHILDREN:
        stem = name.removesuffix(suffix)
        if stem != name and stem in histograms:
            return stem, "histogram"
    for suffix in ("_total", "_created"):
        stem = name.removesuffix(suffix)
        if stem != name and (_type(stem, metadata) or _rule_kind(stem)) == "counter":
            return stem, "counter"
    for suffix in _SUMMARY_CHILDREN:
        stem = name.removesuffix(suffix)
        if stem != name and _type(stem, metadata) == "summary":
            return stem, "summary"
    kind = _type(name, metadata) or _rule_kind(name) or "unknown"
    if kind == "counter" and name.endswith("_total"):
        return name.removesuffix("_total"), kind
    if kind not in ("counter", "gauge", "summary", "unknown"):
        kind = "unknown"  # info, stateset, …: a bare sample, kept raw by normalise
    return name, kind


def _described(name: str, metadata: dict[str, str]) -> bool:
    """Whether ``metadata`` has the family of sample name ``name``."""
    names = {name, _unescape(name, metadata)}
    stems = names | {n.removesuffix(s) for n in names for s in (*_HISTOGRAM_CHILDREN, "_total")}
    return any(stem in metadata for stem in stems)


def _type(name: str, metadata: dict[str, str]) -> str | None:
    kind = metadata.get(name)
    return None if kind in (None, "", "unknown", "untyped") else kind


def _rule_kind(name: str) -> str | None:
    """The type a dialect rule expects for a family name (for servers without metadata)."""
    rules = _RULES.get(name)
    if not rules:
        return None
    rule = rules[0]
    return "histogram" if rule.from_sum else c.FAMILIES[rule.family].value


def _unescape(name: str, metadata: dict[str, str]) -> str:
    """``vllm_x`` → ``vllm:x`` when the colon spelling is a known family (Prometheus 2.x
    stores prometheus_client 0.26's escaped OpenMetrics sample names, §8.9)."""
    if ":" in name:
        return name
    for prefix in _COLON_PREFIXES:
        escaped = prefix[:-1] + "_"
        if not name.startswith(escaped):
            continue
        colon = prefix + name.removeprefix(escaped)
        stems = {colon} | {colon.removesuffix(s) for s in (*_HISTOGRAM_CHILDREN, "_total")}
        if any(s in _RULES or s in metadata for s in stems):
            return colon
    return name
