"""Silences, inhibition and the notification step of the evaluator, with fake notifiers:
firing alerts resent per the notifier's interval, resolved ones sent once, muted ones not sent,
a failing notifier logged and counted without stopping the evaluation."""

from __future__ import annotations

from dataclasses import replace

from alerts import Evaluator, MemoryAlertState, NotificationError, Silence
from alerts.notify import Delivery
from tests.alerts.eval_data import INTERVAL, START, Conditions, build
from tests.alerts.test_alerts_evaluator import DOWN, T0, Switch
from tests.alerts.test_alerts_evaluator_rules import BURN_RULES


def PERTURB_TTFT_BAD(t: float, replica: int) -> Conditions:
    """Every first token slower than the SLO's 0.5 s for 20 minutes from 40 minutes in."""
    return Conditions(ttft=((0.8, 1.0),)) if START + 2400 < t <= START + 3600 else Conditions()


class FakeNotifier:
    """Records every call; ``resend_delay_seconds`` as AlertmanagerNotifier has it."""

    destination = "fake://receiver"
    group_by: tuple[str, ...] = ()

    def __init__(self, resend_delay_seconds: float = 60.0, fail: int = 0) -> None:
        self.resend_delay_seconds = resend_delay_seconds
        self.receiver = self.label = "fake"
        self.calls: list[tuple[float, list[tuple[str, str]]]] = []
        self.fail = fail

    def notify(self, alerts, now_seconds: float) -> Delivery:
        if self.fail:
            self.fail -= 1
            raise NotificationError("receiver down", receiver="fake", attempts=1, is_retryable=True)
        self.calls.append(
            (
                now_seconds,
                [(a.labels.get("target") or a.labels["severity"], a.state.value) for a in alerts],
            )
        )
        return Delivery(1, 200, ())


def _silence(matchers: str, start: float, end: float) -> Silence:
    return Silence.create(
        matchers,
        starts_at_seconds=start,
        ends_at_seconds=end,
        created_by="oncall@example",
        comment="maintenance",
        now_seconds=start,
    )


def test_firing_is_resent_per_interval_and_resolved_sent_once() -> None:
    switch, notifier = Switch(), FakeNotifier(resend_delay_seconds=60.0)
    evaluator = Evaluator([replace(DOWN, for_seconds=0.0)], switch.reader, MemoryAlertState(), notifiers=[notifier])  # fmt: skip
    for s in range(0, 76, 15):
        evaluator.evaluate_once(switch.at(T0 + s, True))
    for s in (90, 105):
        evaluator.evaluate_once(switch.at(T0 + s, False))
    assert [(t - T0, sent) for t, sent in notifier.calls] == [
        (0.0, [("r0", "firing")]),
        (60.0, [("r0", "firing")]),
        (90.0, [("r0", "resolved")]),
    ]


def test_a_silenced_alert_exists_but_is_not_sent_until_the_silence_ends() -> None:
    switch, notifier, state = Switch(), FakeNotifier(), MemoryAlertState()
    state.save_silence(_silence('alertname="target-down", target="r0"', T0, T0 + 30))
    evaluator = Evaluator([replace(DOWN, for_seconds=0.0)], switch.reader, state, notifiers=[notifier])  # fmt: skip
    muted = evaluator.evaluate_once(switch.at(T0, True))
    (alert,) = muted.firing
    assert muted.silenced == {alert.fingerprint: (state.silences()[0].id,)}
    assert muted.is_muted(alert.fingerprint) and notifier.calls == []
    after = evaluator.evaluate_once(switch.at(T0 + 30, True))  # the silence ends at 30
    assert after.silenced == {} and [t - T0 for t, _ in notifier.calls] == [30.0]


def test_a_resolution_of_an_alert_never_sent_is_not_sent() -> None:
    switch, notifier, state = Switch(), FakeNotifier(), MemoryAlertState()
    state.save_silence(_silence('target="r0"', T0, T0 + 3600))
    evaluator = Evaluator([replace(DOWN, for_seconds=0.0)], switch.reader, state, notifiers=[notifier])  # fmt: skip
    evaluator.evaluate_once(switch.at(T0, True))
    assert evaluator.evaluate_once(switch.at(T0 + 15, False)).resolved
    assert notifier.calls == []


