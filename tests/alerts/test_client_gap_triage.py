"""Triage's client-vs-server gap on hand-built inputs: its rows are the clients' TTFT p95,
its gap over the engines' and the gap's share; it names a gap that grew while the engines
did not move, says "not enough data" without client timings, and never takes an engine
incident or a constant overhead."""

from __future__ import annotations

import math

import pytest

from alerts import Cause
from alerts.triage import evidence_table, rows_by_key, triage
from alerts.triage.evidence import EvidenceKey
from tests.alerts import triage_cases as tc

K = EvidenceKey


def _hypothesis(data, cause: Cause = Cause.CLIENT_GAP):
    return next(h for h in triage(data).hypotheses if h.cause is cause)


def test_the_gap_rows_are_client_minus_engine_and_its_share():
    rows = rows_by_key(evidence_table(tc.client_gap()))
    assert rows[K.CLIENT_TTFT_P95].change == pytest.approx(0.4875 / 0.0377)
    assert rows[K.CLIENT_GAP].incident == pytest.approx(0.4875 - 0.0187)
    assert rows[K.CLIENT_GAP].change == pytest.approx((0.4875 - 0.0187) - (0.0377 - 0.0188))
    share = rows[K.CLIENT_GAP_SHARE]
    assert share.incident == pytest.approx((0.4875 - 0.0187) / 0.4875)
    assert share.baseline == pytest.approx((0.0377 - 0.0188) / 0.0377)


def test_a_grown_gap_with_flat_engines_is_named_first():
    report = triage(tc.client_gap())
    assert report.verdict == Cause.CLIENT_GAP.value
    assert _hypothesis(tc.client_gap()).score == pytest.approx(1.0)


def test_the_score_is_the_product_of_its_ramps():
    # client p95 1.6x (halfway up 1.2..2.0); gap share from 0 to 0.25 (halfway up 0.1..0.4);
    # engines flat: 0.5 x 0.5 x 1
    base = tc.measurements(ttft_p95_seconds=0.1, client_ttft_p95_seconds=0.1)
    inc = tc.measurements(ttft_p95_seconds=0.12, client_ttft_p95_seconds=0.16)
    rows = rows_by_key(evidence_table(tc.single(inc, base)))
    assert rows[K.CLIENT_GAP_SHARE].change == pytest.approx(0.25)
    h = _hypothesis(tc.single(inc, base))
    assert h.score == pytest.approx(0.5 * 0.5 * 1.0)


def test_engines_that_slowed_with_the_clients_are_not_a_gap():
    # the engines' tail doubled and the clients' with it: an engine incident
    base = tc.measurements(ttft_p95_seconds=0.1, client_ttft_p95_seconds=0.12)
    inc = tc.measurements(ttft_p95_seconds=0.4, client_ttft_p95_seconds=0.42)
    assert _hypothesis(tc.single(inc, base)).score == 0.0


def test_a_constant_overhead_is_not_a_gap():
    base = tc.measurements(ttft_p95_seconds=0.1, client_ttft_p95_seconds=0.3)
    inc = tc.measurements(ttft_p95_seconds=0.1, client_ttft_p95_seconds=0.3)
    assert _hypothesis(tc.single(inc, base)).score == 0.0


def test_without_client_timings_it_says_not_enough_data_and_outranks_nothing():
    h = _hypothesis(tc.overload())
    assert (h.score, h.has_enough_data) == (0.0, False)
    assert "client TTFT p95" in h.note
    rows = rows_by_key(evidence_table(tc.overload()))
    assert math.isnan(rows[K.CLIENT_GAP].incident)
    assert triage(tc.overload()).verdict == Cause.OVERLOAD.value


@pytest.mark.parametrize("scenario", sorted(set(tc.SCENARIOS) - {"client-gap"}))
def test_no_other_cause_s_incident_is_taken(scenario):
    make, _ = tc.SCENARIOS[scenario]
    assert _hypothesis(make()).score == 0.0
