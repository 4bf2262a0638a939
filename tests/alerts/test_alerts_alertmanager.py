"""Against a real Alertmanager (Debian's prometheus-alertmanager 0.25): it receives a firing
alert from :class:`AlertmanagerNotifier` and resolves it through ``endsAt``; its fingerprints,
webhook payloads, group keys and inhibition agree with ours."""

from __future__ import annotations

import contextlib
import re
import time
from datetime import datetime

import httpx
import pytest

from alerts import (
    DEFAULT_INHIBIT_RULES,
    Alert,
    AlertmanagerNotifier,
    RetryPolicy,
    Silence,
    inhibited_alerts,
    postable_silence,
    silenced_by,
    webhook_message,
)
from alerts.notify import GO_ZERO_TIME, group_key
from tests.alerts.alertmanager_server import AlertmanagerServer, alertmanager, wait_for
from tests.alerts.loopback import receiver

pytestmark = pytest.mark.timeout(240)


def _config(webhook_url: str) -> str:
    # NOTE: group_wait/group_interval of 1 s so notifications (firing, then resolved) arrive in
    # seconds; the inhibit rule is DEFAULT_INHIBIT_RULES written as Alertmanager config.
    return f"""
route:
  receiver: hook
  group_by: [alertname]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
receivers:
  - name: hook
    webhook_configs:
      - url: "{webhook_url}"
        send_resolved: true
inhibit_rules:
  - source_matchers: ['severity="page"', 'slo=~".+"']
    target_matchers: ['severity="ticket"', 'slo=~".+"']
    equal: [slo]
"""


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with receiver() as hook:
        directory = tmp_path_factory.mktemp("alertmanager")
        with alertmanager(directory, _config(hook.url + "/hook")) as server:
            yield server, hook


def _notifier(server: AlertmanagerServer) -> AlertmanagerNotifier:
    return AlertmanagerNotifier(
        server.url, evaluation_interval_seconds=15, retry=RetryPolicy(max_attempts=3)
    )


def _by_fingerprint(server: AlertmanagerServer, fingerprint: str) -> dict | None:
    return next((a for a in server.alerts() if a["fingerprint"] == fingerprint), None)


def test_firing_alert_is_received_then_resolved(stack):
    server, hook = stack
    now = time.time()
    firing = Alert.pending(
        {"alertname": "TwTailLatency", "severity": "page", "slo": "e2e", "target": "r1"},
        now - 120,
        annotations={"summary": "p99 e2e over 4 s while p50 holds"},
        generator_url="http://127.0.0.1:8501/incidents",
    ).fire(now - 60)
    notifier = _notifier(server)

    assert notifier.notify([firing], now).status_code == 200
    seen = wait_for("the firing alert", lambda: _by_fingerprint(server, firing.fingerprint))
    # our fingerprint algorithm is Alertmanager's: it lists the alert under the same one
    assert seen["labels"] == {**firing.labels}
    assert seen["annotations"] == {**firing.annotations}
    assert seen["status"]["state"] == "active"
    assert seen["generatorURL"] == firing.generator_url
    # startsAt is the firing start; endsAt Prometheus's now + 4 × max(15 s, 60 s resend delay)
    assert _seconds(seen["startsAt"]) == pytest.approx(firing.started_at_seconds, abs=0.001)
    assert _seconds(seen["endsAt"]) == pytest.approx(now + 240, abs=0.001)

    sent = wait_for("the firing webhook", lambda: _posted(hook, firing.fingerprint, "firing"), 60)
    ours = webhook_message([firing], "hook", ("alertname",), sent["externalURL"])
    # Alertmanager's own webhook has exactly our version-4 shape, group key included
    assert set(sent) == set(ours)
    assert set(sent["alerts"][0]) == set(ours["alerts"][0])
    assert sent["version"] == "4"
    assert sent["groupKey"] == group_key({"alertname": "TwTailLatency"}) == ours["groupKey"]
    for key in ("status", "receiver", "groupLabels", "commonLabels", "commonAnnotations"):
        assert sent[key] == ours[key], key
    assert sent["alerts"][0]["fingerprint"] == firing.fingerprint
    # a firing alert's end is not exposed in webhooks (types.Alerts): Go's zero time, as ours
    assert _seconds(sent["alerts"][0]["endsAt"]) == _seconds(GO_ZERO_TIME)
    assert ours["alerts"][0]["endsAt"] == GO_ZERO_TIME

    resolved = firing.resolve(time.time())
    assert notifier.notify([resolved], time.time()).status_code == 200
    wait_for(
        "the alert to leave the active list",
        lambda: True if _by_fingerprint(server, firing.fingerprint) is None else None,
    )
    sent = wait_for(
        "the resolved webhook", lambda: _posted(hook, firing.fingerprint, "resolved"), 60
    )
    assert sent["alerts"][0]["status"] == "resolved"
    assert sent["status"] == "resolved"
    ended = resolved.ended_at_seconds
    assert _seconds(sent["alerts"][0]["endsAt"]) == pytest.approx(ended, abs=0.001)


