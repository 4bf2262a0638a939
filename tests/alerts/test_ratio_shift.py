"""The generic ratio-shift rule kind: a ratio of two counters' increases against the median of
its baseline values, firing on a rise or a fall past both a factor and an absolute floor, over
a minimum denominator; parsed from ``alerts:``, exported, and checked when built."""

from __future__ import annotations

from dataclasses import replace

import pytest

from alerts import RuleError, evaluate_rule
from alerts.export.exprs import ratio_shift
from alerts.export.names import EngineNames
from alerts.export.promtool_cases import ratio_shift_case
from alerts.rules.config import load_alerts
from alerts.rules.types import RatioShiftRule
from collectors import canonical as c
from collectors.dialect_rules import Dialect
from tests.alerts.eval_data import START, Conditions, build

PERTURB = START + 3900.0  # after an hour: the baseline needs one
FINISHED = c.STRUCTURED_OUTPUT_FINISHED_TOTAL
LENGTH = {c.LABEL_FINISHED_REASON: "length"}
STOP = {c.LABEL_FINISHED_REASON: "stop"}


def _rule(**fields) -> RatioShiftRule:
    values = {
        "name": "share",
        "alert": "share",
        "numerator": FINISHED,
        "numerator_matchers": LENGTH,
        "denominator": FINISHED,
        "min_denominator": 20.0,
    }
    return RatioShiftRule(**{**values, **fields})


def _reader(**perturbed):
    def behaviour(t: float, replica: int) -> Conditions:
        return Conditions(**perturbed) if t > PERTURB else Conditions()

    return build(behaviour, hours=(PERTURB + 900 - START) / 3600)


def _at(rule: RatioShiftRule, reader, t: float):
    (instance,) = evaluate_rule(rule, reader, t)
    return instance


def test_a_rise_past_factor_and_floor_holds_and_the_value_is_the_ratio():
    reader = _reader(structured_length_share=0.3)
    before = _at(_rule(), reader, PERTURB)
    assert not before.holds and before.value == pytest.approx(0.0)  # round(20 * 0.02) == 0
    after = _at(_rule(), reader, PERTURB + 300)
    assert after.holds and after.value == pytest.approx(0.3)
    assert dict(after.labels) == {"model": "m"}


def test_a_rise_under_the_absolute_floor_stays_quiet_however_large_the_factor():
    # from 0 to 0.05 (1 in 20): infinitely many times the baseline, 0.05 above it
    reader = _reader(structured_length_share=0.05)
    assert _at(_rule(difference_min=0.05), reader, PERTURB + 300).holds
    assert not _at(_rule(difference_min=0.1), reader, PERTURB + 300).holds


def test_a_fall_holds_below_factor_times_the_baseline():
    reader = _reader(structured_length_share=0.5)  # the stop share falls from 1 to 0.5
    fall = _rule(numerator_matchers=STOP, direction="fall", factor=0.7, difference_min=0.1)
    assert not _at(fall, reader, PERTURB).holds
    assert _at(fall, reader, PERTURB + 300).holds
    assert not _at(replace(fall, factor=0.4), reader, PERTURB + 300).holds


def test_too_small_a_denominator_gives_no_instance():
    reader = _reader(structured_length_share=0.3)
    assert evaluate_rule(_rule(min_denominator=1e6), reader, PERTURB + 300) == []


def test_a_numerator_without_series_reads_as_zero():
    rule = _rule(numerator=c.PREEMPTIONS_TOTAL, numerator_matchers={"target": "nowhere"})
    instance = _at(rule, _reader(), PERTURB + 300)
    assert instance.value == 0.0 and not instance.holds


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"numerator": c.KV_CACHE_USAGE}, "numerator"),
        ({"denominator": "nope"}, "denominator"),
        ({"direction": "up"}, "direction"),
        ({"factor": 0.5}, "factor"),
        ({"direction": "fall", "factor": 1.5}, "factor"),
        ({"difference_min": -1}, "difference_min"),
        ({"numerator_matchers": {"bad label": "x"}}, "numerator_matchers"),
    ],
)
def test_bad_fields_are_refused_by_name(fields, key):
    with pytest.raises(RuleError) as error:
        _rule(**fields)
    assert error.value.field == key


