"""``tailwatch.yaml``: validated once, at the edge, into frozen dataclasses. This module
validates the ``collector:`` and ``store:`` sections; the application's
:mod:`tailwatch.config` reads the file and puts every section together.

```yaml
database_url: sqlite:///.tailwatch/tailwatch.db   # TAILWATCH_DB_URL overrides
collector:
  scrape_interval_seconds: 5
  scrape_timeout_seconds: 4        # default: 0.8 x the interval; must not exceed it
  max_body_bytes: 16777216
  scrape_protocols: [OpenMetricsText1.0.0, PrometheusText0.0.4]  # preference order, as
                                   # Prometheus's; text first halves parsing CPU, no exemplars
  listen: 127.0.0.1:4318           # the collector's own /metrics
  targets:
    - url: http://127.0.0.1:8000/metrics
      name: replica-a              # default: host:port of the URL
      labels: {replica: a}
  targets_file: targets.yaml       # Prometheus file_sd format, re-read on change; relative
                                   # to this file's folder (collectors/targets_file.py)
  gpu: auto                        # NVML telemetry: auto (default), on (required), off
  prometheus_sources:              # read an existing Prometheus-compatible server instead
    - url: http://127.0.0.1:9090   # of scraping (collectors/promql.py)
      match: ['{__name__=~"vllm:.*"}']  # default: every engine dialect's prefix
      headers: {X-Scope-OrgID: team-a}
      labels: {cluster: eu1}       # fill labels the series lack
      interval_seconds: 15         # default: scrape_interval_seconds
      timeout_seconds: 30
      delay_seconds: 0             # e.g. 60 for Thanos receive / Mimir
store:
  raw_retention_hours: 48          # raw samples and snapshots (default 48)
  rollup_retention_days: 30        # 1-minute roll-ups (default 30); not shorter than raw;
                                   # request records are kept as long
  span_retention_days: 14          # spans (default 14, Tempo's default)
  alert_retention_days: 30         # alert history, resolved incidents, rule failures (default 30)
slos:                              # SLOs, validated by slo.load_slos (docs/slo.md)
  - name: chat-ttft
    indicator: {latency: {metric: ttft, threshold_seconds: 0.5}}
    target: 0.99
    period_days: 28
alerts:                            # rules and notifiers, alerts.rules.config (docs/alerts.md)
  rules: {queue-growth: {for: 1m}, gpu-health: {enabled: false}}
  notifiers: [{webhook: http://127.0.0.1:9000/hook}]
```

Every error is a :class:`ConfigError` naming the key path and the offending value.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import yaml

from collectors.scrape import (
    DEFAULT_INTERVAL_SECONDS,
    DEFAULT_MAX_BODY_BYTES,
    DEFAULT_SCRAPE_PROTOCOLS,
    DEFAULT_TIMEOUT_SECONDS,
    DEFAULT_TIMEOUT_SHARE,
    SCRAPE_PROTOCOLS,
    Target,
)
from collectors.store.retention import MIN_RETENTION_SECONDS, RetentionPolicy
from collectors.urls import url_problem

DEFAULT_LISTEN = "127.0.0.1:4318"
GPU_MODES = ("auto", "on", "off")
_LABEL_NAME_CHARS = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")


class ConfigError(ValueError):
    """A configuration value is missing, of the wrong type or out of range."""


@dataclass(frozen=True)
class TargetConfig:
    url: str
    name: str
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    def to_target(self) -> Target:
        return Target(self.name, self.url, self.labels)


@dataclass(frozen=True)
class CollectorConfig:
    scrape_interval_seconds: float = DEFAULT_INTERVAL_SECONDS
    scrape_timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    listen_host: str = "127.0.0.1"
    listen_port: int = 4318
    targets: tuple[TargetConfig, ...] = ()
    #: ``collector.targets_file``, joined to the config file's folder when relative.
    targets_file: Path | None = None
    #: ``collector.gpu``: ``auto`` (NVML when present), ``on`` (required) or ``off``.
    gpu: str = "auto"
    prometheus_sources: tuple[PrometheusSourceConfig, ...] = ()
    #: ``collector.scrape_protocols``: formats asked for, in order (Prometheus's names).
    scrape_protocols: tuple[str, ...] = DEFAULT_SCRAPE_PROTOCOLS


@dataclass(frozen=True)
class PrometheusSourceConfig:
    """One ``collector.prometheus_sources`` entry (see ``collectors.promql``)."""

    url: str
    match: tuple[str, ...] | None = None  # None: promql.DEFAULT_MATCH
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    labels: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    interval_seconds: float | None = None  # None: the scrape interval
    timeout_seconds: float = 30.0
    delay_seconds: float = 0.0


@dataclass(frozen=True)
class StoreConfig:
    """``store:``: how long raw rows, 1-minute roll-ups and spans are kept (request records:
    as long as the roll-ups)."""

    raw_retention_hours: float = 48.0
    rollup_retention_days: float = 30.0
    span_retention_days: float = 14.0
    alert_retention_days: float = 30.0

    def retention_policy(self) -> RetentionPolicy:
        """The policy ``Store.maintain`` takes."""
        return RetentionPolicy(
            raw_retention_seconds=self.raw_retention_hours * 3600.0,
            rollup_retention_seconds=self.rollup_retention_days * 86400.0,
            span_retention_seconds=self.span_retention_days * 86400.0,
            alert_retention_seconds=self.alert_retention_days * 86400.0,
        )


def load_yaml(text: str, source: str) -> Any:
    """``yaml.safe_load`` with a :class:`ConfigError` naming ``source`` and the line."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        raise ConfigError(f"{source}: not valid YAML{at}") from None


