"""Senders of alerts: a webhook (Alertmanager's payload) and Alertmanager's v2 API.

Both POST JSON with httpx under one :class:`~alerts.notify.retry.RetryPolicy`: a connection error, a
timeout, a 5xx or a 429 is retried with capped, fully jittered exponential backoff; any other
non-2xx answer is a refusal and fails at once. Either way a failure raises
:class:`~alerts.errors.NotificationError` saying which, after how many attempts. ``sleep`` and
``random`` are injectable so tests run the whole policy without waiting.
"""

from __future__ import annotations

import random as random_module
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

import httpx

from alerts.errors import NotificationError, NotifierConfigError
from alerts.labels import is_valid_label_name
from alerts.model import Alert
from alerts.notify.payloads import DEFAULT_RESEND_DELAY_SECONDS, postable_alerts, webhook_message
from alerts.notify.retry import RetryPolicy, is_retryable_status

#: The most response body an error message quotes.
_BODY_EXCERPT_CHARS = 200


class _Outcome(NamedTuple):
    """One request's result: ``failure`` is None on a 2xx."""

    failure: str | None
    status_code: int | None
    is_retryable: bool


class Delivery(NamedTuple):
    """A delivered notification: the requests it took, the final status code, and each wait
    (seconds) slept between attempts."""

    attempts: int
    status_code: int
    delays_seconds: tuple[float, ...]


@runtime_checkable
class Notifier(Protocol):
    """Something that delivers a group of firing or resolved alerts at ``now_seconds``
    (Unix seconds). Raises :class:`~alerts.errors.NotificationError` when it cannot.

    Besides :meth:`notify`, the dispatcher (:mod:`alerts.notify.dispatch`) reads:

    - ``label``: what its name shows, ``WebhookNotifier(<label>)`` in logs and failure counts
      ("" shows the class name alone);
    - ``destination``: where it sends, in full. Hashed into the key its memory is stored
      under, so a notifier pointed elsewhere has had nothing; never stored or shown, since a
      URL may hold credentials;
    - ``receiver``: the receiver's name, also in that key ("" when the destination routes
      alerts itself, as Alertmanager does);
    - ``group_by``: the labels one request's alerts share; empty sends everything due in one
      request (Alertmanager groups itself);
    - ``resend_delay_seconds``: how often a firing alert is sent again; ``None`` takes the
      dispatcher's default.
    """

    @property
    def label(self) -> str: ...

    @property
    def destination(self) -> str: ...

    @property
    def receiver(self) -> str: ...

    @property
    def group_by(self) -> tuple[str, ...]: ...

    @property
    def resend_delay_seconds(self) -> float | None: ...

    def notify(self, alerts: Sequence[Alert], now_seconds: float) -> Delivery: ...


