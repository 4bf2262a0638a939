"""Webhook and Alertmanager notifiers against a scripted loopback receiver: payloads, retries,
backoff caps and jitter, with the sleep and the random source injected (nothing sleeps)."""

from __future__ import annotations

import pytest

from alerts import (
    Alert,
    AlertError,
    AlertmanagerNotifier,
    NotificationError,
    Notifier,
    NotifierConfigError,
    RetryPolicy,
    WebhookNotifier,
    group_alerts,
)
from tests.alerts.loopback import receiver
from tests.services import free_port

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
POLICY = RetryPolicy(max_attempts=4, base_delay_seconds=1.0, max_delay_seconds=3.0)


class Sleeps:
    def __init__(self) -> None:
        self.calls: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.calls.append(seconds)


def _firing(name="TailLatency", **labels):
    labels = {"alertname": name, "severity": "page", "slo": "ttft", **labels}
    annotations = {"summary": "p99 TTFT over 2 s while p50 holds", "runbook": "check queue"}
    return Alert.pending(labels, T0, annotations=annotations).fire(T0 + 60)


def _webhook(url, sleeps, random=lambda: 0.999, **kwargs):
    options = {"retry": POLICY, "sleep": sleeps, "random": random, "timeout_seconds": 5.0}
    options.update(kwargs)
    return WebhookNotifier(url, receiver="oncall", external_url="http://tw.local", **options)


def test_webhook_payload_is_alertmanagers_version_4():
    a = _firing(target="a")
    b = _firing(target="b").resolve(T0 + 120)
    sleeps = Sleeps()
    with receiver() as rx:
        delivery = _webhook(rx.url + "/hook", sleeps).notify([a, b], T0 + 130)
    assert delivery == (1, 200, ())
    assert sleeps.calls == []
    [request] = rx.received
    assert request.path == "/hook"
    assert request.content_type == "application/json"
    assert request.body == {
        "version": "4",
        "groupKey": '{}:{alertname="TailLatency"}',
        "truncatedAlerts": 0,
        "status": "firing",
        "receiver": "oncall",
        "groupLabels": {"alertname": "TailLatency"},
        "commonLabels": {"alertname": "TailLatency", "severity": "page", "slo": "ttft"},
        "commonAnnotations": {
            "summary": "p99 TTFT over 2 s while p50 holds",
            "runbook": "check queue",
        },
        "externalURL": "http://tw.local",
        "alerts": [
            {
                "status": "firing",
                "labels": {**a.labels},
                "annotations": {**a.annotations},
                "startsAt": "2027-01-15T08:01:00.000Z",
                "endsAt": "0001-01-01T00:00:00Z",
                "generatorURL": "",
                "fingerprint": a.fingerprint,
            },
            {
                "status": "resolved",
                "labels": {**b.labels},
                "annotations": {**b.annotations},
                "startsAt": "2027-01-15T08:01:00.000Z",
                "endsAt": "2027-01-15T08:02:00.000Z",
                "generatorURL": "",
                "fingerprint": b.fingerprint,
            },
        ],
    }


def test_all_resolved_group_has_status_resolved():
    with receiver() as rx:
        _webhook(rx.url, Sleeps()).notify([_firing().resolve(T0 + 99)], T0 + 100)
    assert rx.received[0].body["status"] == "resolved"


@pytest.mark.parametrize("code", [500, 502, 503, 429])
def test_retryable_answers_are_retried_with_capped_backoff(code):
    sleeps = Sleeps()
    with receiver([code, code, code]) as rx:
        delivery = _webhook(rx.url, sleeps).notify([_firing()], T0)
    assert delivery.attempts == 4
    assert delivery.status_code == 200
    assert len(rx.received) == 4
    # random() ≈ 1: each wait is at its ceiling, min(3, 1 × 2ⁿ)
    assert sleeps.calls == pytest.approx([0.999, 1.998, 2.997])
    assert delivery.delays_seconds == tuple(sleeps.calls)


def test_gives_up_after_max_attempts_saying_so():
    sleeps = Sleeps()
    with receiver([(503, "overloaded")] * 10) as rx, pytest.raises(NotificationError) as caught:
        _webhook(rx.url, sleeps).notify([_firing()], T0)
    error = caught.value
    assert (error.attempts, error.status_code, error.is_retryable) == (4, 503, True)
    assert len(rx.received) == 4
    assert len(sleeps.calls) == 3
    assert all(0 <= s <= POLICY.max_delay_seconds for s in sleeps.calls)
    assert "HTTP 503: overloaded" in str(error)
    assert "gave up after 4 attempt(s)" in str(error)


