"""Burn-rate rules read the SLI recording rules ``tailwatch rules export`` writes, where the
server evaluates them (issue 24: the long windows of a large fleet are its heaviest read), and
only those of the SLO as it stands: a record of another threshold, or a window without one,
leaves the rule to compute every window from the engines' series."""

from __future__ import annotations

import pytest

from alerts.rules import builtin_rule_set
from alerts.rules.burn_rate import BurnRateRule
from alerts.rules.evaluate import burn_rate, recorded_error_ratios
from alerts.rules.records import slo_record_labels, slo_record_name
from collectors import canonical as c
from slo import LatencyIndicator, LatencyMetric, Sample, Selector, SLOSpec
from tests.alerts.eval_data import build, healthy

SLO = SLOSpec("chat-ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), 0.99, 30)


class WithRecords:
    """A reader of healthy engine series that also holds the server's records: record name →
    (labels, value), the value sampled ten seconds before every read's end."""

    def __init__(self, inner, records: dict[str, tuple[dict[str, str], float]]) -> None:
        self.inner, self.records = inner, records

    def __getattr__(self, name: str):
        return getattr(self.inner, name)

    def samples(self, family, labels, start, end):
        if not family.startswith(c.RAW_PREFIX):
            return self.inner.samples(family, labels, start, end)
        held = self.records.get(family.removeprefix(c.RAW_PREFIX))
        if held is None or not set((labels or {}).items()) <= set(held[0].items()):
            return {}
        return {tuple(sorted(held[0].items())): [Sample(end - 10.0, held[1])]}


@pytest.fixture(scope="module")
def rule_and_reader():
    rules, _ = builtin_rule_set((SLO,))
    page = next(r for r in rules if isinstance(r, BurnRateRule) and r.severity == "page")
    reader = build(healthy, hours=4.0)
    return page, reader


def _last(reader) -> float:
    target = next(dict(i.labels)[c.LABEL_TARGET] for i in reader.series(c.TTFT_SECONDS))
    return max(s.timestamp_seconds for s in reader.scrapes(target))


def _records(rule: BurnRateRule, ratio: float, **relabel: str) -> dict:
    labels = {**slo_record_labels(rule.slo, rule.sli), **relabel}
    return {slo_record_name(rule.slo, w): (labels, ratio) for w in rule.window_lengths_seconds()}


def test_the_records_are_read_where_the_server_holds_them(rule_and_reader) -> None:
    rule, reader = rule_and_reader
    now = _last(reader)
    assert burn_rate(rule, reader, now)[0].holds is False  # healthy series: within budget
    burning = WithRecords(reader, _records(rule, 0.5))  # half the requests too slow
    assert recorded_error_ratios(rule, burning, now) == dict.fromkeys(
        rule.window_lengths_seconds(), 0.5
    )
    (instance,) = burn_rate(rule, burning, now)
    assert instance.holds and instance.value == pytest.approx(0.5 / (1 - SLO.target))


def test_a_record_of_another_threshold_or_a_missing_window_is_not_read(rule_and_reader) -> None:
    rule, reader = rule_and_reader
    now = _last(reader)
    stale = WithRecords(reader, _records(rule, 0.5, threshold_seconds="0.3"))
    assert recorded_error_ratios(rule, stale, now) is None
    assert burn_rate(rule, stale, now)[0].holds is False
    partial = _records(rule, 0.5)
    partial.pop(slo_record_name(rule.slo, max(rule.window_lengths_seconds())))
    assert recorded_error_ratios(rule, WithRecords(reader, partial), now) is None
