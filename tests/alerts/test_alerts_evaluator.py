"""The evaluator's lifecycle: ``for:`` and ``keep_firing_for:`` exactly at their boundaries,
resumption after a restart, a Hypothesis property against a tiny reference model of
Prometheus's ``AlertingRule.Eval``, per-rule evaluation errors, a failed save, the run loop."""

from __future__ import annotations

import math
import threading
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import AlertState, Evaluator, MemoryAlertState
from alerts.rules import BUILTIN_RULES
from collectors import canonical as c
from collectors.canonical import CanonicalHistogram, CanonicalSample, Kind
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader

T0 = 1_800_000_000.0
DOWN = next(r for r in BUILTIN_RULES if r.kind == "target-down")
TAIL = next(r for r in BUILTIN_RULES if r.name == "tail-latency-ttft")
LAB = (("model", "m"), ("target", "r0"))


def _scrape(t: float, up: bool) -> ScrapeRecord:
    running = CanonicalSample(c.REQUESTS_RUNNING, LAB, 1.0, Kind.GAUGE)
    return ScrapeRecord("r0", t, (running,) if up else (), is_up=up)


class Switch:
    """A target whose up/down the test sets before each evaluation: the target-down rule's
    condition holds exactly when the test says so."""

    def __init__(self) -> None:
        self.reader = FakeMetricsReader([_scrape(T0 - 1, True)])

    def at(self, t: float, holds: bool) -> float:
        self.reader.write_scrape(_scrape(t, not holds))
        return t


def _state_of(result) -> tuple[str, float | None, float | None, float | None]:
    (alert,) = result.alerts or (None,)
    if alert is None:
        return ("inactive", None, None, None)
    return (alert.state.value, alert.active_at_seconds, alert.started_at_seconds, alert.ended_at_seconds)  # fmt: skip


def test_for_fires_exactly_at_the_boundary() -> None:
    switch, rule = Switch(), replace(DOWN, for_seconds=60.0)
    evaluator = Evaluator([rule], switch.reader, MemoryAlertState())
    states = [evaluator.evaluate_once(switch.at(T0 + s, True)) for s in (0, 30, 59, 60)]
    assert [_state_of(r)[0] for r in states] == ["pending", "pending", "pending", "firing"]
    assert _state_of(states[-1]) == ("firing", T0, T0 + 60, None)


def test_keep_firing_for_holds_until_exactly_the_boundary() -> None:
    switch, rule = Switch(), replace(DOWN, for_seconds=0.0, keep_firing_for_seconds=60.0)
    evaluator = Evaluator([rule], switch.reader, MemoryAlertState())
    first = evaluator.evaluate_once(switch.at(T0, True))
    assert _state_of(first) == ("firing", T0, T0, None)  # for: 0 fires at once
    held = [evaluator.evaluate_once(switch.at(T0 + s, False)) for s in (15, 45, 74)]
    assert [_state_of(r)[0] for r in held] == ["firing"] * 3
    assert held[0].firing[0].keep_firing_since_seconds == T0 + 15
    done = evaluator.evaluate_once(switch.at(T0 + 75, False))  # 60 s after the first miss
    assert _state_of(done) == ("resolved", T0, T0, T0 + 75)
    assert evaluator.evaluate_once(switch.at(T0 + 90, False)).alerts == ()


def test_condition_returning_clears_the_hold() -> None:
    switch, rule = Switch(), replace(DOWN, for_seconds=0.0, keep_firing_for_seconds=60.0)
    evaluator = Evaluator([rule], switch.reader, MemoryAlertState())
    evaluator.evaluate_once(switch.at(T0, True))
    evaluator.evaluate_once(switch.at(T0 + 15, False))
    back = evaluator.evaluate_once(switch.at(T0 + 30, True))
    assert back.firing[0].keep_firing_since_seconds is None
    again = [evaluator.evaluate_once(switch.at(T0 + s, False)) for s in (45, 104, 105)]
    assert [_state_of(r)[0] for r in again] == ["firing", "firing", "resolved"]


def test_pending_is_dropped_not_resolved() -> None:
    switch, rule = Switch(), replace(DOWN, for_seconds=60.0)
    state = MemoryAlertState()
    evaluator = Evaluator([rule], switch.reader, state)
    evaluator.evaluate_once(switch.at(T0, True))
    gone = evaluator.evaluate_once(switch.at(T0 + 15, False))
    assert gone.alerts == () and gone.resolved == ()
    moves = [(t.from_state, t.to_state) for t in state.history(T0, T0 + 15)]
    assert moves == [(AlertState.INACTIVE, AlertState.PENDING), (AlertState.PENDING, AlertState.INACTIVE)]  # fmt: skip


