"""Prometheus's own ``histograms.test`` scripts, evaluated with slo's functions.

The scripts are read where they are (``../shared/peers/prometheus`` from the repository root,
or ``$TAILWATCH_PROMETHEUS_PEER_DIR``), never copied. Range semantics per file:
``histograms-v2.42.0.test`` runs with Prometheus 2.x semantics (closed windows, 2.42
extrapolation order, no small-delta tolerance); ``histograms.test`` with 3.x semantics
(left-open windows, >= 2.51 order, 1e-12 tolerance).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
from slo_promql_eval import EvaluationError, Evaluator, classify, values_match
from slo_promql_parse import parse_expression
from slo_promtest_script import EvalCase, parse_script

import slo
from slo import RangeSemantics
from tests.services import missing_service

REPO_ROOT = Path(__file__).resolve().parents[2]
PEER_DIR = Path(
    os.environ.get("TAILWATCH_PROMETHEUS_PEER_DIR")
    or REPO_ROOT.parent / "shared" / "peers" / "prometheus"
)
# file → (range semantics, small-delta tolerance of the monotonicity fix)
FILES = {
    "histograms-v2.42.0.test": (RangeSemantics.PROMETHEUS_2, 0.0),
    "histograms.test": (RangeSemantics.PROMETHEUS_3, slo.SMALL_DELTA_TOLERANCE),
}
# What docs/slo.md reports; a change in coverage must show up here and there.
EXPECTED_COVERAGE = {
    "histograms-v2.42.0.test": {"evals": 38, "mapped": 38},
    "histograms.test": {"evals": 185, "mapped": 89},
}


def _missing_reason() -> str | None:
    missing = [name for name in FILES if not (PEER_DIR / name).is_file()]
    if missing:
        return f"Prometheus peer scripts not found: {', '.join(missing)} in {PEER_DIR}"
    return None


def _all_cases() -> dict[str, list[EvalCase]]:
    if _missing_reason():
        return {}
    return {name: parse_script(PEER_DIR / name) for name in FILES}


ALL_CASES = _all_cases()
# case id → None when mapped onto slo, else why not
REASONS = {case.case_id: classify(case) for cases in ALL_CASES.values() for case in cases}
MAPPED = [case for cases in ALL_CASES.values() for case in cases if REASONS[case.case_id] is None]


def test_peer_scripts_are_present() -> None:
    reason = _missing_reason()
    if reason:
        missing_service(reason)


def test_coverage_matches_the_documented_counts() -> None:
    if not ALL_CASES:
        missing_service(_missing_reason() or "no cases")
    for name, cases in ALL_CASES.items():
        mapped = [c for c in cases if REASONS[c.case_id] is None]
        assert {"evals": len(cases), "mapped": len(mapped)} == EXPECTED_COVERAGE[name]
    # Every classic histogram_quantile case of either file is mapped.
    for cases in ALL_CASES.values():
        for case in cases:
            if "histogram_quantile(" in case.expr and "_bucket" in case.expr:
                assert REASONS[case.case_id] is None, case.case_id


def test_not_mapped_reasons_are_the_documented_kinds() -> None:
    if not ALL_CASES:
        missing_service(_missing_reason() or "no cases")
    reasons = {reason for reason in REASONS.values() if reason is not None}
    allowed = ("native histograms", "native histogram value", "binary operator", "aggregation")
    for reason in reasons:
        assert any(a in reason for a in allowed) or reason == "function resets", reason


@pytest.mark.parametrize("case", MAPPED or [None], ids=lambda c: c.case_id if c else "absent")
def test_prometheus_case(case: EvalCase | None) -> None:
    if case is None:
        missing_service(_missing_reason() or "no mapped cases")
        return
    semantics, tolerance = FILES[case.file]
    evaluator = Evaluator(case.storage, case.at_seconds, semantics, tolerance)
    node = parse_expression(case.expr)
    if case.expect_fail:
        with pytest.raises(EvaluationError):
            evaluator.vector(node)
        return
    result = {tuple(sorted(labels.items())): value for labels, value in evaluator.vector(node)}
    expected = {labels: float(value) for labels, value in case.expected}
    assert result.keys() == expected.keys(), f"{case.case_id} {case.expr}"
    for labels, want in expected.items():
        got = result[labels]
        assert values_match(want, got), f"{case.case_id} {case.expr} {labels}: {got} != {want}"
    if "warn" in case.annotations:
        assert evaluator.has_warning, f"{case.case_id}: Prometheus warns here"
    if "no_warn" in case.annotations:
        assert not evaluator.has_warning, f"{case.case_id}: Prometheus does not warn here"
    if "info" in case.annotations:
        assert evaluator.has_info, f"{case.case_id}: Prometheus adds an info annotation"
    if "no_info" in case.annotations:
        assert not evaluator.has_info, f"{case.case_id}"


def test_the_3x_window_really_is_left_open() -> None:
    """The same 5m rate the 2.42 file asks for returns nothing under 3.x semantics."""
    samples = [slo.Sample(t * 300.0, t * 5.0) for t in range(11)]
    assert slo.extrapolated_rate(samples, 3000.0, 300.0, RangeSemantics.PROMETHEUS_3) is None
    closed = slo.extrapolated_rate(samples, 3000.0, 300.0, RangeSemantics.PROMETHEUS_2)
    assert closed is not None and math.isclose(closed, 5.0 / 300.0)
