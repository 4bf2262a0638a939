"""A file of scrape targets in Prometheus ``file_sd_configs`` format, re-read when it changes.

```yaml
# targets.yaml (or the same as JSON)
- targets: ["10.0.0.7:8000", "10.0.0.8:8000"]
  labels: {zone: a, __metrics_path__: /metrics}
- targets: ["10.0.0.9:30000"]
  labels: {__scheme__: https}
```

Each group's ``targets`` are ``host:port`` strings; the URL is
``<__scheme__ or http>://<host:port><__metrics_path__ or /metrics>`` plus one query
parameter per ``__param_<name>`` label. Every other label starting with ``__`` is dropped
(Prometheus's meta labels); the rest are added to the target's series. A target's name (its
``target`` label) is its ``host:port`` as written, like a static target's default name.

:class:`TargetsFileWatcher` is polled once per collection cycle: it stats the file, reads it
when its modification time or size changed (or ``reread_seconds`` passed, which catches a
same-size rewrite within the file system's timestamp resolution), and reports an update only
when the content or the error changed. A broken file (missing, unreadable, not YAML/JSON, a
bad entry) is reported once per change, with a message naming the group and key; the caller
keeps scraping the previous good list.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urlsplit

from collectors.config import ConfigError, TargetConfig, load_yaml, target_from_url

#: Prometheus meta labels that shape the URL; every other ``__`` label is dropped.
SCHEME_LABEL = "__scheme__"
METRICS_PATH_LABEL = "__metrics_path__"
PARAM_PREFIX = "__param_"
DEFAULT_SCHEME = "http"
DEFAULT_METRICS_PATH = "/metrics"
DEFAULT_REREAD_SECONDS = 60.0
_GROUP_KEYS = {"targets", "labels"}


def parse_targets(data: Any, source: str) -> tuple[TargetConfig, ...]:
    """Validate a loaded ``file_sd`` document (a list of groups). Errors are
    :class:`ConfigError` naming ``source``, the group index and the key, e.g.
    ``targets.yaml[1].targets[0]: expected host:port, got 'http://a:1'``."""
    if data is None:
        raise ConfigError(f"{source}: the file is empty; write [] for no targets")
    if not isinstance(data, list):
        raise ConfigError(f"{source}: expected a list of target groups, got {_short(data)}")
    targets: list[TargetConfig] = []
    for index, group in enumerate(data):
        key = f"{source}[{index}]"
        if not isinstance(group, dict):
            raise ConfigError(
                f"{key}: expected a mapping with targets and labels, got {_short(group)}"
            )
        unknown = sorted(str(k) for k in group if k not in _GROUP_KEYS)
        if unknown:
            raise ConfigError(f"{key}.{unknown[0]}: unknown key (known: labels, targets)")
        if "targets" not in group:
            raise ConfigError(f"{key}.targets: required")
        addresses = group["targets"]
        if not isinstance(addresses, list):
            raise ConfigError(
                f"{key}.targets: expected a list of host:port, got {_short(addresses)}"
            )
        labels = group.get("labels") or {}
        if not isinstance(labels, dict):
            raise ConfigError(f"{key}.labels: expected a mapping, got {_short(labels)}")
        scheme, path, params, kept = _meta_labels(labels, f"{key}.labels")
        for position, address in enumerate(addresses):
            address_key = f"{key}.targets[{position}]"
            _check_address(address, address_key)
            url = f"{scheme}://{address}{path}" + (f"?{urlencode(params)}" if params else "")
            targets.append(
                target_from_url(url, key, name=address, labels=kept, url_key=address_key)
            )
    _check_unique(targets, source)
    return tuple(targets)


def load_targets(text: str, source: str, json_format: bool = False) -> tuple[TargetConfig, ...]:
    """Parse the text of a targets file (YAML, or JSON when ``json_format``)."""
    if json_format:
        try:
            data = json.loads(text) if text.strip() else None
        except json.JSONDecodeError as error:
            raise ConfigError(f"{source}: not valid JSON at line {error.lineno}") from None
    else:
        data = load_yaml(text, source)
    return parse_targets(data, source)


def read_targets_file(path: str | os.PathLike[str]) -> tuple[TargetConfig, ...]:
    """Read and validate a targets file once (``.json``: JSON; anything else: YAML, which
    also reads most JSON)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read targets file {path}: {_reason(error)}") from None
    return load_targets(text, path.name, json_format=path.suffix.lower() == ".json")


@dataclass(frozen=True)
class TargetsUpdate:
    """What changed in the file: a new good list (``error`` empty), or why the file cannot
    be used now (``targets`` ``None``: keep the previous list)."""

    targets: tuple[TargetConfig, ...] | None
    error: str = ""