def _check_url(url: str, what: str) -> str:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as error:
        raise NotifierConfigError(f"{what} {url!r} is not a valid URL: {error}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise NotifierConfigError(f"{what} {url!r} must be an http:// or https:// URL with a host")
    return url


def redacted_url(url: str) -> str:
    """``url`` for messages: without user info and query string, where webhook credentials and
    tokens usually sit."""
    parsed = httpx.URL(url)
    shown = parsed.copy_with(username=None, password=None, query=None, fragment=None)
    return str(shown) + ("?…" if parsed.query else "")


def _check_timeout(timeout_seconds: float) -> float:
    if (
        isinstance(timeout_seconds, bool)
        or not isinstance(timeout_seconds, int | float)
        or not 0 < timeout_seconds <= 600
    ):
        raise NotifierConfigError(
            f"timeout_seconds must be a number in (0, 600], not {timeout_seconds!r}"
        )
    return float(timeout_seconds)


class _JSONPoster:
    """POSTs one JSON body under a retry policy."""

    def __init__(
        self,
        url: str,
        timeout_seconds: float,
        retry: RetryPolicy,
        sleep: Callable[[float], None],
        random: Callable[[], float],
        client: httpx.Client | None,
    ) -> None:
        self.url = url
        self.shown_url = redacted_url(url)
        self._timeout = httpx.Timeout(_check_timeout(timeout_seconds))
        if not isinstance(retry, RetryPolicy):
            raise NotifierConfigError(f"retry must be a RetryPolicy, not {retry!r}")
        self._retry = retry
        self._sleep = sleep
        self._random = random
        self._client = client

    def post(self, body: Any) -> Delivery:
        delays: list[float] = []
        client = self._client or httpx.Client(timeout=self._timeout)
        try:
            for attempt in range(self._retry.max_attempts):
                outcome = self._attempt(client, body)
                if outcome.failure is None and outcome.status_code is not None:
                    return Delivery(attempt + 1, outcome.status_code, tuple(delays))
                attempts = attempt + 1
                if not outcome.is_retryable or attempts == self._retry.max_attempts:
                    verdict = (
                        f"gave up after {attempts} attempt(s) (retry limit)"
                        if outcome.is_retryable
                        else "not retried: the receiver refused the request"
                    )
                    raise NotificationError(
                        f"POST {self.shown_url}: {outcome.failure}; {verdict}",
                        receiver=self.shown_url,
                        attempts=attempts,
                        is_retryable=outcome.is_retryable,
                        status_code=outcome.status_code,
                    )
                delay = self._retry.delay_seconds(attempt, self._random)
                delays.append(delay)
                self._sleep(delay)
        finally:
            if self._client is None:
                client.close()
        raise AssertionError("unreachable: the loop returns or raises")

    def _attempt(self, client: httpx.Client, body: Any) -> _Outcome:
        try:
            response = client.post(self.url, json=body, timeout=self._timeout)
        except httpx.TimeoutException as error:
            return _Outcome(f"timed out ({type(error).__name__})", None, True)
        except httpx.TransportError as error:
            return _Outcome(f"connection error ({type(error).__name__}: {error})", None, True)
        if 200 <= response.status_code <= 299:
            return _Outcome(None, response.status_code, False)
        excerpt = response.text[:_BODY_EXCERPT_CHARS].strip()
        detail = f"HTTP {response.status_code}" + (f": {excerpt}" if excerpt else "")
        return _Outcome(detail, response.status_code, is_retryable_status(response.status_code))


class WebhookNotifier:
    """POSTs Alertmanager's version-4 webhook payload (see :func:`alerts.notify.payloads.webhook_message`)
    for each group of alerts to ``url``."""

    def __init__(
        self,
        url: str,
        receiver: str = "tailwatch",
        group_by: Sequence[str] = ("alertname",),
        external_url: str = "",
        max_alerts: int = 0,
        timeout_seconds: float = 10.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = random_module.random,
        client: httpx.Client | None = None,
    ) -> None:
        self._poster = _JSONPoster(
            _check_url(url, "webhook url"),
            timeout_seconds,
            retry if retry is not None else RetryPolicy(),
            sleep,
            random,
            client,
        )
        if not isinstance(receiver, str) or not receiver:
            raise NotifierConfigError(f"receiver must be a non-empty name, not {receiver!r}")
        if not isinstance(external_url, str):
            raise NotifierConfigError(f"external_url must be a string, not {external_url!r}")
        group_by = (group_by,) if isinstance(group_by, str) else tuple(group_by)
        for name in group_by:
            if not is_valid_label_name(name):
                raise NotifierConfigError(f"group_by: {name!r} is not a valid label name")
        if isinstance(max_alerts, bool) or not isinstance(max_alerts, int) or max_alerts < 0:
            raise NotifierConfigError(
                f"max_alerts must be an integer >= 0 (0: no limit), not {max_alerts!r}"
            )
        self.max_alerts = max_alerts
        self.receiver = receiver
        self.group_by = group_by
        self.external_url = external_url

    #: A webhook is re-sent on the dispatcher's schedule.
    resend_delay_seconds: float | None = None

    @property
    def label(self) -> str:
        return self.receiver

    @property
    def destination(self) -> str:
        """The URL posted to (with any credentials: never shown; see ``redacted_url``)."""
        return self._poster.url

    def notify(self, alerts: Sequence[Alert], now_seconds: float) -> Delivery:
        """Send one notification for ``alerts`` (one group). ``now_seconds`` is unused: the
        payload carries each alert's own times."""
        message = webhook_message(
            alerts, self.receiver, self.group_by, self.external_url, self.max_alerts
        )
        return self._poster.post(message)


class AlertmanagerNotifier:
    """Sends alerts to Alertmanager's ``POST /api/v2/alerts`` at ``base_url``
    (e.g. ``http://127.0.0.1:9093``), as Prometheus does: ``startsAt`` = firing start,
    ``endsAt`` = resolve time, or for a firing alert
    ``now + 4 × max(evaluation_interval_seconds, resend_delay_seconds)``. The caller re-sends
    firing alerts at least every ``resend_delay_seconds`` so they do not time out, and re-sends
    a resolved one on the next evaluations (Prometheus keeps sending resolved alerts for 15
    minutes) so that a lost request does not leave it firing."""

    def __init__(
        self,
        base_url: str,
        evaluation_interval_seconds: float = 15.0,
        resend_delay_seconds: float = DEFAULT_RESEND_DELAY_SECONDS,
        timeout_seconds: float = 10.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        random: Callable[[], float] = random_module.random,
        client: httpx.Client | None = None,
    ) -> None:
        base = _check_url(base_url, "Alertmanager base_url").rstrip("/")
        for name, value in (
            ("evaluation_interval_seconds", evaluation_interval_seconds),
            ("resend_delay_seconds", resend_delay_seconds),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e7:
                raise NotifierConfigError(
                    f"{name} must be a positive number of seconds, not {value!r}"
                )
        self.base_url = base
        self.evaluation_interval_seconds = float(evaluation_interval_seconds)
        self.resend_delay_seconds = float(resend_delay_seconds)
        self._poster = _JSONPoster(
            f"{base}/api/v2/alerts",
            timeout_seconds,
            retry if retry is not None else RetryPolicy(),
            sleep,
            random,
            client,
        )

    #: Alertmanager routes each alert to its receivers, and groups them, itself.
    receiver = ""
    group_by: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        return self.base_url

    @property
    def destination(self) -> str:
        """The URL posted to (``base_url``'s ``/api/v2/alerts``)."""
        return self._poster.url

    def notify(self, alerts: Sequence[Alert], now_seconds: float) -> Delivery:
        body = postable_alerts(
            alerts, now_seconds, self.evaluation_interval_seconds, self.resend_delay_seconds
        )
        return self._poster.post(body)
