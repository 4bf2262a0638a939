"""``tailwatch.yaml``: validated once, at the edge, into frozen dataclasses.

```yaml
database_url: sqlite:///.tailwatch/tailwatch.db   # TAILWATCH_DB_URL overrides
collector:
  scrape_interval_seconds: 5
  scrape_timeout_seconds: 4        # default: the interval; must not exceed it
  max_body_bytes: 16777216
  listen: 127.0.0.1:4318           # the collector's own /metrics
  targets:
    - url: http://127.0.0.1:8000/metrics
      name: replica-a              # default: host:port of the URL
      labels: {replica: a}
```

Every error is a :class:`ConfigError` naming the key path and the offending value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any
from urllib.parse import urlsplit

import yaml

from collectors.scrape import DEFAULT_MAX_BODY_BYTES, Target
from collectors.store.connection import DB_URL_ENV

DEFAULT_INTERVAL_SECONDS = 5.0
DEFAULT_LISTEN = "127.0.0.1:4318"
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
    scrape_timeout_seconds: float = DEFAULT_INTERVAL_SECONDS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    listen_host: str = "127.0.0.1"
    listen_port: int = 4318
    targets: tuple[TargetConfig, ...] = ()


@dataclass(frozen=True)
class TailwatchConfig:
    """``database_url`` ``None``: the store's default (SQLite at ``.tailwatch/tailwatch.db``,
    whose folder is made only when the store opens)."""

    database_url: str | None
    collector: CollectorConfig


def load_config(path: str | os.PathLike[str] | None) -> TailwatchConfig:
    """Read and validate ``path`` (``None``: defaults only). ``TAILWATCH_DB_URL``, when set,
    overrides ``database_url``; no URL at all leaves it ``None`` (the store's default)."""
    data: Any = {}
    if path is not None:
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as error:
            raise ConfigError(f"cannot read {path}: {error.strerror or error}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as error:
            where = getattr(error, "problem_mark", None)
            at = f" at line {where.line + 1}" if where is not None else ""
            raise ConfigError(f"{path}: not valid YAML{at}") from None
    return parse_config({} if data is None else data)


def parse_config(data: Any) -> TailwatchConfig:
    """Validate an already-loaded mapping (see the module docstring for the shape)."""
    root = _mapping(data, "(top level)", {"database_url", "collector"})
    database_url = os.environ.get(DB_URL_ENV) or _optional_str(root, "database_url", "")
    collector = _collector(root.get("collector", {}), "collector")
    return TailwatchConfig(database_url or None, collector)


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
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{url_key}: expected an http(s) URL with a host, got {url!r}")
    if name is None:
        name = parts.netloc
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{key}.name: expected a non-empty string, got {name!r}")
    label_map = _mapping({} if labels is None else labels, f"{key}.labels", None)
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


def _collector(data: Any, key: str) -> CollectorConfig:
    known = {
        "scrape_interval_seconds",
        "scrape_timeout_seconds",
        "max_body_bytes",
        "listen",
        "targets",
    }
    section = _mapping(data, key, known)
    interval = _positive(section, "scrape_interval_seconds", key, DEFAULT_INTERVAL_SECONDS)
    timeout = _positive(section, "scrape_timeout_seconds", key, interval)
    if timeout > interval:
        raise ConfigError(
            f"{key}.scrape_timeout_seconds: {timeout:g} exceeds "
            f"scrape_interval_seconds {interval:g}; a scrape must end before the next starts"
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
        entry = _mapping(item, item_key, {"url", "name", "labels"})
        if "url" not in entry:
            raise ConfigError(f"{item_key}.url: required")
        targets.append(
            target_from_url(entry["url"], item_key, entry.get("name"), entry.get("labels"))
        )
    check_unique_names(targets, f"{key}.targets")
    return CollectorConfig(interval, timeout, max_body, host, port, tuple(targets))


def check_unique_names(targets: list[TargetConfig], key: str) -> None:
    seen: set[str] = set()
    for index, target in enumerate(targets):
        if target.name in seen:
            raise ConfigError(
                f"{key}[{index}].name: {target.name!r} is already used; give each target a name"
            )
        seen.add(target.name)


def _mapping(data: Any, key: str, known: set[str] | None) -> Mapping[Any, Any]:
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


def _optional_str(section: Mapping[Any, Any], name: str, default: str) -> str:
    value = section.get(name, default)
    if not isinstance(value, str):
        raise ConfigError(f"{name}: expected a string, got {value!r}")
    return value
