"""The evaluator keeps each final step of its step-series reads across cycles
(``alerts.kept_steps``), and a burn-rate rule reads its windows on the step grid so the next
cycle shares its steps (``alerts.rules.evaluate._grid_windows``): the answers are the reader's
own, only the steps not kept are read, and nothing newer than final is kept."""

from __future__ import annotations

import math

import pytest

from alerts import Evaluator, MemoryAlertState
from alerts.kept_steps import KeptSteps, kept_steps
from alerts.rules import builtin_rule_set
from alerts.rules.burn_rate import BurnRateRule
from alerts.rules.evaluate import (
    _slo_selector,
    _stepped_error_ratios,
    _window_error_ratio,
    common_step,
)
from collectors import canonical as c
from slo import ErrorRatioIndicator, ErrorSource, LatencyIndicator, LatencyMetric, Selector, SLOSpec
from tests.alerts.eval_data import START, Conditions, build

HOUR = 3600.0
SLOS = (
    SLOSpec("ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), 0.99, 30),
    SLOSpec("errors", Selector(), ErrorRatioIndicator(ErrorSource.REQUESTS), 0.999, 30),
)


def burning(t: float, replica: int) -> Conditions:
    """Slow and failing for twenty minutes in the sixth hour, on one replica."""
    if replica == 0 and START + 5 * HOUR <= t < START + 5 * HOUR + 1200:
        return Conditions(ttft=((0.08, 0.7), (0.9, 0.3)), error_share=0.2)
    return Conditions()


@pytest.fixture(scope="module")
def fleet():
    return build(burning, replicas=2, hours=6.5)


class Counting:
    """A reader that counts the spans of its step-series reads."""

    def __init__(self, inner) -> None:
        self.inner, self.asked = inner, []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def _count(self, method, family, labels, start, end, step, **options):
        self.asked.append((method, start, end))
        return getattr(self.inner, method)(family, labels, start, end, step, **options)

    def histogram_series(self, *args, **options):
        return self._count("histogram_series", *args, **options)

    def counter_series(self, *args, **options):
        return self._count("counter_series", *args, **options)

    def counter_series_by_target(self, *args, **options):
        return self._count("counter_series_by_target", *args, **options)


@pytest.mark.parametrize(
    "method, family",
    [
        ("histogram_series", c.TTFT_SECONDS),
        ("counter_series", c.REQUESTS_TOTAL),
        ("counter_series_by_target", c.PREEMPTIONS_TOTAL),
    ],
)
def test_a_read_one_step_later_asks_only_for_the_steps_not_kept(fleet, method, family) -> None:
    counting = Counting(fleet)
    kept = KeptSteps(counting)
    end = START + 6 * HOUR
    for shift in (0.0, 60.0, 120.0):
        now = end + shift
        kept.at(now + 15.0)
        counting.asked.clear()
        got = getattr(kept, method)(family, {}, now - HOUR, now, 60.0)
        assert got == getattr(fleet, method)(family, {}, now - HOUR, now, 60.0)
        if shift == 0.0:
            assert counting.asked == [(method, now - HOUR, now)]
        else:
            # NOTE: the steps of the last five minutes were not final: read again, with the new
            (asked,) = counting.asked
            assert asked[0] == method and asked[2] == now
            assert asked[1] == now - 60.0 - 300.0, asked[1] - now


def test_nothing_is_kept_before_the_cycles_time_is_set_or_past_the_bound(fleet) -> None:
    counting = Counting(fleet)
    kept = KeptSteps(counting)
    end = START + 6 * HOUR
    kept.histogram_series(c.TTFT_SECONDS, {}, end - HOUR, end, 60.0)
    kept.histogram_series(c.TTFT_SECONDS, {}, end - HOUR, end, 60.0)
    assert len(counting.asked) == 2 and counting.asked[0] == counting.asked[1]
    small = KeptSteps(counting, answers_kept=10)
    small.at(end + 600.0)
    small.histogram_series(c.TTFT_SECONDS, {}, end - HOUR, end, 60.0)
    assert small._count == 0  # NOTE: 60 answers do not fit in 10: none kept
    counting.asked.clear()
    small.histogram_series(c.TTFT_SECONDS, {}, end - HOUR, end, 60.0)
    assert counting.asked == [("histogram_series", end - HOUR, end)]


def test_a_server_reader_that_keeps_its_own_answers_is_not_wrapped(fleet) -> None:
    class Server:
        keeps_final_answers = True

    server = Server()
    assert kept_steps(server) is server
    wrapped = kept_steps(fleet)
    assert isinstance(wrapped, KeptSteps) and kept_steps(wrapped) is wrapped


@pytest.mark.parametrize("offset", [0.0, 15.0, 137.0, 299.0])
@pytest.mark.parametrize("slo", ["ttft", "errors"])
def test_a_burn_rate_rules_grid_windows_are_each_windows_own(fleet, slo, offset) -> None:
    """On the step grid or off it, every window's error ratio read in parts (whole steps,
    and the two edges) is the one read as a single window, during the incident and after."""
    rules, _ = builtin_rule_set(SLOS)
    for rule in (r for r in rules if isinstance(r, BurnRateRule) and r.slo == slo):
        step = common_step(rule.window_lengths_seconds())
        assert step is not None
        selector = _slo_selector(rule)
        for now in (START + 5 * HOUR + 900.0 + offset, START + 6 * HOUR + offset):
            got = _stepped_error_ratios(rule, fleet, selector, now, step)
            for length, ratio in got.items():
                want = _window_error_ratio(rule, fleet, selector, now - length, now)
                assert math.isclose(ratio, want, rel_tol=1e-9, abs_tol=1e-12) or (
                    math.isnan(ratio) and math.isnan(want)
                ), (rule.name, now - START, length, ratio, want)


def test_cycles_with_kept_steps_give_what_a_reader_that_keeps_nothing_gives(fleet) -> None:
    """Every rule's instances over a run of cycles 37 s apart (on and off the grid) (the incident burning and passing),
    read through the kept steps, are those read from the reader itself; and the evaluator
    reads through them."""
    from alerts.kinds import evaluate_rule

    rules, _ = builtin_rule_set(SLOS)
    assert isinstance(Evaluator(rules, fleet, MemoryAlertState()).reader, KeptSteps)
    kept = KeptSteps(fleet)
    for k in range(0, 24):
        now = START + 5 * HOUR + 900.0 + 37.0 * k
        kept.at(now)
        for rule in rules:
            ours, theirs = evaluate_rule(rule, kept, now), evaluate_rule(rule, fleet, now)
            assert [(i.labels, i.holds) for i in ours] == [(i.labels, i.holds) for i in theirs]
            for a, b in zip(ours, theirs, strict=True):
                assert math.isclose(a.value, b.value, rel_tol=1e-9) or (
                    math.isnan(a.value) and math.isnan(b.value)
                ), (k, rule.name, a.value, b.value)
    assert kept._count > 0
