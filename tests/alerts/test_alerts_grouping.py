"""One cause, one page: alerts triage explains by the same cause in the same scope join the
incident the first of them opened; an unexplained one opens its own; the evaluator groups at
firing and keeps the group through the alert's life; the store keeps it."""

from __future__ import annotations

from dataclasses import replace

from alerts import (
    Alert,
    AlertState,
    Evaluator,
    Explanation,
    Incident,
    MemoryAlertState,
    group_fired,
    opener_of,
    symptoms_of,
)
from alerts.rules import BUILTIN_RULES
from alerts.sql.codec import decode_alert, encode_alert
from collectors import canonical as c
from collectors.canonical import CanonicalSample, Kind
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader

T0 = 1_800_000_000.0


def _firing(name: str, at: float, **labels: str) -> Alert:
    return Alert.pending({"alertname": name, **labels}, at - 10).fire(at)


def _explain(table):
    return lambda alert, now: table.get(alert.name)


def test_alerts_of_one_cause_and_scope_join_the_first_ones_incident():
    kv = _firing("kv-saturation", T0, target="r0")
    queue = _firing("queue-growth", T0)
    tail = _firing("tail-latency-incident", T0, metric="ttft")
    table = {
        "kv-saturation": Explanation("kv-exhaustion", "r0"),
        "queue-growth": Explanation("kv-exhaustion", "r0"),
        "tail-latency-incident": Explanation("kv-exhaustion", "fleet"),
    }
    grouped = group_fired([kv, queue, tail], [], _explain(table), T0)
    assert [a.incident_group for a in grouped] == [kv.fingerprint] * 3
    assert [a.cause for a in grouped] == ["kv-exhaustion"] * 3
    assert symptoms_of(grouped[0], grouped) == grouped[1:]


def test_another_cause_another_fleet_or_no_cause_opens_its_own():
    opened = group_fired(
        [_firing("kv-saturation", T0, target="r0", model="m")],
        [],
        _explain({"kv-saturation": Explanation("kv-exhaustion", "r0")}),
        T0,
    )
    later = [
        _firing("queue-growth", T0 + 5, model="m"),
        _firing("prefix-hit-drop", T0 + 5, model="m"),
        _firing("tail-latency-incident", T0 + 5, model="other"),
    ]
    table = {
        "queue-growth": Explanation("overload", "fleet"),  # another cause
        "prefix-hit-drop": Explanation("", "fleet"),  # nothing stood out
        "tail-latency-incident": Explanation("kv-exhaustion", "r9"),  # another model's fleet
    }
    grouped = group_fired(later, opened, _explain(table), T0 + 5)
    assert [a.incident_group for a in grouped] == [a.fingerprint for a in later]
    assert grouped[1].cause == "" and grouped[0].cause == "overload"


def test_two_replicas_of_one_cause_are_one_incident_and_keep_their_own_scope():
    first = _firing("kv-saturation", T0, target="r0", model="m")
    second = _firing("kv-saturation", T0 + 5, target="r1", model="m")
    table = {"kv-saturation": Explanation("kv-exhaustion", "r0")}
    (opened,) = group_fired([first], [], _explain(table), T0)
    table["kv-saturation"] = Explanation("kv-exhaustion", "r1")
    (joined,) = group_fired([second], [opened], _explain(table), T0 + 5)
    assert joined.incident_group == first.fingerprint and joined.cause_scope == "r1"


def test_an_explainer_that_cannot_say_leaves_the_alert_on_its_own():
    alert = _firing("queue-growth", T0)
    (grouped,) = group_fired([alert], [], lambda a, now: None, T0)
    assert (grouped.cause, grouped.incident_group) == ("", alert.fingerprint)


def _running(t: float, up: bool, target: str) -> ScrapeRecord:
    lab = (("model", "m"), ("target", target))
    sample = CanonicalSample(c.REQUESTS_RUNNING, lab, 1.0, Kind.GAUGE)
    return ScrapeRecord(target, t, (sample,) if up else (), is_up=up)


