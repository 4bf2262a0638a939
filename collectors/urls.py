"""Whether a URL is one an HTTP scrape or request can use, checked before any connection is
tried: the collector's targets (``collectors.config``) and the load commands' ``--url``
options (``loadgen.load_options``) read the same rule and word their mistakes alike."""

from __future__ import annotations

from urllib.parse import urlsplit

import httpx

MAX_PORT = 65535


def url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as an http(s) URL with a host and, when it names one, a port
    1-65535 (the text after the option's name in an error), or ``None`` when nothing is."""
    try:
        parts = urlsplit(url)
    except ValueError as error:  # e.g. an unclosed "[" (an IPv6 host)
        return f"{url!r} is not a valid URL: {error}"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"expected an http(s) URL with a host, got {url!r}"
    try:
        port = parts.port
    except ValueError:  # not a number, or past 65535
        port = -1
    if port is not None and not 1 <= port <= MAX_PORT:
        return f"{url!r} has a port outside 1-{MAX_PORT}"
    try:  # NOTE: what the HTTP client would refuse at the first request (an invalid IDNA host)
        httpx.URL(url)
    except (httpx.InvalidURL, UnicodeError) as error:
        return f"{url!r} is not a valid URL: {error}"
    return None