class TargetsFileWatcher:
    """Polls a targets file; :meth:`poll` returns a :class:`TargetsUpdate` when the file's
    targets or its error changed since the last poll, else ``None``.

    ``stat`` and ``read`` (bytes) are injectable, as is ``clock`` (monotonic seconds) that
    paces the periodic re-read of a file whose ``stat`` looks unchanged.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        reread_seconds: float = DEFAULT_REREAD_SECONDS,
        stat: Callable[[Path], os.stat_result] = os.stat,
        read: Callable[[Path], bytes] = Path.read_bytes,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.path = Path(path)
        self.reread_seconds = reread_seconds
        self._stat = stat
        self._read = read
        self._clock = clock
        self._signature: tuple[int, int] | None = None
        self._last_read: float | None = None
        self._digest: bytes | None = None
        #: The current good targets (``()`` before the first good read).
        self.targets: tuple[TargetConfig, ...] = ()
        #: Why the file cannot be used now; "" while it is good.
        self.error = ""
        self._reported = False  # whether the first state was reported

    def poll(self) -> TargetsUpdate | None:
        now = self._clock()
        try:
            info = self._stat(self.path)
            signature = (info.st_mtime_ns, info.st_size)
            due = self._last_read is None or now - self._last_read >= self.reread_seconds
            if signature == self._signature and not due:
                return None
            self._signature, self._last_read = signature, now
            content = self._read(self.path)
        except OSError as error:
            self._signature = self._digest = None
            return self._failed(f"cannot read targets file {self.path}: {_reason(error)}")
        digest = hashlib.sha256(content).digest()
        if digest == self._digest:
            return None
        self._digest = digest
        try:
            text = content.decode("utf-8")
            json_format = self.path.suffix.lower() == ".json"
            targets = load_targets(text, self.path.name, json_format=json_format)
        except UnicodeDecodeError as error:
            return self._failed(f"{self.path.name}: not UTF-8 text ({error.reason})")
        except ConfigError as error:
            return self._failed(str(error))
        changed = targets != self.targets or self.error or not self._reported
        self.targets, self.error, self._reported = targets, "", True
        return TargetsUpdate(targets) if changed else None

    def _failed(self, error: str) -> TargetsUpdate | None:
        if error == self.error:
            return None  # NOTE: the same failure again: reported once, not every cycle
        self.error, self._reported = error, True
        return TargetsUpdate(None, error)


def _meta_labels(
    labels: dict[Any, Any], key: str
) -> tuple[str, str, list[tuple[str, str]], dict[Any, Any]]:
    scheme, path = DEFAULT_SCHEME, DEFAULT_METRICS_PATH
    params: list[tuple[str, str]] = []
    kept: dict[Any, Any] = {}
    for name, value in labels.items():
        if not isinstance(name, str) or not name.startswith("__"):
            kept[name] = value
            continue
        if not isinstance(value, str):
            raise ConfigError(f"{key}.{name}: expected a string, got {_short(value)}")
        if name == SCHEME_LABEL:
            if value not in ("http", "https"):
                raise ConfigError(f"{key}.{name}: expected http or https, got {value!r}")
            scheme = value
        elif name == METRICS_PATH_LABEL:
            if not value.startswith("/") or "?" in value or "#" in value:
                raise ConfigError(f"{key}.{name}: expected a path such as /metrics, got {value!r}")
            path = value
        elif name.startswith(PARAM_PREFIX) and len(name) > len(PARAM_PREFIX):
            params.append((name[len(PARAM_PREFIX) :], value))
    return scheme, path, params, kept


def _check_address(address: Any, key: str) -> None:
    if not isinstance(address, str) or not address or any(c in address for c in "/?#@ "):
        raise ConfigError(f"{key}: expected host:port, got {_short(address)}")
    try:  # NOTE: urlsplit raises too, on an unclosed "[" (an IPv6 host)
        parts = urlsplit(f"http://{address}")
        parts.port  # noqa: B018  (raises on a port that is not a number 0-65535)
    except ValueError:
        raise ConfigError(
            f"{key}: expected host:port with a port 0-65535, got {address!r}"
        ) from None
    if not parts.hostname:
        raise ConfigError(f"{key}: expected host:port, got {address!r}")


def _check_unique(targets: Iterable[TargetConfig], source: str) -> None:
    seen: set[str] = set()
    for target in targets:
        if target.name in seen:
            raise ConfigError(
                f"{source}: target {target.name!r} is listed twice; each host:port once"
            )
        seen.add(target.name)


def merged_targets(
    static: Sequence[TargetConfig], from_file: Sequence[TargetConfig], source: str
) -> tuple[TargetConfig, ...]:
    """Static targets followed by the file's; a name in both is a :class:`ConfigError`."""
    static_names = {target.name for target in static}
    for target in from_file:
        if target.name in static_names:
            raise ConfigError(
                f"{source}: target {target.name!r} is also a static target "
                "(collector.targets); list it in one place"
            )
    return (*static, *from_file)


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError):
        return error.strerror or str(error)
    return str(error)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