def test_parsed_from_the_alerts_config():
    config = load_alerts(
        {
            "rules": {
                "accept-fall": {
                    "kind": "ratio-shift",
                    "numerator": c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL,
                    "denominator": c.SPEC_DECODE_DRAFT_TOKENS_TOTAL,
                    "direction": "fall",
                    "factor": 0.7,
                    "difference_min": 0.1,
                    "window_seconds": "10m",
                }
            }
        }
    )
    rule = config.rules.get("accept-fall")
    assert isinstance(rule, RatioShiftRule) and rule.window_seconds == 600.0
    assert rule.families() == (
        c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL,
        c.SPEC_DECODE_DRAFT_TOKENS_TOTAL,
    )
    body = {"kind": "ratio-shift", "numerator": FINISHED, "denominator": FINISHED}
    matched = load_alerts({"rules": {"x": {**body, "numerator_matchers": LENGTH}}}).rules.get("x")
    assert dict(matched.numerator_matchers) == LENGTH


def test_exported_share_reads_the_matched_series_and_a_missing_numerator_as_zero():
    rules = ratio_shift(_rule(), EngineNames(Dialect.TAILWATCH))
    record, alert = rules
    assert 'tailwatch:structured_output_finished_total{finished_reason="length"}' in record.expr
    assert " or 0 * sum by (model_name)" in record.expr
    assert record.record in alert.expr and ">= 2.0 *" in alert.expr and ">= 0.05" in alert.expr


@pytest.mark.parametrize("direction", ["rise", "fall"])
def test_promtool_case_steps_the_ratio_between_exact_ends(direction):
    factor = 2.0 if direction == "rise" else 0.5
    names = EngineNames(Dialect.TAILWATCH)
    # a share (same family) and a plain ratio (two families, a floor above 1)
    for rule in (
        _rule(direction=direction, factor=factor),
        _rule(
            numerator=c.GENERATION_TOKENS_TOTAL,
            numerator_matchers={},
            denominator=c.REQUESTS_TOTAL,
            direction=direction,
            factor=factor,
            difference_min=16.0,
        ),
    ):
        _, alert = ratio_shift(rule, names)
        case = ratio_shift_case(rule, names, alert)
        (first, last) = case.records
        ends = (first[2][0][1], last[2][0][1])
        top = 1.0 if rule.numerator == rule.denominator else 32.0
        assert ends == ((0.0, top) if direction == "rise" else (top, 0.0))
        assert case.expected and case.firing != case.clean


def test_promtool_runs_a_fall_and_a_plain_ratio_rise_and_fails_them_swapped(tmp_path):
    """The exported PromQL fires on the generated input and stays silent on the clean one,
    for a fall of the speculative acceptance rate and a rise of tokens per request (a ratio
    of two families, a floor above 1), and fails with the inputs swapped."""
    import subprocess

    from alerts import export_rules, promtool_test_files
    from alerts.rules.builtin import RuleSet
    from tests.alerts.test_rules_export import swapped_inputs
    from tests.services import promtool_binary

    rules = RuleSet(
        (
            _rule(
                name="accept-fall",
                alert="accept-fall",
                numerator=c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL,
                numerator_matchers={},
                denominator=c.SPEC_DECODE_DRAFT_TOKENS_TOTAL,
                direction="fall",
                factor=0.7,
                difference_min=0.1,
            ),
            _rule(
                name="longer-answers",
                alert="longer-answers",
                numerator=c.GENERATION_TOKENS_TOTAL,
                numerator_matchers={},
                denominator=c.REQUESTS_TOTAL,
                factor=1.5,
                difference_min=16.0,
            ),
        )
    )
    export = export_rules(rules, Dialect.VLLM)
    (tmp_path / "rules.yml").write_text(export.text(), encoding="utf-8")
    files, notes = promtool_test_files(export, rules, "rules.yml")
    assert notes == () and len(files) == 2
    promtool = promtool_binary()

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [promtool, *args], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )

    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    assert run("check", "rules", "rules.yml").returncode == 0
    result = run("test", "rules", *sorted(files))
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    for name, body in files.items():
        (tmp_path / name).write_text(swapped_inputs(body))
        assert run("test", "rules", name).returncode != 0, name