def test_the_evaluator_groups_at_firing_and_the_group_lasts_to_resolution():
    down = replace(next(r for r in BUILTIN_RULES if r.kind == "target-down"), for_seconds=0.0)
    reader = FakeMetricsReader([_running(T0 - 1, True, t) for t in ("r0", "r1")])
    calls = []

    def explain(alert, now):
        calls.append((alert.labels["target"], now))
        return Explanation("slow-replica", "fleet")

    state = MemoryAlertState()
    evaluator = Evaluator([down], reader, state, explain=explain)
    reader.write_scrapes([_running(T0, False, "r0"), _running(T0, True, "r1")])
    evaluator.evaluate_once(T0)
    reader.write_scrapes([_running(T0 + 15, False, "r0"), _running(T0 + 15, False, "r1")])
    second = evaluator.evaluate_once(T0 + 15)
    first_fp = next(a.fingerprint for a in second.firing if a.labels["target"] == "r0")
    assert {a.labels["target"]: a.incident_group for a in second.firing} == {
        "r0": first_fp,
        "r1": first_fp,
    }
    assert calls == [("r0", T0), ("r1", T0 + 15)]  # once each, when it fired
    reader.write_scrapes([_running(T0 + 30, True, "r0"), _running(T0 + 30, True, "r1")])
    third = evaluator.evaluate_once(T0 + 30)
    assert {a.incident_group for a in third.resolved} == {first_fp}
    incidents = state.incidents()
    opener = next(i for i in incidents if not i.is_symptom)
    (symptom,) = [i for i in incidents if i.is_symptom]
    assert opener_of(symptom, incidents) == opener
    assert opener.cause == "slow-replica"


def test_a_failing_explainer_never_fails_the_evaluation():
    down = replace(next(r for r in BUILTIN_RULES if r.kind == "target-down"), for_seconds=0.0)
    reader = FakeMetricsReader([_running(T0 - 1, True, "r0")])

    def broken(alert, now):
        raise RuntimeError("the store went away")

    evaluator = Evaluator([down], reader, MemoryAlertState(), explain=broken)
    reader.write_scrape(_running(T0, False, "r0"))
    (alert,) = evaluator.evaluate_once(T0).firing
    assert alert.state is AlertState.FIRING and alert.incident_group == alert.fingerprint


def test_the_explanation_is_stored_and_read_back_and_old_records_read_empty():
    alert = _firing("queue-growth", T0).explained("overload", "fleet", "abc")
    assert decode_alert(encode_alert(alert)) == alert
    old = (
        encode_alert(_firing("queue-growth", T0))
        .replace(',"cause":"","cause_scope":""', "")
        .replace(',"incident_group":""', "")
    )
    assert "cause" not in old
    assert decode_alert(old).cause == ""


def test_an_incident_names_its_cause_with_its_scope():
    alert = _firing("kv-saturation", T0, target="r0").explained("kv-exhaustion", "r0", "")
    assert Incident(1, alert).cause == "kv-exhaustion on r0"
    assert Incident(2, alert.explained("overload", "fleet", "")).cause == "overload"


def test_a_webhook_gets_one_group_per_incident_under_the_openers_key():
    from alerts.notify import group_alerts, webhook_message

    kv = _firing("kv-saturation", T0, target="r0").explained("kv-exhaustion", "r0", "f1")
    queue = _firing("queue-growth", T0).explained("kv-exhaustion", "r0", "f1")
    other = _firing("target-down", T0, target="r2")
    groups = group_alerts([kv, queue, other], ("alertname",))
    assert sorted(len(g.alerts) for g in groups) == [1, 2]
    together = next(g for g in groups if len(g.alerts) == 2)
    message = webhook_message(together.alerts, "hook")
    assert message["groupLabels"] == {"incident": "f1"}
    assert message["groupKey"] == '{}:{incident="f1"}'
    assert message["alerts"][0]["annotations"]["cause"] == "kv-exhaustion on r0"