@pytest.mark.parametrize("code", [400, 401, 403, 404, 413, 422])
def test_other_4xx_are_not_retried(code):
    sleeps = Sleeps()
    with receiver([(code, "bad payload")]) as rx, pytest.raises(NotificationError) as caught:
        _webhook(rx.url, sleeps).notify([_firing()], T0)
    assert (caught.value.attempts, caught.value.is_retryable) == (1, False)
    assert caught.value.status_code == code
    assert f"HTTP {code}: bad payload" in str(caught.value)
    assert "not retried" in str(caught.value)
    assert len(rx.received) == 1
    assert sleeps.calls == []


def test_connection_errors_are_retried():
    sleeps = Sleeps()
    url = f"http://127.0.0.1:{free_port()}/hook"  # nothing listens there
    with pytest.raises(NotificationError) as caught:
        _webhook(url, sleeps).notify([_firing()], T0)
    assert caught.value.attempts == 4
    assert caught.value.status_code is None
    assert "connection error (ConnectError" in str(caught.value)
    assert len(sleeps.calls) == 3


def test_timeouts_are_retried_and_say_so():
    sleeps = Sleeps()
    with receiver(["hang", "hang"]) as rx:
        delivery = _webhook(rx.url, sleeps, timeout_seconds=0.3).notify([_firing()], T0)
    assert delivery.attempts == 3
    assert len(sleeps.calls) == 2
    with (
        receiver(["hang"] * 4) as rx,
        pytest.raises(NotificationError, match=r"timed out \(ReadTimeout\)"),
    ):
        _webhook(rx.url, Sleeps(), timeout_seconds=0.3).notify([_firing()], T0)


def test_full_jitter_scales_each_ceiling_by_the_random_draw():
    draws = iter([0.0, 0.5, 0.25])
    sleeps = Sleeps()
    with receiver([500, 500, 500]) as rx:
        _webhook(rx.url, sleeps, random=lambda: next(draws)).notify([_firing()], T0)
    assert sleeps.calls == pytest.approx([0.0, 1.0, 0.75])  # × ceilings 1, 2, 3(capped from 4)


def test_pending_alerts_are_refused_before_any_request():
    with receiver() as rx:
        with pytest.raises(AlertError, match="is pending; only firing and resolved"):
            _webhook(rx.url, Sleeps()).notify([Alert.pending({"alertname": "X"}, T0)], T0)
        with pytest.raises(AlertError, match="at least one alert"):
            _webhook(rx.url, Sleeps()).notify([], T0)
    assert rx.received == []


def test_alertmanager_notifier_posts_prometheus_shaped_alerts():
    firing = _firing()
    gone = _firing(target="b").resolve(T0 + 90)
    linked = Alert.pending({"alertname": "Q"}, T0, generator_url="http://tw.local/alerts/Q").fire(
        T0
    )
    sleeps = Sleeps()
    with receiver([503]) as rx:
        notifier = AlertmanagerNotifier(
            rx.url + "/", evaluation_interval_seconds=15, retry=POLICY, sleep=sleeps
        )
        delivery = notifier.notify([firing, gone, linked], T0 + 100)
    assert delivery.attempts == 2
    assert [r.path for r in rx.received] == ["/api/v2/alerts"] * 2
    body = rx.received[-1].body
    # firing: endsAt = now + 4 × max(15 s, 60 s resend delay) = T0 + 100 + 240
    assert body[0] == {
        "labels": {**firing.labels},
        "annotations": {**firing.annotations},
        "startsAt": "2027-01-15T08:01:00.000Z",
        "endsAt": "2027-01-15T08:05:40.000Z",
    }
    assert body[1]["endsAt"] == "2027-01-15T08:01:30.000Z"  # resolved: its resolve time
    assert body[2]["generatorURL"] == "http://tw.local/alerts/Q"
    assert "generatorURL" not in body[0]


def test_longer_evaluation_interval_extends_ends_at():
    with receiver() as rx:
        AlertmanagerNotifier(rx.url, evaluation_interval_seconds=120).notify([_firing()], T0 + 60)
    assert rx.received[0].body[0]["endsAt"] == "2027-01-15T08:09:00.000Z"  # + 4 × 120 s


def test_notifiers_satisfy_the_protocol():
    assert isinstance(WebhookNotifier("http://127.0.0.1:1/"), Notifier)
    assert isinstance(AlertmanagerNotifier("http://127.0.0.1:9093"), Notifier)


