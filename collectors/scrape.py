"""Scraping: one HTTP GET of a target's ``/metrics``, parsed and normalised into a
:class:`~collectors.store.ScrapeRecord`.

A scrape never raises: a refused connection, a timeout, a non-200 answer, a body past the
size cap or one no parser accepts all come back as a down record (``is_up=False``) whose
``error`` says which, with the time the attempt took.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import httpx
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as parse_openmetrics,
)
from prometheus_client.parser import text_string_to_metric_families as parse_text

from collectors.dialects import normalise
from collectors.store.records import ScrapeRecord

#: The exposition formats a scrape may ask for, by Prometheus's ``scrape_protocols`` names.
# NOTE: ``escaping=allow-utf-8`` keeps ``vllm:`` names unescaped (prometheus_client 0.26
# escapes ':' on sample lines otherwise, and its own OpenMetrics parser then refuses lines
# that carry exemplars).
SCRAPE_PROTOCOLS = {
    "OpenMetricsText1.0.0": "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8",
    "PrometheusText0.0.4": "text/plain;version=0.0.4",
}
#: OpenMetrics first, so exemplars arrive; Prometheus text 0.0.4 is the fallback.
DEFAULT_SCRAPE_PROTOCOLS = ("OpenMetricsText1.0.0", "PrometheusText0.0.4")


def accept_header(protocols: Sequence[str] = DEFAULT_SCRAPE_PROTOCOLS) -> str:
    """The ``Accept`` header asking for ``protocols`` in order of preference (descending
    ``q``, as Prometheus sends it), then anything."""
    unknown = [p for p in protocols if p not in SCRAPE_PROTOCOLS]
    if unknown or not protocols:
        known = ", ".join(SCRAPE_PROTOCOLS)
        raise ValueError(f"scrape protocols {list(protocols)}: expected some of {known}")
    parts = [f"{SCRAPE_PROTOCOLS[p]};q={0.9 - 0.1 * i:.1f}" for i, p in enumerate(protocols)]
    return ",".join([*parts, "*/*;q=0.1"])


ACCEPT_HEADER = accept_header()
logger = logging.getLogger("tailwatch.scrape")

DEFAULT_INTERVAL_SECONDS = 5.0
#: The default scrape timeout as a share of the interval.
# NOTE: below 1 so that a target that never answers ends its scrape (timed out) before its
# next slot and keeps its schedule; Prometheus's own defaults are 10 s of a 15 s example
# interval, and it refuses a timeout longer than the interval, as we do.
DEFAULT_TIMEOUT_SHARE = 0.8
DEFAULT_TIMEOUT_SECONDS = DEFAULT_TIMEOUT_SHARE * DEFAULT_INTERVAL_SECONDS
DEFAULT_MAX_BODY_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class Target:
    """A scrape target: ``name`` is its identity in the store (the ``target`` label),
    ``labels`` are added to every series it exposes that lacks them."""

    name: str
    url: str
    labels: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", MappingProxyType(dict(self.labels)))


class ScrapeFailedError(Exception):
    """Why one scrape produced no samples; its message becomes the record's ``error``."""


