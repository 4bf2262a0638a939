"""Noisy tenant: per-tenant figures from request records, their rows, and the score rule,
on inputs built by hand (an overload spread over the tenants, a tenant that takes the
fleet, one that grows within capacity, one that sends long prompts)."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import ACTIONS, Cause
from alerts.triage import Measure, Measurements, Source, WindowPair, triage
from alerts.triage.evidence import EvidenceKey
from alerts.triage.report import render_text
from alerts.triage.tenants import noisiest_tenant, tenant_pairs, tenant_rows
from collectors.request_records import RequestRecord
from tests.alerts import triage_cases as tc

R = Source.REQUEST_RECORDS


def record(tenant: str | None, *, tokens: int = 100, ttft: float = 0.05, queue: float = 0.002):
    return RequestRecord(
        request_id="r",
        trace_id="t",
        span_id="s",
        service=None,
        tenant=tenant,
        model=None,
        replica=None,
        arrival=tc.INCIDENT.start_seconds,
        queue_seconds=queue,
        ttft_seconds=ttft,
        prefill_seconds=ttft - queue,
        decode_seconds=0.5,
        tpot_seconds=0.01,
        e2e_seconds=0.5 + ttft,
        input_tokens=tokens,
        output_tokens=48,
        cached_tokens=0,
        preemptions=0,
        finish_reason="stop",
        is_error=False,
    )


def tenant(n: float, ttft: float, queue: float, tokens: float = 100.0) -> Measurements:
    return Measurements(
        num_requests=Measure(n, R),
        prompt_tokens_mean=Measure(tokens, R),
        ttft_mean_seconds=Measure(ttft, R),
        queue_mean_seconds=Measure(queue, R),
    )


QUIET = tenant(20, 0.05, 0.002)


def with_tenants(data, tenants: dict[str, WindowPair]):
    return replace(data, tenants=tenants)


def noisy() -> object:
    """The overload input, its surge carried by one tenant (``burst``: a tenth of the
    baseline's requests, nine tenths of the incident's) while the others queue."""
    return with_tenants(
        tc.overload(),
        {
            "acme": WindowPair(tenant(20, 2.0, 1.7), QUIET),
            "globex": WindowPair(tenant(20, 2.0, 1.7), QUIET),
            "burst": WindowPair(tenant(360, 2.0, 1.7), tenant(4, 0.05, 0.002)),
        },
    )


def spread() -> object:
    """The same overload with every tenant's share as in the baseline."""
    return with_tenants(
        tc.overload(),
        {
            "acme": WindowPair(tenant(200, 2.0, 1.7), QUIET),
            "globex": WindowPair(tenant(200, 2.0, 1.7), QUIET),
        },
    )


def score(report, cause: Cause) -> float:
    return next(h.score for h in report.hypotheses if h.cause is cause)


def test_records_are_grouped_by_tenant_and_a_missing_tenant_sent_nothing() -> None:
    inc = [record("a", ttft=1.0)] * 6 + [record(None, tokens=300)] * 2
    base = [record("a")] * 6
    pairs = tenant_pairs(inc, base)
    assert sorted(pairs) == ["", "a"]
    assert pairs[""].baseline.num_requests.value == 0
    assert math.isnan(pairs[""].baseline.prompt_tokens_mean.value)
    assert pairs[""].incident.prompt_tokens_mean.value == 300
    assert pairs["a"].incident.ttft_mean_seconds.value == 1.0
    assert noisiest_tenant(pairs) == ""  # 600 of 1200 prompt tokens, from none


def test_one_tenant_is_no_breakdown() -> None:
    assert tenant_pairs([record("a")] * 6, [record("a")] * 6) == {}
    report = triage(tc.overload())
    h = next(h for h in report.hypotheses if h.cause is Cause.NOISY_TENANT)
    assert h.score == 0 and not h.has_enough_data and "tenant breakdown" in h.note


def test_rows_name_the_tenant_whose_share_rose_and_compare_the_others() -> None:
    rows = {r.key: r for r in tenant_rows(noisy())}
    tokens = rows[EvidenceKey.TENANT_PROMPT_SHARE]
    assert tokens.scope == "tenant 'burst'"
    assert "'burst'" in rows[EvidenceKey.OTHER_TENANTS_TTFT].what
    assert tokens.baseline == pytest.approx(4 / 44) and tokens.incident == pytest.approx(0.9)
    assert rows[EvidenceKey.TENANT_QUEUE_SHARE].incident == pytest.approx(0.9)
    others = rows[EvidenceKey.OTHER_TENANTS_TTFT]
    assert others.baseline == pytest.approx(0.05) and others.change == pytest.approx(40.0)


