"""The Prometheus HTTP API as the reader uses it: instant and range queries, series, label
values and build information, each answer's ``data`` or one clear error.

One error type, :class:`~collectors.promql.PrometheusSourceError`, for everything a user can
get wrong or a server can refuse: an unreachable URL, a timeout, a path that is not a
Prometheus API, and a query the server refused (its own message quoted). The same server
speaks for Prometheus, Thanos Query, Mimir (under its ``/prometheus`` prefix) and
VictoriaMetrics.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import httpx

logger = logging.getLogger("tailwatch.prometheus")

DEFAULT_TIMEOUT_SECONDS = 30.0


class PrometheusSourceError(Exception):
    """The server could not be read: unreachable, refused the query, or is not a
    Prometheus HTTP API. The message says which, with the server's own error text."""


def check_url(url: object) -> str:
    """``url`` without a trailing slash; a :class:`PrometheusSourceError` naming it when it is
    not ``http(s)://host[:port][/prefix]``."""
    parsed = httpx.URL(url) if isinstance(url, str) else None
    if parsed is None or parsed.scheme not in ("http", "https") or not parsed.host:
        raise PrometheusSourceError(
            f"Prometheus URL: expected http(s)://host[:port][/prefix], got {url!r}"
        )
    return url.rstrip("/")  # type: ignore[union-attr]


def format_time(seconds: float) -> str:
    """Unix seconds as the API takes them, at Prometheus's millisecond precision."""
    return f"{seconds:.3f}"


def format_range(seconds: float) -> str:
    """A range or step in whole milliseconds (``[60000ms]``): Prometheus's clock."""
    return f"{round(seconds * 1000)}ms"