class Scraper:
    """Scrapes targets over one shared :class:`httpx.AsyncClient`.

    ``timeout_seconds`` bounds the whole scrape (connect, headers and body), not each read,
    so a server trickling bytes cannot hold a scrape open. ``max_body_bytes`` is enforced
    while the body streams in. ``clock`` gives the record's timestamp (Unix seconds);
    durations are measured on the monotonic clock. Use as an async context manager, or call
    :meth:`aclose`.
    """

    def __init__(
        self,
        timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        clock: Callable[[], float] = time.time,
        client: httpx.AsyncClient | None = None,
        accept: str = ACCEPT_HEADER,
    ) -> None:
        if not timeout_seconds > 0:
            raise ValueError(f"timeout_seconds={timeout_seconds}: must be > 0")
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes={max_body_bytes}: must be >= 1")
        self.timeout_seconds = timeout_seconds
        self.max_body_bytes = max_body_bytes
        self.accept = accept
        self._clock = clock
        self._client = client or httpx.AsyncClient(
            timeout=timeout_seconds, follow_redirects=False, trust_env=False
        )

    async def __aenter__(self) -> Scraper:
        return self

    async def __aexit__(self, *_exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    async def scrape_all(self, targets: Iterable[Target]) -> list[ScrapeRecord]:
        """Scrape every target concurrently; one record per target, in the given order."""
        return list(await asyncio.gather(*(self.scrape(target) for target in targets)))

    async def scrape(self, target: Target) -> ScrapeRecord:
        """Scrape one target. Never raises (bar cancellation): failures are down records."""
        timestamp = self._clock()
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout_seconds):
                body, content_type = await self._fetch(target.url)
            normalised = normalise(
                parse_exposition(body, content_type),
                target=target.name,
                default_labels=target.labels,
            )
        except (ScrapeFailedError, TimeoutError, httpx.HTTPError, ValueError) as error:
            message = _describe(error, self.timeout_seconds)
        except Exception as error:
            # NOTE: a bug met on one target's body (a dialect rule, a parser corner) must not
            # stop every other target's collection; it is logged in full and the target is down.
            logger.exception("unexpected error scraping %s", target.name)
            message = f"internal error: {type(error).__name__}: {error}"
        else:
            return ScrapeRecord.from_normalised(
                target.name, timestamp, normalised, duration_seconds=time.perf_counter() - started
            )
        return ScrapeRecord(
            target=target.name,
            timestamp_seconds=timestamp,
            duration_seconds=time.perf_counter() - started,
            is_up=False,
            error=message,
        )

    async def _fetch(self, url: str) -> tuple[str, str]:
        headers = {"Accept": self.accept}
        async with self._client.stream("GET", url, headers=headers) as response:
            if response.status_code != 200:
                raise ScrapeFailedError(
                    f"HTTP {response.status_code} {response.reason_phrase}".rstrip()
                )
            declared = response.headers.get("content-length")
            if declared is not None and declared.isdigit() and int(declared) > self.max_body_bytes:
                raise ScrapeFailedError(self._too_large(f"Content-Length {declared}"))
            chunks: list[bytes] = []
            num_bytes = 0
            async for chunk in response.aiter_bytes():
                num_bytes += len(chunk)
                if num_bytes > self.max_body_bytes:
                    raise ScrapeFailedError(self._too_large(f"stopped after {num_bytes} bytes"))
                chunks.append(chunk)
            content_type = response.headers.get("content-type", "")
            try:
                return b"".join(chunks).decode(response.charset_encoding or "utf-8"), content_type
            except (UnicodeDecodeError, LookupError) as error:
                raise ScrapeFailedError(f"body is not text: {error}") from None

    def _too_large(self, seen: str) -> str:
        return f"body exceeds max_body_bytes={self.max_body_bytes} ({seen})"


def is_openmetrics(content_type: str) -> bool:
    """True when a response's ``Content-Type`` is OpenMetrics text."""
    return content_type.split(";", 1)[0].strip().lower() == "application/openmetrics-text"


def parse_exposition(body: str, content_type: str) -> Sequence[object]:
    """Parse with the ``prometheus_client`` parser the content type calls for; the parsers
    are lazy, so the families are listed here to surface a syntax error as one."""
    openmetrics = is_openmetrics(content_type)
    try:
        families = list(parse_openmetrics(body) if openmetrics else parse_text(body))
    except (ValueError, TypeError, IndexError, KeyError) as error:
        kind = "OpenMetrics" if openmetrics else "Prometheus text"
        raise ScrapeFailedError(f"unparseable {kind} exposition: {error}") from None
    if not families and body.strip() and not body.strip().startswith("#"):
        raise ScrapeFailedError("unparseable exposition: no metric families")
    return families


def _describe(error: BaseException, timeout_seconds: float) -> str:
    if isinstance(error, ScrapeFailedError):
        return str(error)
    if isinstance(error, TimeoutError | httpx.TimeoutException):
        return f"timed out after {timeout_seconds:g} s"
    if isinstance(error, httpx.ConnectError):
        return f"connection failed: {error or type(error).__name__}"
    if isinstance(error, httpx.HTTPError):
        return f"{type(error).__name__}: {error}"
    return f"cannot normalise exposition: {error}"