def test_inhibition_agrees_with_alertmanager(stack):
    server, _ = stack
    now = time.time()

    def fire(name, severity, slo=None):
        labels = {"alertname": name, "severity": severity}
        if slo:
            labels["slo"] = slo
        return Alert.pending(labels, now - 100).fire(now - 50)

    alerts = [
        fire("TwBurnRate", "page", "ttft"),
        fire("TwBurnRate", "ticket", "ttft"),
        fire("TwBurnRate", "ticket", "itl"),
        fire("TwTargetDown", "page"),
        fire("TwPrefixHitDrop", "ticket"),
    ]
    ours = inhibited_alerts(alerts, DEFAULT_INHIBIT_RULES)
    assert ours == {alerts[1].fingerprint: alerts[0].fingerprint}
    _notifier(server).notify(alerts, now)

    def theirs() -> dict[str, str] | None:
        listed = {a["fingerprint"]: a for a in server.alerts()}
        if not all(a.fingerprint in listed for a in alerts):
            return None
        inhibited = {
            fp: a["status"]["inhibitedBy"][0]
            for fp, a in listed.items()
            if a["status"]["inhibitedBy"] and fp in {x.fingerprint for x in alerts}
        }
        return inhibited if inhibited else None

    assert wait_for("Alertmanager to inhibit the ticket", theirs) == ours
    # and the rest are plain active alerts
    states = {a["fingerprint"]: a["status"]["state"] for a in server.alerts()}
    assert states[alerts[1].fingerprint] == "suppressed"
    assert {states[a.fingerprint] for a in alerts if a is not alerts[1]} == {"active"}


def test_silences_agree_with_alertmanager(stack):
    server, _ = stack
    now = time.time()
    silences = [
        Silence.create(text, now, now + 3600, "test", "conformance", now, silence_id=name)
        for name, text in [
            ("targets-a-or-b", 'alertname="TwSilenced", target=~"a|b"'),  # anchored: not "ab"
            ("no-team", 'alertname="TwSilenced", team=""'),  # absent label reads as ""
            ("not-a-prefixed", 'alertname="TwSilenced", target!~"a.*"'),
            ("code-5xx", 'alertname="TwSilenced", code=~"5.."'),  # not "1500"
            ("infra", 'alertname="TwSilenced", team!="infra", target="ab"'),
        ]
    ]
    alerts = [
        Alert.pending({"alertname": "TwSilenced", **labels}, now - 60).fire(now - 30)
        for labels in (
            {"target": "a", "team": "web"},
            {"target": "ab", "team": "web"},
            {"target": "ab", "team": "infra"},
            {"target": "b"},
            {"target": "c", "team": "web", "code": "500"},
            {"target": "a", "team": "web", "code": "1500"},
        )
    ]
    ours = {a.fingerprint: silenced_by(a.labels, silences, now) for a in alerts}
    assert any(ours.values()) and not all(ours.values())

    am_ids = {}
    for silence in silences:
        response = httpx.post(
            f"{server.url}/api/v2/silences", json=postable_silence(silence), timeout=30
        )
        assert response.status_code == 200, response.text
        am_ids[response.json()["silenceID"]] = silence.id
    _notifier(server).notify(alerts, now)

    def theirs() -> dict[str, tuple[str, ...]] | None:
        listed = {a["fingerprint"]: a for a in server.alerts()}
        if not all(a.fingerprint in listed for a in alerts):
            return None
        return {
            a.fingerprint: tuple(
                sorted(am_ids[i] for i in listed[a.fingerprint]["status"]["silencedBy"])
            )
            for a in alerts
        }

    wait_for("Alertmanager to list the alerts", theirs)
    # NOTE: silences apply when Alertmanager answers; poll a while, then compare for the diff
    with contextlib.suppress(AssertionError):
        wait_for("Alertmanager's silencedBy", lambda: True if theirs() == ours else None, 15)
    assert theirs() == ours
    assert ours == {
        alerts[0].fingerprint: ("targets-a-or-b",),
        alerts[1].fingerprint: ("infra",),
        alerts[2].fingerprint: (),
        alerts[3].fingerprint: ("no-team", "not-a-prefixed", "targets-a-or-b"),
        alerts[4].fingerprint: ("code-5xx", "not-a-prefixed"),
        alerts[5].fingerprint: ("targets-a-or-b",),
    }


def _seconds(rfc3339: str) -> float:
    """Unix seconds of an RFC 3339 time as Go writes it (up to 9 fractional digits, ``Z`` or
    an offset)."""
    found = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", rfc3339)
    assert found, rfc3339
    whole, fraction, zone = found.groups()
    moment = datetime.fromisoformat(whole + ("+00:00" if zone == "Z" else zone))
    return moment.timestamp() + float("0." + (fraction or "0"))


def _posted(hook, fingerprint: str, status: str) -> dict | None:
    with hook.lock:
        bodies = [r.body for r in hook.received]
    for body in bodies:
        for alert in body["alerts"]:
            if alert["fingerprint"] == fingerprint and alert["status"] == status:
                return body
    return None