def parse_store_section(data: Any, key: str) -> StoreConfig:
    section = check_mapping(
        data,
        key,
        {
            "raw_retention_hours",
            "rollup_retention_days",
            "span_retention_days",
            "alert_retention_days",
        },
    )
    # NOTE: raw rows must outlive the roll-up lag and settling (RetentionPolicy's minimum).
    raw_hours = _positive(section, "raw_retention_hours", key, 48.0)
    if raw_hours * 3600 < MIN_RETENTION_SECONDS:
        raise ConfigError(
            f"{key}.raw_retention_hours: expected at least {MIN_RETENTION_SECONDS / 3600:g} "
            f"(10 minutes), got {raw_hours:g}"
        )
    rollup_days = _positive(section, "rollup_retention_days", key, 30.0)
    if rollup_days * 24 < raw_hours:
        raise ConfigError(
            f"{key}.rollup_retention_days: {rollup_days:g} ({rollup_days * 24:g} h) is shorter "
            f"than raw_retention_hours {raw_hours:g}; roll-ups must outlive the raw rows"
        )
    span_days = _positive(section, "span_retention_days", key, 14.0)
    if span_days * 86400 < MIN_RETENTION_SECONDS:
        raise ConfigError(
            f"{key}.span_retention_days: expected at least {MIN_RETENTION_SECONDS / 86400:g} "
            f"(10 minutes), got {span_days:g}"
        )
    alert_days = _positive(section, "alert_retention_days", key, 30.0)
    if alert_days * 86400 < MIN_RETENTION_SECONDS:
        raise ConfigError(
            f"{key}.alert_retention_days: expected at least {MIN_RETENTION_SECONDS / 86400:g} "
            f"(10 minutes), got {alert_days:g}"
        )
    return StoreConfig(raw_hours, rollup_days, span_days, alert_days)


def parse_listen(value: Any, key: str = "collector.listen") -> tuple[str, int]:
    """``host:port`` (``[v6]:port`` for IPv6) → (host, port)."""
    if not isinstance(value, str) or ":" not in value:
        raise ConfigError(f"{key}: expected host:port, got {value!r}")
    host, _, port_text = value.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port_text.isdigit() or not 0 <= int(port_text) <= 65535:
        raise ConfigError(f"{key}: expected host:port with a port 0-65535, got {value!r}")
    return host, int(port_text)


def target_from_url(
    url: Any, key: str, name: Any = None, labels: Any = None, url_key: str | None = None
) -> TargetConfig:
    """One target; ``name`` defaults to the URL's ``host:port``. Errors name ``key``'s
    fields (``url_key``, default ``<key>.url``, for the URL)."""
    url_key = url_key or f"{key}.url"
    if not isinstance(url, str):
        raise ConfigError(f"{url_key}: expected a URL string, got {url!r}")
    # NOTE: checked here, not at the first scrape, where it would fail every interval.
    problem = url_problem(url)
    if problem is not None:
        raise ConfigError(f"{url_key}: {problem}")
    if name is None:
        name = urlsplit(url).netloc
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{key}.name: expected a non-empty string, got {name!r}")
    label_map = check_mapping({} if labels is None else labels, f"{key}.labels", None)
    checked: dict[str, str] = {}
    for label, value in label_map.items():
        if not isinstance(label, str) or not label or not set(label) <= _LABEL_NAME_CHARS:
            raise ConfigError(f"{key}.labels: invalid label name {label!r}")
        if label == "target":
            raise ConfigError(f"{key}.labels.target: reserved (the target's name), set name")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise ConfigError(f"{key}.labels.{label}: expected a string, got {value!r}")
        checked[label] = str(value)
    return TargetConfig(url, name, MappingProxyType(checked))