def test_a_tenant_that_takes_the_fleet_is_noisy_not_overload() -> None:
    report = triage(noisy())
    assert report.verdict == Cause.NOISY_TENANT
    assert score(report, Cause.NOISY_TENANT) == 1.0
    assert score(report, Cause.OVERLOAD) == 0.0
    assert report.recommendation.action == ACTIONS[Cause.NOISY_TENANT][0]
    assert report.recommendation.action.knob == "max_concurrency_per_tenant"
    assert report.recommendation.target == "tenant 'burst'"
    text = render_text(report, width=200)
    assert "Recommendation (noisy-tenant): cap the noisy tenant" in text
    assert "on tenant 'burst'" in text
    assert "or: move the tenant to a pool of its own [no engine knob]" in text


def test_an_overload_spread_over_the_tenants_stays_overload() -> None:
    report = triage(spread())
    assert report.verdict == Cause.OVERLOAD
    assert score(report, Cause.OVERLOAD) == 1.0
    assert score(report, Cause.NOISY_TENANT) == 0.0


def test_a_tenant_growing_within_capacity_is_no_incident() -> None:
    grown = {
        "acme": WindowPair(tenant(20, 0.05, 0.002), QUIET),
        "newco": WindowPair(tenant(60, 0.05, 0.002), tenant(4, 0.05, 0.002)),
    }
    report = triage(with_tenants(tc.clean(), grown))
    assert score(report, Cause.NOISY_TENANT) == 0.0
    assert report.top is None


def test_others_ttft_ramp_is_partial_between_its_ends() -> None:
    tenants = dict(noisy().tenants)
    for name in ("acme", "globex"):
        tenants[name] = WindowPair(tenant(20, 0.1125, 0.05), QUIET)  # 2.25x: halfway
    report = triage(with_tenants(tc.clean(), tenants))  # the fleet does not queue
    assert score(report, Cause.NOISY_TENANT) == pytest.approx(0.5)


def test_at_page_time_the_others_wait_in_the_queue_with_no_record_yet() -> None:
    tenants = dict(noisy().tenants)
    for name in ("acme", "globex"):
        tenants[name] = WindowPair(Measurements(num_requests=Measure(0.0, R)), QUIET)
    report = triage(with_tenants(tc.overload(), tenants))
    rows = {r.key: r for r in report.evidence}
    assert not rows[EvidenceKey.OTHER_TENANTS_TTFT].is_known
    assert report.verdict == Cause.NOISY_TENANT  # the fleet's queue share: 0.86
    assert score(report, Cause.NOISY_TENANT) == 1.0


def test_long_prompts_from_one_tenant_score_at_most_half() -> None:
    data = tc.long_prompt_surge()
    tenants = {
        "acme": WindowPair(tenant(20, 0.12, 0.01), QUIET),
        "batch-1": WindowPair(
            tenant(4, 0.3, 0.01, tokens=4000), Measurements(num_requests=Measure(0.0, R))
        ),
    }
    report = triage(with_tenants(data, tenants))
    assert score(report, Cause.NOISY_TENANT) <= 0.5
    assert report.verdict == Cause.PREFILL_INTERFERENCE


_values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.floats(0, 1e6), st.just(0.0))
_tenant = st.builds(
    Measurements,
    num_requests=st.builds(Measure, _values, st.just(R)),
    prompt_tokens_mean=st.builds(Measure, _values, st.just(R)),
    ttft_mean_seconds=st.builds(Measure, _values, st.just(R)),
    queue_mean_seconds=st.builds(Measure, _values, st.just(R)),
)
_tenants = st.dictionaries(
    st.sampled_from(["", "a", "b", "c"]), st.builds(WindowPair, _tenant, _tenant), max_size=4
)


@settings(max_examples=80, deadline=None)
@given(_tenants)
def test_any_tenant_figures_score_in_the_unit_interval_and_never_raise(tenants) -> None:
    for base in (tc.overload(), tc.clean()):
        report = triage(with_tenants(base, tenants))
        assert all(0.0 <= h.score <= 1.0 for h in report.hypotheses)
        assert len(tenant_rows(with_tenants(base, tenants))) in (0, 3)
