"""What each notifier has had survives a restart of the evaluator: a restarted one neither
pages again for alerts it had sent (a webhook does not de-duplicate) nor forgets the
resolution of an alert it had sent firing; a notifier pointed elsewhere starts afresh."""

from __future__ import annotations

import json
import logging
from dataclasses import replace

import httpx
import pytest

from alerts import Evaluator, MemoryAlertState
from alerts.notify import WebhookNotifier, notifier_key
from alerts.sql import alert_state_of
from collectors.store import Store, sqlite_url
from tests.alerts.test_alerts_evaluator import DOWN, T0, Switch
from tests.alerts.test_alerts_evaluator_dispatch import FakeNotifier

RULE = replace(DOWN, for_seconds=0.0)


class Hook:
    """A webhook receiver in process (httpx's mock transport): the alert states of each
    request, by URL."""

    def __init__(self) -> None:
        self.received: list[tuple[str, list[str]]] = []

    def notifier(self, url: str = "http://127.0.0.1:9/hook?token=s3cret") -> WebhookNotifier:
        def handle(request: httpx.Request) -> httpx.Response:
            body = json.loads(request.content)
            self.received.append((str(request.url), [a["status"] for a in body["alerts"]]))
            return httpx.Response(200)

        client = httpx.Client(transport=httpx.MockTransport(handle))
        return WebhookNotifier(url, client=client)


def test_a_restarted_evaluator_on_the_same_store_does_not_page_again(tmp_path) -> None:
    url, switch, hook = sqlite_url(tmp_path / "tw.db"), Switch(), Hook()
    store = Store(url)
    Evaluator(
        [RULE], switch.reader, alert_state_of(store), notifiers=[hook.notifier()]
    ).evaluate_once(switch.at(T0, True))
    (had,) = alert_state_of(store).notified()
    assert had.notifier == notifier_key(hook.notifier()) and had.state.value == "firing"
    assert "s3cret" not in had.notifier  # a digest of the URL is kept, never its token
    store.close()
    assert [states for _, states in hook.received] == [["firing"]]
    store = Store(url, migrate=False)  # the restart: a new process on the same database
    try:
        evaluator = Evaluator(
            [RULE], switch.reader, alert_state_of(store), notifiers=[hook.notifier()]
        )
        evaluator.evaluate_once(switch.at(T0 + 15, True))
        assert len(hook.received) == 1  # the firing alert was had: not sent again
        evaluator.evaluate_once(switch.at(T0 + 30, False))  # resolved: sent to who had it
        assert [states for _, states in hook.received] == [["firing"], ["resolved"]]
        assert alert_state_of(store).notified() == []  # nothing left to remember
    finally:
        store.close()


def test_the_resend_interval_counts_from_the_last_delivery_before_the_restart() -> None:
    switch, state = Switch(), MemoryAlertState()
    first = FakeNotifier(resend_delay_seconds=60.0)
    Evaluator([RULE], switch.reader, state, notifiers=[first]).evaluate_once(switch.at(T0, True))
    again = FakeNotifier(resend_delay_seconds=60.0)
    evaluator = Evaluator([RULE], switch.reader, state, notifiers=[again])
    for s in (15, 30, 45, 60, 75):
        evaluator.evaluate_once(switch.at(T0 + s, True))
    assert [t - T0 for t, _ in first.calls] == [0.0]
    assert [t - T0 for t, _ in again.calls] == [60.0]  # 60 s after the delivery at T0


def test_a_notifier_pointed_elsewhere_has_had_nothing() -> None:
    switch, state, hook = Switch(), MemoryAlertState(), Hook()
    old = hook.notifier("http://127.0.0.1:9/old")
    Evaluator([RULE], switch.reader, state, notifiers=[old]).evaluate_once(switch.at(T0, True))
    new = hook.notifier("http://127.0.0.1:9/new")
    evaluator = Evaluator([RULE], switch.reader, state, notifiers=[new, old])
    evaluator.evaluate_once(switch.at(T0 + 15, True))
    assert [(u.rsplit("/", 1)[1], s) for u, s in hook.received] == [
        ("old", ["firing"]),
        ("new", ["firing"]),
    ]


def test_an_undelivered_resolution_is_retried_after_a_restart() -> None:
    switch, state = Switch(), MemoryAlertState()
    first = FakeNotifier()
    evaluator = Evaluator([RULE], switch.reader, state, notifiers=[first])
    evaluator.evaluate_once(switch.at(T0, True))
    first.fail = 1
    evaluator.evaluate_once(switch.at(T0 + 15, False))  # resolved; the request fails
    again = FakeNotifier()
    Evaluator([RULE], switch.reader, state, notifiers=[again]).evaluate_once(
        switch.at(T0 + 30, False)
    )
    assert [sent for _, sent in again.calls] == [[("r0", "resolved")]]


def test_two_notifiers_to_one_place_remember_apart() -> None:
    switch, state = Switch(), MemoryAlertState()
    one, two = FakeNotifier(), FakeNotifier()
    Evaluator([RULE], switch.reader, state, notifiers=[one, two]).evaluate_once(switch.at(T0, True))
    assert len({r.notifier for r in state.notified()}) == 2


class _NoMemory(MemoryAlertState):
    def save_notified(self, notifier, records) -> None:
        raise ConnectionError("database is down")


def test_a_memory_that_cannot_be_saved_is_logged_and_delivery_goes_on(
    caplog: pytest.LogCaptureFixture,
) -> None:
    switch, notifier = Switch(), FakeNotifier(resend_delay_seconds=60.0)
    evaluator = Evaluator([RULE], switch.reader, _NoMemory(), notifiers=[notifier])
    with caplog.at_level(logging.WARNING):
        result = evaluator.evaluate_once(switch.at(T0, True))
        evaluator.evaluate_once(switch.at(T0 + 15, True))
    assert result.notifications[0].sent and len(notifier.calls) == 1  # kept in the process
    assert "cannot save what notifier" in caplog.text