@dataclass
class PrometheusAPI:
    """``GET``/``POST`` on ``<url>/api/v1/...`` with the errors of :func:`get_json`."""

    url: str
    headers: Mapping[str, str] | None = None
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    client: httpx.Client | None = None
    #: Requests sent, for the evaluation-cost accounting of issue 24.
    num_requests: int = field(default=0, init=False)

    def __post_init__(self) -> None:
        self.url = check_url(self.url)
        if not self.timeout > 0:
            raise PrometheusSourceError(f"timeout={self.timeout}: must be > 0")
        self._count_lock = threading.Lock()
        self._client = self.client or httpx.Client(
            timeout=self.timeout, follow_redirects=False, trust_env=False
        )

    def close(self) -> None:
        if self.client is None:
            self._client.close()

    def query(self, expr: str, at: float, **extra: str) -> tuple[str, list[dict]]:
        """An instant query at ``at``: ``(resultType, result)``."""
        data = self.get_json(
            "POST", "query", {"query": expr, "time": format_time(at), **extra}, expr
        )
        return _result(data, expr, self.url)

    def query_range(
        self, expr: str, start: float, end: float, step_seconds: float, **extra: str
    ) -> list[dict]:
        """A range query evaluated at ``start, start + step, ...`` up to ``end``: the matrix."""
        params = {
            "query": expr,
            "start": format_time(start),
            "end": format_time(end),
            "step": format_range(step_seconds),
            **extra,
        }
        kind, result = _result(self.get_json("POST", "query_range", params, expr), expr, self.url)
        if kind != "matrix":
            raise PrometheusSourceError(f"{self.url}: query_range {expr!r} returned {kind!r}")
        return result

    def series(self, match: Sequence[str], start: float, end: float) -> list[dict[str, str]]:
        """The label sets of the series matching any of ``match`` with samples in the range."""
        params = {"match[]": list(match), "start": format_time(start), "end": format_time(end)}
        data = self.get_json("POST", "series", params, " or ".join(match))
        if not isinstance(data, list):
            raise PrometheusSourceError(f"{self.url}: series: malformed answer")
        return [dict(item) for item in data if isinstance(item, dict)]

    def label_values(self, label: str, match: Sequence[str] = ()) -> list[str]:
        """Every value of ``label`` (``__name__``: every metric name) the server holds."""
        params: dict[str, object] = {"match[]": list(match)} if match else {}
        data = self.get_json("GET", f"label/{label}/values", params, f"{label} values")
        if not isinstance(data, list):
            raise PrometheusSourceError(f"{self.url}: label values: malformed answer")
        return [str(v) for v in data]

    def build_info(self) -> dict[str, str]:
        """``/api/v1/status/buildinfo``'s data (empty where the server has none)."""
        try:
            data = self.get_json("GET", "status/buildinfo", {}, "buildinfo")
        except PrometheusSourceError as error:
            logger.info("no build information (%s)", error)
            return {}
        return {str(k): str(v) for k, v in data.items()} if isinstance(data, dict) else {}

    def answers(self, path: str) -> bool:
        """Whether ``GET <url>/api/v1/<path>`` answers 200 (probes a server's flavour)."""
        try:
            response = self._client.get(f"{self.url}/api/v1/{path}", headers=self.headers)
        except httpx.HTTPError:
            return False
        return response.status_code == 200

    def get_json(self, method: str, path: str, params: Mapping[str, object], what: str) -> object:
        """The ``data`` of a successful answer; :class:`PrometheusSourceError` otherwise,
        saying whether the server was unreachable, slow, refused (its message) or is not a
        Prometheus API."""
        url = f"{self.url}/api/v1/{path}"
        with self._count_lock:
            self.num_requests += 1
        try:
            if method == "POST":
                response = self._client.post(url, data=params, headers=self.headers)
            else:
                response = self._client.get(url, params=params, headers=self.headers)
        except httpx.TimeoutException:
            raise PrometheusSourceError(
                f"Prometheus at {self.url} did not answer within {self.timeout:g} s ({what})"
            ) from None
        except httpx.HTTPError as error:
            raise PrometheusSourceError(
                f"cannot reach Prometheus at {self.url}: {error or type(error).__name__}"
            ) from None
        try:
            body = response.json()
        except ValueError:
            body = None
        if isinstance(body, dict) and body.get("status") == "error":
            kind = body.get("errorType") or "error"
            raise PrometheusSourceError(
                f"Prometheus at {self.url} refused {what!r} (HTTP {response.status_code}, "
                f"{kind}): {body.get('error', '')}"
            )
        if response.status_code != 200:
            hint = " (check the URL and any path prefix)" if response.status_code == 404 else ""
            raise PrometheusSourceError(
                f"Prometheus at {self.url}: HTTP {response.status_code} "
                f"{response.reason_phrase} for {path}{hint}"
            )
        if not isinstance(body, dict) or body.get("status") != "success" or "data" not in body:
            content_type = response.headers.get("content-type", "?")
            raise PrometheusSourceError(
                f"{self.url} did not answer like a Prometheus HTTP API ({content_type}, "
                f"body starts {response.text[:80]!r})"
            )
        for warning in body.get("warnings") or ():
            logger.warning("Prometheus warning for %s: %s", what, warning)
        return body["data"]


def _result(data: object, expr: str, url: str) -> tuple[str, list[dict]]:
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise PrometheusSourceError(f"{url}: query {expr!r}: malformed result")
    return str(data.get("resultType")), [r for r in data["result"] if isinstance(r, dict)]


def point(value: object, expr: str) -> tuple[float, float]:
    """One ``[t, "v"]`` pair of an answer as ``(t, v)`` floats."""
    try:
        t, v = value  # type: ignore[misc]
        return float(t), float(v)
    except (TypeError, ValueError):
        raise PrometheusSourceError(f"query {expr!r}: malformed sample {value!r}") from None


def answer_points(values: object, expr: str) -> list[tuple[float, float]]:
    """A series' ``[[t, "v"], ...]`` as ``(t, v)`` floats (:func:`point` of each, in one
    pass: a day's answer for a fleet holds ~100,000 of them)."""
    try:
        return [(float(t), float(v)) for t, v in values or ()]  # type: ignore[union-attr]
    except (TypeError, ValueError):
        for value in values if isinstance(values, list) else [values]:
            point(value, expr)  # NOTE: names the malformed sample
        raise PrometheusSourceError(f"query {expr!r}: malformed values {values!r}"[:500]) from None


def whole_ms(seconds: float) -> int:
    """Prometheus's millisecond clock; ``seconds`` is finite."""
    assert math.isfinite(seconds)
    return round(seconds * 1000)