def test_restart_continues_a_pending_for_and_keeps_the_fingerprint() -> None:
    switch, rule = Switch(), replace(DOWN, for_seconds=120.0)
    state = MemoryAlertState()
    first = Evaluator([rule], switch.reader, state).evaluate_once(switch.at(T0, True))
    restarted = Evaluator([rule], switch.reader, state)  # a new process over the same store
    assert restarted.evaluate_once(switch.at(T0 + 60, True)).pending[0].active_at_seconds == T0
    fired = restarted.evaluate_once(switch.at(T0 + 120, True))
    assert _state_of(fired) == ("firing", T0, T0 + 120, None)
    assert fired.firing[0].fingerprint == first.pending[0].fingerprint


def test_restored_alert_of_a_removed_rule_is_resolved() -> None:
    switch, state = Switch(), MemoryAlertState()
    Evaluator([DOWN], switch.reader, state).evaluate_once(switch.at(T0, True))
    Evaluator([DOWN], switch.reader, state).evaluate_once(switch.at(T0 + 60, True))
    after = Evaluator([], switch.reader, state).evaluate_once(T0 + 75)
    assert [a.state for a in after.alerts] == [AlertState.RESOLVED]
    assert state.active_alerts() == []


def _reference(steps, for_s: float, keep_s: float):
    """Prometheus's ``AlertingRule.Eval`` for one series, written out plainly."""
    state, active, fired, ended, since = "inactive", None, None, None, None
    for t, holds in steps:
        if state == "resolved":
            state, active, fired, ended = "inactive", None, None, None
        if holds:
            if state == "inactive":
                state, active = "pending", t
            since = None
        elif state == "pending":
            state, active = "inactive", None
        elif state == "firing":
            since = t if since is None else since
            if not (keep_s > 0 and t - since < keep_s):
                state, ended, since = "resolved", t, None
        if state == "pending" and t - active >= for_s:
            state, fired = "firing", t
        yield (state, active, fired, ended)


@settings(max_examples=60, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.integers(1, 120), st.booleans(), st.booleans()), min_size=1, max_size=25
    ),
    for_s=st.sampled_from([0.0, 15.0, 30.0, 60.0, 100.0]),
    keep_s=st.sampled_from([0.0, 15.0, 45.0, 90.0]),
)
def test_any_condition_sequence_gives_the_prometheus_lifecycle(steps, for_s, keep_s) -> None:
    switch, state = Switch(), MemoryAlertState()
    rule = replace(DOWN, for_seconds=for_s, keep_firing_for_seconds=keep_s)
    evaluator = Evaluator([rule], switch.reader, state)
    t, timeline = T0, []
    for gap, holds, _restart in steps:
        t += gap
        timeline.append((t, holds))
    expected = list(_reference(timeline, for_s, keep_s))
    for (t, holds), (_, _, restart), want in zip(timeline, steps, expected, strict=True):
        if restart:
            evaluator = Evaluator([rule], switch.reader, state)
        got = _state_of(evaluator.evaluate_once(switch.at(t, holds)))
        assert got == want, (t - T0, holds, got, want)


def _histogram(t: float, bounds: tuple[float, ...], n: float) -> ScrapeRecord:
    counts = tuple(n for _ in bounds)
    h = CanonicalHistogram(c.TTFT_SECONDS, LAB, bounds, counts, 0.05 * n, n)
    running = CanonicalSample(c.REQUESTS_RUNNING, LAB, 1.0, Kind.GAUGE)
    return ScrapeRecord("r0", t, (running,), (h,))


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_layout_change_is_a_per_rule_error_and_other_rules_still_evaluate(concurrency) -> None:
    reader = FakeMetricsReader(
        [_histogram(T0 + s, (0.1, 1.0, math.inf), s) for s in (0, 15, 30)]
        + [_histogram(T0 + s, (0.25, 2.5, math.inf), s) for s in (45, 60)]
    )
    reader.write_scrape(ScrapeRecord("r0", T0 + 75, is_up=False, error="refused"))
    rules = [TAIL, replace(DOWN, for_seconds=0.0)]
    state = MemoryAlertState()
    evaluator = Evaluator(rules, reader, state, read_concurrency=concurrency)
    result = evaluator.evaluate_once(T0 + 80)
    (error,) = result.errors
    assert error.rule == "tail-latency-ttft" and error.error_type == "LayoutChangeError"
    assert "bucket layout changed inside the rule's window" in error.message
    assert [a.labels["target"] for a in result.firing] == ["r0"]
    # the failure is stored (latest message, a count), not only logged
    evaluator.evaluate_once(T0 + 95)
    health = state.evaluation_health()
    (failure,) = health.failing
    assert (failure.rule, failure.num_failures, failure.error_type) == (
        "tail-latency-ttft",
        2,
        "LayoutChangeError",
    )
    assert "bucket layout changed inside the rule's window" in failure.message
    assert (failure.first_failed_seconds, health.last_evaluation_seconds) == (T0 + 80, T0 + 95)