def parse_collector_section(data: Any, key: str, base_dir: Path | None = None) -> CollectorConfig:
    known = {
        "targets_file",
        "gpu",
        "prometheus_sources",
        "scrape_protocols",
        "scrape_interval_seconds",
        "scrape_timeout_seconds",
        "max_body_bytes",
        "listen",
        "targets",
    }
    section = check_mapping(data, key, known)
    interval = _positive(section, "scrape_interval_seconds", key, DEFAULT_INTERVAL_SECONDS)
    if not math.isfinite(interval):
        raise ConfigError(
            f"{key}.scrape_interval_seconds: expected a finite number, got {interval}"
        )
    timeout = _positive(
        section, "scrape_timeout_seconds", key, default_scrape_timeout_seconds(interval)
    )
    if timeout > interval:
        raise ConfigError(
            f"{key}.scrape_timeout_seconds: {timeout:g} exceeds "
            f"{key}.scrape_interval_seconds {interval:g}; a scrape must end before the next "
            f"starts (default: {DEFAULT_TIMEOUT_SHARE:g} x the interval)"
        )
    max_body = section.get("max_body_bytes", DEFAULT_MAX_BODY_BYTES)
    if not isinstance(max_body, int) or isinstance(max_body, bool) or max_body < 1:
        raise ConfigError(f"{key}.max_body_bytes: expected a positive integer, got {max_body!r}")
    host, port = parse_listen(section.get("listen", DEFAULT_LISTEN), f"{key}.listen")
    raw_targets = section.get("targets", [])
    if not isinstance(raw_targets, list):
        raise ConfigError(f"{key}.targets: expected a list, got {raw_targets!r}")
    targets = []
    for index, item in enumerate(raw_targets):
        item_key = f"{key}.targets[{index}]"
        entry = check_mapping(item, item_key, {"url", "name", "labels"})
        if "url" not in entry:
            raise ConfigError(f"{item_key}.url: required")
        targets.append(
            target_from_url(entry["url"], item_key, entry.get("name"), entry.get("labels"))
        )
    check_unique_names(targets, f"{key}.targets")
    targets_file = _targets_file(section.get("targets_file"), f"{key}.targets_file", base_dir)
    gpu = section.get("gpu", "auto")
    if gpu is False:  # NOTE: YAML 1.1 reads a bare `off` as false (and `on` as true)
        gpu = "off"
    elif gpu is True:
        gpu = "on"
    if gpu not in GPU_MODES:
        raise ConfigError(f"{key}.gpu: expected one of auto, on, off, got {gpu!r}")
    return CollectorConfig(
        interval,
        timeout,
        max_body,
        host,
        port,
        tuple(targets),
        targets_file=targets_file,
        gpu=gpu,
        prometheus_sources=_prometheus_sources(
            section.get("prometheus_sources", []), f"{key}.prometheus_sources"
        ),
        scrape_protocols=_scrape_protocols(
            section.get("scrape_protocols", list(DEFAULT_SCRAPE_PROTOCOLS)),
            f"{key}.scrape_protocols",
        ),
    )


def default_scrape_timeout_seconds(interval_seconds: float) -> float:
    """The timeout when none is configured: ``DEFAULT_TIMEOUT_SHARE`` of the interval."""
    return DEFAULT_TIMEOUT_SHARE * interval_seconds


def with_interval(config: CollectorConfig, interval_seconds: float) -> CollectorConfig:
    """``config`` scraping every ``interval_seconds`` (``--interval``). A timeout longer
    than the new interval drops to the default share of it.

    NOTE: not to the interval itself: a target that never answers would then end each
    scrape just past its next slot and skip every other one."""
    if not (interval_seconds > 0 and math.isfinite(interval_seconds)):
        raise ConfigError(f"--interval: expected a number > 0, got {interval_seconds:g}")
    timeout = config.scrape_timeout_seconds
    if timeout > interval_seconds:
        timeout = default_scrape_timeout_seconds(interval_seconds)
    return replace(config, scrape_interval_seconds=interval_seconds, scrape_timeout_seconds=timeout)