def test_a_failing_notifier_is_counted_and_retried_without_stopping_the_evaluation() -> None:
    switch, broken, good = Switch(), FakeNotifier(fail=1), FakeNotifier()
    evaluator = Evaluator([replace(DOWN, for_seconds=0.0)], switch.reader, MemoryAlertState(), notifiers=[broken, good])  # fmt: skip
    first = evaluator.evaluate_once(switch.at(T0, True))
    assert first.firing and [o.error != "" for o in first.notifications] == [True, False]
    assert "receiver down" in first.notifications[0].error
    assert evaluator.dispatcher.failures == {"FakeNotifier(fake)": 1, "FakeNotifier(fake) #2": 0}
    evaluator.evaluate_once(switch.at(T0 + 15, True))  # retried: it never took the alert
    assert [t - T0 for t, _ in broken.calls] == [15.0]
    assert [t - T0 for t, _ in good.calls] == [0.0]


def test_the_page_inhibits_the_ticket_for_the_same_slo_while_it_fires() -> None:
    reader = build(PERTURB_TTFT_BAD, hours=1.5, replicas=1)
    notifier = FakeNotifier(resend_delay_seconds=INTERVAL)
    notifier.receiver = "slo"
    evaluator = Evaluator(BURN_RULES, reader, MemoryAlertState(), notifiers=[notifier])
    results = [
        evaluator.evaluate_once(START + 1800 + k * INTERVAL) for k in range(int(3600 / INTERVAL))
    ]
    both = [r for r in results if {a.labels["severity"] for a in r.firing} == {"page", "ticket"}]
    assert both, "the page and the ticket never fired together"
    for r in both:
        page = next(a for a in r.firing if a.labels["severity"] == "page")
        ticket = next(a for a in r.firing if a.labels["severity"] == "ticket")
        assert r.inhibited == {ticket.fingerprint: page.fingerprint}
    # Once the page resolves (its 30 s short window clears) the ticket shows and is sent.
    alone = [r for r in results if [a.labels["severity"] for a in r.firing] == ["ticket"]]
    assert alone and not alone[0].inhibited
    # Resent every evaluation (interval 15 s): the inhibited ticket is left out, the page not.
    calls = dict(notifier.calls)
    for r in both:
        assert ("page", "firing") in calls[r.at_seconds]
        assert ("ticket", "firing") not in calls[r.at_seconds]
    assert ("ticket", "firing") in calls[alone[0].at_seconds]


def test_a_ticket_for_another_slo_is_not_inhibited() -> None:
    other = tuple(replace(r, slo="other") for r in BURN_RULES[1:])
    reader = build(PERTURB_TTFT_BAD, hours=1.5, replicas=1)
    evaluator = Evaluator((BURN_RULES[0], *other), reader, MemoryAlertState())
    results = [evaluator.evaluate_once(START + 1800 + k * INTERVAL) for k in range(200)]
    assert any(len(r.firing) == 2 for r in results)
    assert all(not r.inhibited for r in results)


def test_a_resolution_that_failed_to_send_is_retried_then_given_up() -> None:
    switch, notifier = Switch(), FakeNotifier()
    evaluator = Evaluator([replace(DOWN, for_seconds=0.0)], switch.reader, MemoryAlertState(), notifiers=[notifier])  # fmt: skip
    evaluator.evaluate_once(switch.at(T0, True))
    notifier.fail = 2
    evaluator.evaluate_once(switch.at(T0 + 15, False))  # resolved; the request fails
    evaluator.evaluate_once(switch.at(T0 + 30, False))  # retried; fails again
    evaluator.evaluate_once(switch.at(T0 + 45, False))  # retried; delivered
    evaluator.evaluate_once(switch.at(T0 + 60, False))  # nothing left to send
    assert [(t - T0, sent) for t, sent in notifier.calls] == [
        (0.0, [("r0", "firing")]),
        (45.0, [("r0", "resolved")]),
    ]
    lost = FakeNotifier()
    evaluator = Evaluator([replace(DOWN, for_seconds=0.0)], switch.reader, MemoryAlertState(), notifiers=[lost])  # fmt: skip
    evaluator.evaluate_once(switch.at(T0 + 2000, True))
    lost.fail = 10**6
    for s in range(2015, 3100, 15):
        evaluator.evaluate_once(switch.at(T0 + s, False))
    lost.fail = 0
    evaluator.evaluate_once(switch.at(T0 + 3115, False))  # past 15 minutes: given up
    assert [sent for _, sent in lost.calls] == [[("r0", "firing")]]