class _FlakyState(MemoryAlertState):
    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    def save_evaluation(self, alerts, transitions, errors=(), at_seconds=None) -> None:
        if self.fail:
            raise ConnectionError("database is down")
        super().save_evaluation(alerts, transitions, errors, at_seconds)


def test_a_failed_save_leaves_the_evaluator_where_it_was() -> None:
    switch, state = Switch(), _FlakyState()
    evaluator = Evaluator([replace(DOWN, for_seconds=60.0)], switch.reader, state)
    evaluator.evaluate_once(switch.at(T0, True))
    state.fail = True
    try:
        evaluator.evaluate_once(switch.at(T0 + 30, True))
        raise AssertionError("the save error must reach the caller")
    except ConnectionError:
        pass
    state.fail = False
    fired = evaluator.evaluate_once(switch.at(T0 + 60, True))
    assert _state_of(fired) == ("firing", T0, T0 + 60, None)
    assert [t.to_state for t in state.history(T0, T0 + 60)] == [AlertState.PENDING, AlertState.FIRING]  # fmt: skip


def test_run_evaluates_on_the_clock_until_stopped() -> None:
    switch = Switch()
    for s in range(0, 91, 15):
        switch.at(T0 + s, True)
    now = [T0]
    stop = threading.Event()
    waits: list[float] = []

    def wait(seconds: float) -> None:
        waits.append(seconds)
        now[0] += seconds + (20.0 if len(waits) == 2 else 0.0)  # one slow cycle
        if len(waits) == 4:
            stop.set()

    state = MemoryAlertState()
    evaluator = Evaluator([replace(DOWN, for_seconds=30.0)], switch.reader, state, clock=lambda: now[0])  # fmt: skip
    assert evaluator.run(stop, 15.0, wait=wait) == 4
    assert waits == [15.0, 15.0, 10.0, 15.0]  # the slow cycle's tick is skipped, not bunched
    # woken at 50 for slot 30: 30 is missed, and the evaluation is slot 45's, not 50
    assert [t.at_seconds - T0 for t in state.history(T0, T0 + 100)] == [0.0, 45.0]


@pytest.mark.parametrize("now", [math.nan, math.inf, -math.inf, True, "1800000000"])
def test_a_bad_time_is_refused_by_name(now) -> None:
    evaluator = Evaluator([DOWN], Switch().reader, MemoryAlertState(), clock=lambda: now)
    with pytest.raises(ValueError, match=r"now=.*must be a finite Unix time"):
        evaluator.evaluate_once()
    with pytest.raises(ValueError, match=r"now=.*must be a finite Unix time"):
        Evaluator([DOWN], Switch().reader, MemoryAlertState()).evaluate_once(now)


@pytest.mark.parametrize("interval", [0, -15.0, math.nan, math.inf, "15"])
def test_a_bad_interval_is_refused_by_name(interval) -> None:
    evaluator = Evaluator([DOWN], Switch().reader, MemoryAlertState())
    with pytest.raises(ValueError, match=r"interval_seconds=.*must be a positive number"):
        evaluator.run(threading.Event(), interval)


def test_an_alerts_label_set_is_made_once_and_kept_within_a_bound(monkeypatch) -> None:
    """Each cycle meets the same label sets; the evaluator keeps each one's validated set and
    fingerprint (bounded), and a label set that is invalid is refused every time."""
    import alerts.evaluator as evaluator_module
    from alerts.labels import fingerprint_hex

    evaluator = Evaluator(BUILTIN_RULES, FakeMetricsReader(), MemoryAlertState())
    rule = BUILTIN_RULES[0]
    labels, fingerprint = evaluator._alert_labels(rule, {"target": "replica-0"})
    assert labels["target"] == "replica-0" and labels["alertname"] == rule.alert
    assert fingerprint == fingerprint_hex(labels.fingerprint())
    assert evaluator._alert_labels(rule, {"target": "replica-0"})[0] is labels  # kept
    other = BUILTIN_RULES[1]
    assert evaluator._alert_labels(other, {"target": "replica-0"})[0]["alertname"] == other.alert
    monkeypatch.setattr(evaluator_module, "LABEL_SETS_KEPT", 2)
    evaluator._alert_labels(rule, {"target": "replica-1"})  # the third: the kept ones go
    assert evaluator._alert_labels(rule, {"target": "replica-0"})[0] is not labels
    assert len(evaluator._labelled) <= 2
    for _ in range(2):
        with pytest.raises(ValueError):
            evaluator._alert_labels(rule, {"bad name": "x"})