def _scrape_protocols(data: Any, key: str) -> tuple[str, ...]:
    if not isinstance(data, list) or not data:
        raise ConfigError(f"{key}: expected a non-empty list, got {data!r}")
    for index, name in enumerate(data):
        if name not in SCRAPE_PROTOCOLS:
            known = ", ".join(SCRAPE_PROTOCOLS)
            raise ConfigError(f"{key}[{index}]: expected one of {known}, got {name!r}")
        if name in data[:index]:
            raise ConfigError(f"{key}[{index}]: {name} is listed twice")
    return tuple(data)


def _prometheus_sources(data: Any, key: str) -> tuple[PrometheusSourceConfig, ...]:
    if not isinstance(data, list):
        raise ConfigError(f"{key}: expected a list, got {data!r}")
    known = {
        "url",
        "match",
        "headers",
        "labels",
        "interval_seconds",
        "timeout_seconds",
        "delay_seconds",
    }
    sources = []
    for index, item in enumerate(data):
        item_key = f"{key}[{index}]"
        entry = check_mapping(item, item_key, known)
        if "url" not in entry:
            raise ConfigError(f"{item_key}.url: required")
        # NOTE: a source's URL and labels follow the same rules as a scrape target's.
        checked = target_from_url(entry["url"], item_key, labels=entry.get("labels"))
        match = entry.get("match")
        if isinstance(match, str):
            match = [match]
        if match is not None and (
            not isinstance(match, list)
            or not match
            or not all(isinstance(m, str) and m.strip() for m in match)
        ):
            raise ConfigError(f"{item_key}.match: expected series selectors, got {match!r}")
        headers = check_mapping(entry.get("headers", {}), f"{item_key}.headers", None)
        for name, value in headers.items():
            if not isinstance(name, str) or not isinstance(value, str):
                raise ConfigError(f"{item_key}.headers: expected strings, got {name!r}: {value!r}")
        interval = entry.get("interval_seconds")
        if interval is not None:
            interval = _positive(entry, "interval_seconds", item_key, 0)
        delay = entry.get("delay_seconds", 0.0)
        if isinstance(delay, bool) or not isinstance(delay, int | float) or delay < 0:
            raise ConfigError(f"{item_key}.delay_seconds: expected a number >= 0, got {delay!r}")
        sources.append(
            PrometheusSourceConfig(
                url=checked.url,
                match=None if match is None else tuple(match),
                headers=MappingProxyType(dict(headers)),
                labels=checked.labels,
                interval_seconds=interval,
                timeout_seconds=_positive(entry, "timeout_seconds", item_key, 30.0),
                delay_seconds=float(delay),
            )
        )
    return tuple(sources)


def _targets_file(value: Any, key: str, base_dir: Path | None) -> Path | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a file path, got {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() or base_dir is None else base_dir / path


def check_unique_names(targets: list[TargetConfig], key: str) -> None:
    seen: set[str] = set()
    for index, target in enumerate(targets):
        if target.name in seen:
            raise ConfigError(
                f"{key}[{index}].name: {target.name!r} is already used; give each target a name"
            )
        seen.add(target.name)


def check_mapping(data: Any, key: str, known: set[str] | None) -> Mapping[Any, Any]:
    if not isinstance(data, dict):
        raise ConfigError(f"{key}: expected a mapping, got {data!r}")
    if known is not None:
        unknown = sorted(str(k) for k in data if k not in known)
        if unknown:
            prefix = "" if key == "(top level)" else f"{key}."
            raise ConfigError(
                f"{prefix}{unknown[0]}: unknown key (known: {', '.join(sorted(known))})"
            )
    return data


def _positive(section: Mapping[Any, Any], name: str, key: str, default: float) -> float:
    value = section.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise ConfigError(f"{key}.{name}: expected a number > 0, got {value!r}")
    return float(value)


def optional_str(section: Mapping[Any, Any], name: str, default: str) -> str:
    value = section.get(name, default)
    if not isinstance(value, str):
        raise ConfigError(f"{name}: expected a string, got {value!r}")
    return value