def test_an_alert_fired_before_its_cause_showed_joins_the_incident_once_it_does():
    down = replace(next(r for r in BUILTIN_RULES if r.kind == "target-down"), for_seconds=0.0)
    reader = FakeMetricsReader([_running(T0 - 1, True, t) for t in ("r0", "r1")])
    answers = {
        "r0": [None, None, Explanation("slow-replica", "r0")],
        "r1": [Explanation("slow-replica", "r1")],
    }

    def explain(alert, now):
        return answers[alert.labels["target"]].pop(0)

    evaluator = Evaluator([down], reader, MemoryAlertState(), explain=explain)
    reader.write_scrapes([_running(T0, False, "r0"), _running(T0, True, "r1")])
    (first,) = evaluator.evaluate_once(T0).firing
    assert first.cause == "" and first.incident_group == first.fingerprint
    reader.write_scrapes([_running(T0 + 15, False, "r0"), _running(T0 + 15, False, "r1")])
    second = {a.labels["target"]: a for a in evaluator.evaluate_once(T0 + 15).firing}
    # r1 fired explained and opened the cause's incident; r0 was asked again, still unsure
    assert second["r1"].incident_group == second["r1"].fingerprint
    assert second["r0"].cause == ""
    reader.write_scrapes([_running(T0 + 30, False, "r0"), _running(T0 + 30, False, "r1")])
    third = {a.labels["target"]: a for a in evaluator.evaluate_once(T0 + 30).firing}
    assert third["r0"].cause == "slow-replica"
    assert third["r0"].incident_group == second["r1"].fingerprint
    assert answers == {"r0": [], "r1": []}  # each explained until it had a cause, no more


def _ended(alert: Alert, at: float) -> Alert:
    return alert.resolve(at)


def test_an_alert_that_went_pending_while_an_incident_fired_joins_it_after_that_one_ended():
    # NOTE: a ticket on a tail's first edge resolves, then the page its for: held back fires
    table = {
        "tail-latency-incident": Explanation("output-length-shift", "fleet"),
        "queue-growth": Explanation("output-length-shift", "fleet"),
    }
    (ticket,) = group_fired([_firing("tail-latency-incident", T0)], [], _explain(table), T0)
    ended = _ended(ticket, T0 + 20)
    page = Alert.pending({"alertname": "queue-growth"}, T0 + 10).fire(T0 + 25)
    (joined,) = group_fired([page], [], _explain(table), T0 + 25, ended=[ended])
    assert joined.incident_group == ticket.fingerprint
    # went pending after the ticket ended: an incident of its own
    late = Alert.pending({"alertname": "queue-growth"}, T0 + 21).fire(T0 + 30)
    (alone,) = group_fired([late], [], _explain(table), T0 + 30, ended=[ended])
    assert alone.incident_group == late.fingerprint
    # another cause never joins, ended or not
    table["queue-growth"] = Explanation("overload", "fleet")
    (other,) = group_fired([page], [], _explain(table), T0 + 25, ended=[ended])
    assert other.incident_group == page.fingerprint


def test_the_evaluator_remembers_an_ended_incident_while_an_alert_pends_on_its_time():
    down = replace(next(r for r in BUILTIN_RULES if r.kind == "target-down"), for_seconds=20.0)
    reader = FakeMetricsReader([_running(T0 - 31, True, t) for t in ("r0", "r1")])
    evaluator = Evaluator(
        [down], reader, MemoryAlertState(), explain=lambda a, now: Explanation("x", "fleet")
    )

    def at(t: float, r0: bool, r1: bool):
        reader.write_scrapes([_running(t, r0, "r0"), _running(t, r1, "r1")])
        return evaluator.evaluate_once(t)

    at(T0 - 30, True, False)  # r1 pending
    (r1,) = at(T0 - 10, True, False).firing
    at(T0, False, False)  # r0 pending while r1 fires
    assert [a.labels["target"] for a in at(T0 + 10, False, True).resolved] == ["r1"]
    (r0,) = at(T0 + 20, False, True).firing
    assert r0.labels["target"] == "r0" and r0.incident_group == r1.fingerprint
    # nothing pends any more: the ended incident is forgotten, a later outage opens its own
    at(T0 + 30, True, True)
    at(T0 + 40, True, False)
    (again,) = at(T0 + 60, True, False).firing
    assert again.incident_group == again.fingerprint
