"""Every built-in rule kind over synthetic scrapes in compressed time (a FakeMetricsReader,
evaluations every 15 simulated seconds, no sleeping): the perturbation makes the rule fire
within the evaluations its window and ``for:`` allow, recovery resolves it, and a clean
dataset of the same length fires nothing (not even pending); replica imbalance's bounds are
strict, as the docs and the exported PromQL say."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from alerts import AlertState, EvaluationResult, Evaluator, MemoryAlertState, evaluate_rule
from alerts.rules import BUILTIN_RULES, Rule, builtin_rule_set, metric_absent_rule
from collectors import canonical as c
from collectors.canonical import CanonicalSample, Kind
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader
from slo import LatencyIndicator, LatencyMetric, Selector, SLOSpec
from tests.alerts.eval_data import INTERVAL, START, Conditions, build

PERTURB = START + 3900.0  # after an hour: the prefix rule's baseline needs one
RECOVER = PERTURB + 1200.0
HOURS = (RECOVER + 1500.0 - START) / 3600
BY_NAME = {r.name: r for r in BUILTIN_RULES}
SLO = SLOSpec(
    "chat-ttft", Selector(), LatencyIndicator(LatencyMetric.TTFT, 0.5), target=0.99, period_days=30
)
_BURN = [r for r in builtin_rule_set([SLO])[0] if r.kind == "slo-burn-rate"]
#: Burn-rate rules compressed: the page ten times (5 m → 30 s, 1 h → 6 m), the ticket fifty
#: times (2 h → 144 s, 6 h → 432 s, 3 d → 86 min).
BURN_RULES = (_BURN[0].scaled(0.1), _BURN[1].scaled(0.02))


def evaluate(rules: list[Rule], reader, start: float, end: float) -> list[EvaluationResult]:
    evaluator = Evaluator(rules, reader, MemoryAlertState())
    times = [start + k * INTERVAL for k in range(int((end - start) / INTERVAL) + 1)]
    return [evaluator.evaluate_once(t) for t in times]


def firing_times(results: list[EvaluationResult], **labels: str) -> list[float]:
    return [
        r.at_seconds
        for r in results
        if any(all(a.labels.get(k) == v for k, v in labels.items()) for a in r.firing)
    ]


def _mix(fast: float, slow: float, share: float) -> tuple[tuple[float, float], ...]:
    return ((fast, 1 - share), (slow, share))


def perturbed(**fields):
    """Healthy, except ``fields`` on the replicas in ``only`` (all by default) from PERTURB to
    RECOVER."""
    only = fields.pop("only", None)

    def behaviour(t: float, replica: int) -> Conditions:
        if PERTURB < t <= RECOVER and (only is None or replica in only):
            return Conditions(**fields)
        return Conditions(gpu_throttle="sw_power_cap" if replica == 0 else "")

    return behaviour


#: rule, behaviour, labels the firing alert must carry, and the reader's options.
CASES = {
    "tail-latency-ttft": (
        BY_NAME["tail-latency-ttft"],
        perturbed(ttft=_mix(0.08, 4.0, 0.03)),
        {"metric": "ttft"},
        {},
    ),
    "tail-latency-itl": (
        BY_NAME["tail-latency-itl"],
        perturbed(itl=_mix(0.02, 0.4, 0.03)),
        {"metric": "itl"},
        {},
    ),
    "queue-growth": (
        BY_NAME["queue-growth"],
        perturbed(waiting=10.0, queue_share=0.8),
        {"model": "m"},
        {},
    ),
    "kv-saturation": (
        BY_NAME["kv-saturation"],
        perturbed(kv_usage=0.95, preemptions=3, only={1}),
        {"target": "r1"},
        {},
    ),
    "prefix-hit-drop": (
        BY_NAME["prefix-hit-drop"],
        perturbed(prefix_hit_share=0.2),
        {"model": "m"},
        {},
    ),
    "replica-imbalance": (
        BY_NAME["replica-imbalance"],
        perturbed(e2e=((3.0, 1.0),), only={2}),
        {"target": "r2", "signal": "e2e_mean"},
        {},
    ),
    "replica-imbalance-waiting": (
        BY_NAME["replica-imbalance-waiting"],
        perturbed(waiting=20.0, only={2}),
        {"target": "r2", "signal": "waiting"},
        {},
    ),
    "error-rate": (BY_NAME["error-rate"], perturbed(error_share=0.2), {"model": "m"}, {}),
    "truncation-rise": (
        BY_NAME["truncation-rise"],
        perturbed(structured_length_share=0.3),
        {"model": "m"},
        {},
    ),
    "spec-acceptance-drop": (
        BY_NAME["spec-acceptance-drop"],
        perturbed(spec_acceptance=0.2),
        {"model": "m"},
        {},
    ),
    "target-down": (BY_NAME["target-down"], perturbed(up=False, only={1}), {"target": "r1"}, {}),
    "gpu-health-throttle": (
        BY_NAME["gpu-health"],
        perturbed(gpu_throttle="hw_thermal_slowdown", only={0}),
        {"target": "r0", "gpu": "0"},
        {"gpu": True},
    ),
    "gpu-health-ecc": (
        BY_NAME["gpu-health"],
        perturbed(gpu_ecc_uncorrected=1, only={1}),
        {"target": "r1", "gpu": "0"},
        {"gpu": True},
    ),
    "slo-burn-rate-page": (
        BURN_RULES[0],
        perturbed(ttft=((0.8, 1.0),)),
        {"slo": "chat-ttft", "severity": "page"},
        {},
    ),
    "slo-burn-rate-ticket": (
        BURN_RULES[1],
        perturbed(ttft=((0.8, 1.0),)),
        {"slo": "chat-ttft", "severity": "ticket"},
        {},
    ),
}


def _window(rule: Rule) -> float:
    windows = [getattr(rule, f) for f in ("window_seconds",) if hasattr(rule, f)]
    if hasattr(rule, "windows"):
        windows = [w.short_window_seconds for w in rule.windows]
    return max(windows, default=0.0)


@pytest.mark.parametrize("case", sorted(CASES))
def test_rule_fires_after_perturbation_and_resolves_after_recovery(case: str) -> None:
    rule, behaviour, labels, options = CASES[case]
    reader = build(behaviour, hours=HOURS, **options)
    end = RECOVER + 1500
    results = evaluate([rule], reader, PERTURB - 600, end)
    fired = firing_times(results, alertname=rule.alert, **labels)
    assert fired, f"{case}: never fired"
    assert min(fired) > PERTURB, f"{case}: fired before the perturbation"
    # The condition holds once enough of the window sees the perturbation (at most all of
    # it), then for: must elapse; one more evaluation for the step edge.
    bound = math.ceil((_window(rule) + rule.for_seconds) / INTERVAL) + 1
    assert (min(fired) - PERTURB) / INTERVAL <= bound, (case, (min(fired) - PERTURB) / INTERVAL)
    # A burn-rate ticket resolves when its shortest firing row's short window clears; the
    # others once their window no longer sees the perturbation (plus keep_firing_for: 0).
    last = max(fired)
    assert last < end - INTERVAL, f"{case}: still firing at the end"
    assert (last - RECOVER) / INTERVAL <= math.ceil(_window(rule) / INTERVAL) + 1
    resolved = [r.at_seconds for r in results for a in r.resolved if a.name == rule.alert]
    assert resolved == [last + INTERVAL]
    # Other instances of the rule stay silent (the perturbed replica only).
    for r in results:
        for a in r.alerts:
            assert all(a.labels.get(k) == v for k, v in labels.items()), (case, a.labels)


def test_rules_read_at_once_give_what_rules_read_in_turn() -> None:
    """Reading every rule at once (as over a metrics server) moves the alerts exactly as
    reading them in turn does: every alert, transition and error, at every evaluation."""
    rules, _ = builtin_rule_set([SLO])
    rules = [*BURN_RULES, *(r for r in rules if r.kind != "slo-burn-rate")]
    reader = build(CASES["tail-latency-ttft"][1], hours=HOURS)
    times = [PERTURB - 300 + k * 4 * INTERVAL for k in range(12)]
    runs = []
    for concurrency in (1, 4):
        evaluator = Evaluator(rules, reader, MemoryAlertState(), read_concurrency=concurrency)
        assert evaluator.read_concurrency == concurrency
        runs.append([evaluator.evaluate_once(t) for t in times])
    assert [(r.alerts, r.transitions, r.errors) for r in runs[0]] == [
        (r.alerts, r.transitions, r.errors) for r in runs[1]
    ]
    assert any(r.firing for r in runs[1]), "the case fires: the comparison is not vacuous"


def test_clean_dataset_fires_nothing() -> None:
    rules, _ = builtin_rule_set([SLO])
    rules = [*BURN_RULES, *(r for r in rules if r.kind != "slo-burn-rate")]
    reader = build(perturbed(), hours=HOURS, gpu=True)
    results = evaluate(rules, reader, START + 3600, RECOVER + 1500)
    assert all(not r.alerts and not r.errors for r in results), [
        (r.at_seconds, [a.labels for a in r.alerts], r.errors)
        for r in results
        if r.alerts or r.errors
    ][:3]


def test_metric_absent_fires_for_the_missing_family_only() -> None:
    rule = replace(metric_absent_rule(BUILTIN_RULES), for_seconds=60.0)
    reader = build(perturbed(), hours=0.25, omit=frozenset({c.QUEUE_SECONDS}))
    results = evaluate([rule], reader, START, START + 900)
    assert [a.labels["family"] for a in results[-1].firing] == [c.QUEUE_SECONDS]
    assert firing_times(results)[0] == START + 60.0  # for: 1m from the first evaluation
    clean = evaluate([rule], build(perturbed(), hours=0.25), START, START + 900)
    assert not any(r.alerts for r in clean)


def test_no_data_gives_no_alert_and_no_error() -> None:
    rules, _ = builtin_rule_set([SLO])
    results = evaluate(list(rules)[:-1], build(perturbed(), hours=0.0), START + 3600, START + 3660)
    assert all(not r.alerts and not r.errors for r in results)
    assert all(a.state is not AlertState.FIRING for r in results for a in r.alerts)


def test_burn_rate_from_one_step_read_equals_a_read_per_window() -> None:
    from alerts.rules import common_step
    from alerts.rules.evaluate import _stepped_error_ratios, _window_error_ratio
    from slo import ErrorRatioIndicator, ErrorSource

    errors = SLOSpec("errors", Selector(), ErrorRatioIndicator(ErrorSource.REQUESTS), 0.999, 30)
    rules = [r.scaled(0.1) for r in builtin_rule_set([SLO, errors])[0] if r.kind == "slo-burn-rate"]
    reader = build(perturbed(ttft=_mix(0.08, 0.8, 0.3), error_share=0.1), hours=HOURS)
    assert common_step((30.0, 180.0)) == 30.0 and common_step((30.5, 60.0)) is None
    for rule in rules:
        step = common_step(rule.window_lengths_seconds())
        assert step is not None
        for now in (PERTURB - 7, PERTURB + 100, RECOVER + 15, RECOVER + 1000):
            stepped = _stepped_error_ratios(rule, reader, {}, now, step)
            direct = {
                n: _window_error_ratio(rule, reader, {}, now - n, now)
                for n in rule.window_lengths_seconds()
            }
            assert stepped.keys() == direct.keys()
            for n in direct:
                assert stepped[n] == pytest.approx(direct[n], rel=1e-12, nan_ok=True), (rule.name, now, n)  # fmt: skip


@pytest.mark.parametrize(
    ("ratio_min", "excess_min", "slow", "holds"),
    [
        (3.0, 1.0, 6.0, False),  # exactly 3 × the median of 2: not more than it
        (3.0, 1.0, 6.5, True),
        (1.5, 4.0, 6.0, False),  # exactly 4 above the median: not more than it
        (1.5, 4.0, 6.5, True),
    ],
)
def test_replica_imbalance_holds_only_strictly_past_both_bounds(
    ratio_min, excess_min, slow, holds
) -> None:
    def scrape(target: str, waiting: float) -> ScrapeRecord:
        labels = ((c.LABEL_MODEL, "m"), (c.LABEL_TARGET, target))
        return ScrapeRecord(target, START, (CanonicalSample(c.REQUESTS_WAITING, labels, waiting, Kind.GAUGE),))  # fmt: skip

    reader = FakeMetricsReader([scrape("r0", 2.0), scrape("r1", 2.0), scrape("r2", slow)])
    rule = replace(BY_NAME["replica-imbalance-waiting"], ratio_min=ratio_min, excess_min=excess_min)
    by_target = {i.labels[c.LABEL_TARGET]: i.holds for i in evaluate_rule(rule, reader, START + 1)}
    assert by_target == {"r0": False, "r1": False, "r2": holds}
