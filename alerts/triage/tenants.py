"""Who sends the work and who waits: per-tenant figures and their evidence rows.

A noisy tenant (a batch job, a runaway client) starves the others: its share of the prompt
tokens and of the queue time jumps while the other tenants' TTFT rises. The rows name the
tenant whose prompt-token share rose most and compare its shares, and the others' TTFT,
with the baseline's.

The figures come from the request records, which name each request's tenant and carry its
prompt length and phase times (the change detector's tenant mix counts the same records).
NOTE: the bundled engine's per-tenant counters are exact, but a ``MetricsReader`` selects a
breakdown series only by naming its tenant and has no read that lists the tenants; and no
other engine exports them. Records may be sampled by tracing: shares of a sample estimate
the shares; the others' TTFT needs :data:`MIN_RECORDS` of their records.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping, Sequence

from alerts.triage.data import NAN, Measure, Measurements, Source, TriageInput, WindowPair
from alerts.triage.evidence_rows import (
    FLEET,
    ChangeKind,
    EvidenceKey,
    EvidenceRow,
    exact_sum,
    make_row,
)
from alerts.triage.measure_scope import MIN_RECORDS
from collectors.request_records import RequestRecord

#: The tenant value of requests that name none (the engine's ``tenant=""`` series).
NO_TENANT = ""
_RECORDS = Source.REQUEST_RECORDS


def _mean(records: Sequence[RequestRecord], read: Callable[[RequestRecord], float | None]):
    values = [read(r) for r in records]
    known = [float(v) for v in values if v is not None and math.isfinite(v)]
    if not known:
        return Measure()
    return Measure(statistics.fmean(known), _RECORDS)


def _measure(records: Sequence[RequestRecord]) -> Measurements:
    return Measurements(
        num_requests=Measure(float(len(records)), _RECORDS),
        prompt_tokens_mean=_mean(records, lambda r: r.input_tokens),
        ttft_mean_seconds=_mean(records, lambda r: r.ttft_seconds),
        queue_mean_seconds=_mean(records, lambda r: r.queue_seconds),
    )


def _by_tenant(records: Sequence[RequestRecord]) -> dict[str, list[RequestRecord]]:
    out: dict[str, list[RequestRecord]] = {}
    for r in records:
        out.setdefault(r.tenant or NO_TENANT, []).append(r)
    return out


def tenant_pairs(
    incident: Sequence[RequestRecord], baseline: Sequence[RequestRecord]
) -> dict[str, WindowPair]:
    """Each tenant's :class:`Measurements` over both windows, from their request records;
    a tenant that sent nothing in a window has 0 requests there (unknown when the window
    has no records at all). Empty when the records name fewer than two tenants: one
    tenant cannot starve another."""
    inc, base = _by_tenant(incident), _by_tenant(baseline)
    names = sorted(set(inc) | set(base))
    if len(names) < 2:
        return {}

    def side(groups: dict[str, list[RequestRecord]], name: str) -> Measurements:
        if not groups:
            return Measurements()
        return _measure(groups.get(name, []))

    return {t: WindowPair(side(inc, t), side(base, t)) for t in names}


def _total(m: Measurements, mean: Callable[[Measurements], Measure]) -> float:
    """``num_requests`` x a mean: 0 for a tenant that sent nothing, NaN when unknown."""
    n = m.num_requests.value
    if not math.isfinite(n):
        return NAN
    if n == 0:
        return 0.0
    value = mean(m).value
    return n * value if math.isfinite(value) else NAN


def _shares(
    tenants: Mapping[str, WindowPair], side: str, mean: Callable[[Measurements], Measure]
) -> dict[str, float]:
    """Each tenant's share of the total of ``num_requests x mean`` on one side; NaN for
    every tenant when any is unknown or the total is 0."""
    totals = {t: _total(getattr(p, side), mean) for t, p in tenants.items()}
    whole = exact_sum(totals.values()) if all(map(math.isfinite, totals.values())) else NAN
    if not (math.isfinite(whole) and whole > 0):
        return dict.fromkeys(totals, NAN)
    return {t: v / whole for t, v in totals.items()}


def _prompt(m: Measurements) -> Measure:
    return m.prompt_tokens_mean


def _queue(m: Measurements) -> Measure:
    return m.queue_mean_seconds


def noisiest_tenant(tenants: Mapping[str, WindowPair]) -> str | None:
    """The tenant whose share of the prompt tokens rose most from the baseline (ties: the
    larger share in the incident, then the name); ``None`` when no share is known."""
    inc, base = _shares(tenants, "incident", _prompt), _shares(tenants, "baseline", _prompt)
    known = [
        (-(inc[t] - base[t]), -inc[t], t)
        for t in tenants
        if math.isfinite(inc[t]) and math.isfinite(base[t])
    ]
    return min(known)[2] if known else None


def _others_ttft(tenants: Mapping[str, WindowPair], noisy: str, side: str) -> Measure:
    """The TTFT mean over every other tenant's requests (weighted by their counts)."""
    others = [getattr(p, side) for t, p in tenants.items() if t != noisy]
    pairs = [
        (m.num_requests.value, m.ttft_mean_seconds.value)
        for m in others
        if m.num_requests.is_known and m.num_requests.value > 0
    ]
    count = exact_sum(n for n, _ in pairs)
    if count < MIN_RECORDS or not all(math.isfinite(v) for _, v in pairs):
        return Measure()
    return Measure(exact_sum(n * v for n, v in pairs) / count, _RECORDS)


def _label(tenant: str) -> str:
    return repr(tenant) if tenant != NO_TENANT else "(no tenant)"


def tenant_scope(tenant: str) -> str:
    """The scope of the rows about one tenant, and of the noisy-tenant hypothesis: what a
    recommendation names ("... on tenant 'bulk'"), as a replica's does for a replica."""
    return f"tenant {_label(tenant)}"


def tenant_rows(data: TriageInput) -> list[EvidenceRow]:
    """The noisiest tenant's share of the prompt tokens and of the queue time, and the
    other tenants' TTFT mean; none without a tenant breakdown."""
    tenants = data.tenants
    noisy = noisiest_tenant(tenants)
    if noisy is None:
        return []
    name, scope, D = _label(noisy), tenant_scope(noisy), ChangeKind.DIFFERENCE

    def share(mean: Callable[[Measurements], Measure], side: str) -> Measure:
        value = _shares(tenants, side, mean)[noisy]
        return Measure(value, _RECORDS) if math.isfinite(value) else Measure()

    note = f"{len(tenants)} tenants in the request records"
    return [
        make_row(
            EvidenceKey.TENANT_PROMPT_SHARE,
            "prompt-token share, one tenant",
            share(_prompt, "incident"),
            share(_prompt, "baseline"),
            D,
            scope,
            note,
        ),
        make_row(
            EvidenceKey.TENANT_QUEUE_SHARE,
            "queue-time share, one tenant",
            share(_queue, "incident"),
            share(_queue, "baseline"),
            D,
            scope,
            note,
        ),
        make_row(
            EvidenceKey.OTHER_TENANTS_TTFT,
            f"TTFT mean, tenants other than {name}",
            _others_ttft(tenants, noisy, "incident"),
            _others_ttft(tenants, noisy, "baseline"),
            ChangeKind.RATIO,
            FLEET,
            note,
        ),
    ]