def test_the_protocol_declares_what_dispatch_reads():
    """Dispatch reads a notifier only through what :class:`Notifier` declares: no probing with
    ``getattr``, and something lacking one of them is not a notifier."""
    import ast
    import inspect

    import alerts.notify.dispatch as dispatch

    tree = ast.parse(inspect.getsource(dispatch))
    probes = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") in ("getattr", "hasattr")]  # fmt: skip
    assert probes == []
    read = {
        n.attr
        for n in ast.walk(tree)
        if isinstance(n, ast.Attribute)
        and isinstance(n.value, ast.Name | ast.Attribute)
        and (getattr(n.value, "id", "") == "notifier" or getattr(n.value, "attr", "") == "notifier")
    }
    declared = {name for name in vars(Notifier) if not name.startswith("_")}
    assert read and read <= declared, read - declared

    class OnlyNotify:
        def notify(self, alerts, now_seconds):
            return None

    assert not isinstance(OnlyNotify(), Notifier)


@pytest.mark.parametrize(
    ("build", "fragment"),
    [
        (lambda: WebhookNotifier("ftp://example/hook"), "http:// or https://"),
        (lambda: WebhookNotifier("not a url"), "http:// or https://"),
        (lambda: WebhookNotifier("http://[::1"), "not a valid URL"),
        (lambda: WebhookNotifier("http://127.0.0.1/", timeout_seconds=0), "timeout_seconds"),
        (lambda: WebhookNotifier("http://127.0.0.1/", timeout_seconds=float("nan")), "timeout"),
        (lambda: AlertmanagerNotifier("http://127.0.0.1/", resend_delay_seconds=-1), "resend"),
        (lambda: WebhookNotifier("http://127.0.0.1/", receiver=""), "receiver"),
        (lambda: WebhookNotifier("http://127.0.0.1/", group_by=["bad-name"]), "group_by"),
        (lambda: WebhookNotifier("http://127.0.0.1/", max_alerts=-1), "max_alerts"),
        (lambda: RetryPolicy(max_attempts=0), "max_attempts"),
        (lambda: RetryPolicy(max_attempts=1.5), "max_attempts"),
        (lambda: RetryPolicy(base_delay_seconds=-1), "base_delay_seconds"),
        (lambda: RetryPolicy(max_delay_seconds=float("inf")), "max_delay_seconds"),
        (lambda: RetryPolicy(base_delay_seconds=5, max_delay_seconds=1), "must be >="),
    ],
)
def test_bad_configuration_is_rejected_clearly(build, fragment):
    with pytest.raises(NotifierConfigError, match=fragment):
        build()


def test_errors_do_not_show_credentials_or_tokens():
    sleeps = Sleeps()
    with receiver([401]) as rx:
        url = rx.url.replace("http://", "http://user:hunter2@") + "/hook?token=s3cret"
        with pytest.raises(NotificationError) as caught:
            _webhook(url, sleeps).notify([_firing()], T0)
    message = str(caught.value)
    assert "hunter2" not in message and "s3cret" not in message
    assert f"POST {rx.url}/hook?…: HTTP 401" in message
    assert caught.value.receiver == f"{rx.url}/hook?…"
    assert rx.received[0].path == "/hook?token=s3cret"  # the request itself is unchanged


def test_group_alerts_splits_by_the_group_by_labels_like_the_dispatcher():
    kv_a = _firing("KVSaturation", target="a")
    kv_b = _firing("KVSaturation", target="b")
    queue = _firing("QueueGrowth", target="a")
    bare = Alert.pending({"alertname": "TargetDown"}, T0).fire(T0)
    groups = group_alerts([kv_a, queue, kv_b, bare], ("alertname", "slo"))
    assert [(dict(g.labels), g.alerts) for g in groups] == [
        ({"alertname": "KVSaturation", "slo": "ttft"}, (kv_a, kv_b)),
        ({"alertname": "QueueGrowth", "slo": "ttft"}, (queue,)),
        ({"alertname": "TargetDown"}, (bare,)),  # a group_by label it lacks is left out
    ]
    assert group_alerts([kv_a, queue], ())[0].alerts == (kv_a, queue)  # no group_by: one group


def test_max_alerts_truncates_and_counts_like_alertmanager():
    firing = [_firing(target=str(i), team="a" if i else "b") for i in range(3)]
    with receiver() as rx:
        _webhook(rx.url, Sleeps(), max_alerts=2).notify(
            [firing[1], firing[2].resolve(T0 + 90), firing[0]], T0 + 100
        )
    body = rx.received[0].body
    assert body["truncatedAlerts"] == 1
    assert [a["labels"]["target"] for a in body["alerts"]] == ["1", "2"]
    assert body["commonLabels"]["team"] == "a"  # computed over the alerts sent
