"""The evidence table: one row per measured signal, incident against baseline, with its source.

Rows are fleet-wide (``scope="fleet"``) or name the replica they single out (the skew rows,
the least-queued replica). Fractions (queue share, hit rate, KV usage, 429 share, preemptions
per request) change by *difference*; times, lengths and rates by *ratio*. A row whose value
is unknown stays in the table with NaN (rendered "not enough data"); when no row at all has
an incident value, the table is one ``NOT_ENOUGH_DATA`` row. Replica order and names never
change a score: every fleet figure is an exactly rounded sum, a max, a min or a median, ties
go first to the replica whose baseline makes the larger change, and only replicas whose rows
are the same are left to the lowest target name.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from alerts.triage.change_groups import group_changes, short_targets
from alerts.triage.cold_evidence import cold_rows
from alerts.triage.data import NAN, Source, TriageInput
from alerts.triage.evidence_rows import (
    FLEET,
    ChangeKind,
    EvidenceKey,
    EvidenceRow,
    hit_rate,
    make_row,
    preemptions_per_request,
    queue_share,
    structured_length_share,
)
from alerts.triage.gap_evidence import gap_rows
from alerts.triage.gpu_evidence import gpu_rows
from alerts.triage.lora_evidence import lora_rows
from alerts.triage.replica_evidence import least_queued_row, minus, over, prefix_rows, skew_row
from alerts.triage.tenants import tenant_rows

__all__ = ["FLEET", "ChangeKind", "EvidenceKey", "EvidenceRow", "evidence_table", "rows_by_key"]


def _kv_row(data: TriageInput) -> EvidenceRow:
    """The fullest replica's KV usage against its own baseline (the fleet's without
    per-replica data): a squeeze on one replica is a fact about that replica."""
    known = [(-p.incident.kv_usage_max.value, t) for t, p in data.replicas.items()]
    known = sorted(k for k in known if math.isfinite(k[0]))
    what, kind = "KV cache usage, max", ChangeKind.DIFFERENCE
    if not known:
        fleet = data.fleet
        return make_row(
            EvidenceKey.KV_USAGE_MAX,
            what,
            fleet.incident.kv_usage_max,
            fleet.baseline.kv_usage_max,
            kind,
        )
    target = known[0][1]
    pair = data.replicas[target]
    return make_row(
        EvidenceKey.KV_USAGE_MAX,
        what,
        pair.incident.kv_usage_max,
        pair.baseline.kv_usage_max,
        kind,
        scope=target,
    )


def _preemptions_row(data: TriageInput) -> EvidenceRow:
    """Preemptions per request on the replica that preempts most, against its own baseline
    (the fleet's without per-replica data): a pool squeezed on some replicas preempts
    there, and the fleet's rate, diluted by the healthy ones, hid it behind the skew those
    replicas' slowness makes."""
    what, kind = "preemptions per request", ChangeKind.DIFFERENCE
    known = []
    for target, pair in data.replicas.items():
        rate = preemptions_per_request(pair.incident)
        if rate.is_known:
            before = preemptions_per_request(pair.baseline)
            rise = rate.value - before.value if before.is_known else -math.inf
            # NOTE: ties on the rate go to the larger rise, and only replicas whose rows are
            # the same are left to the name: renaming replicas never changes a score
            known.append((-rate.value, -rise, target))
    if not known:
        fleet = data.fleet
        return make_row(
            EvidenceKey.PREEMPTIONS_PER_REQUEST,
            what,
            preemptions_per_request(fleet.incident),
            preemptions_per_request(fleet.baseline),
            kind,
        )
    target = sorted(known)[0][2]
    pair = data.replicas[target]
    return make_row(
        EvidenceKey.PREEMPTIONS_PER_REQUEST,
        what,
        preemptions_per_request(pair.incident),
        preemptions_per_request(pair.baseline),
        kind,
        scope=target,
    )


def _fleet_rows(data: TriageInput) -> list[EvidenceRow]:
    inc, base = data.fleet.incident, data.fleet.baseline
    R, D = ChangeKind.RATIO, ChangeKind.DIFFERENCE
    return [
        make_row(
            EvidenceKey.TTFT_MEAN, "TTFT mean", inc.ttft_mean_seconds, base.ttft_mean_seconds, R
        ),
        make_row(
            EvidenceKey.QUEUE_MEAN,
            "  queue mean",
            inc.queue_mean_seconds,
            base.queue_mean_seconds,
            R,
        ),
        make_row(
            EvidenceKey.PREFILL_MEAN,
            "  prefill mean",
            inc.prefill_mean_seconds,
            base.prefill_mean_seconds,
            R,
        ),
        make_row(
            EvidenceKey.QUEUE_SHARE, "queue share of TTFT", queue_share(inc), queue_share(base), D
        ),
        make_row(EvidenceKey.TTFT_P95, "TTFT p95", inc.ttft_p95_seconds, base.ttft_p95_seconds, R),
        make_row(EvidenceKey.ITL_P99, "ITL p99", inc.itl_p99_seconds, base.itl_p99_seconds, R),
        make_row(
            EvidenceKey.PROMPT_P95,
            "prompt length p95 (tokens)",
            inc.prompt_tokens_p95,
            base.prompt_tokens_p95,
            R,
        ),
        # NOTE: a minority of very long prompts moves the mean before it moves the p95
        make_row(
            EvidenceKey.PROMPT_MEAN,
            "prompt length mean (tokens)",
            inc.prompt_tokens_mean,
            base.prompt_tokens_mean,
            R,
        ),
        make_row(
            EvidenceKey.OUTPUT_MEAN,
            "output length mean (tokens)",
            inc.output_tokens_mean,
            base.output_tokens_mean,
            R,
        ),
        make_row(
            EvidenceKey.ARRIVAL_RATE,
            "arrivals",
            inc.arrival_rate_per_second,
            base.arrival_rate_per_second,
            R,
        ),
        _preemptions_row(data),
        _kv_row(data),
        make_row(EvidenceKey.PREFIX_HIT_RATE, "prefix hit rate", hit_rate(inc), hit_rate(base), D),
        make_row(
            EvidenceKey.WAITING_MEAN,
            "requests waiting, mean",
            inc.waiting_mean,
            base.waiting_mean,
            D,
        ),
        make_row(
            EvidenceKey.REJECTED_SHARE,
            "429 share of responses",
            inc.rejected_share,
            base.rejected_share,
            D,
        ),
        # NOTE: the share of structured requests, not of all: plain requests that run to
        # max_tokens end with "length" too, and a schema route's truncation would drown in them
        make_row(
            EvidenceKey.STRUCTURED_LENGTH_SHARE,
            "structured outputs cut at max_tokens (length share)",
            structured_length_share(inc),
            structured_length_share(base),
            D,
        ),
    ]


def _change_rows(data: TriageInput) -> list[EvidenceRow]:
    """One row per group of changes made together (:mod:`alerts.triage.change_groups`): a
    drill's two knobs on three replicas are one row, not six; its value is how many changes
    the group holds."""
    return [
        EvidenceRow(
            EvidenceKey.CHANGE,
            f"change: {', '.join(group.what)}",
            short_targets(group.targets) if group.targets else FLEET,
            float(group.num_changes),
            NAN,
            NAN,
            ChangeKind.DIFFERENCE,
            Source.CHANGE_EVENTS,
            f"first seen {group.when()}",
        )
        for group in group_changes(data.changes)
    ]


def evidence_table(data: TriageInput) -> tuple[EvidenceRow, ...]:
    """The evidence rows of ``data``, in a fixed order (fleet, skew, changes, tenants)."""
    rows = [
        *_fleet_rows(data),
        least_queued_row(data),
        *prefix_rows(data),
        skew_row(
            data,
            EvidenceKey.E2E_P50_SKEW,
            "e2e p50, replica / median of the others",
            lambda m: m.e2e_p50_seconds,
            over,
            ChangeKind.RATIO,
        ),
        # NOTE: the mean from the histogram's sum and count needs no bucket to place it:
        # vLLM's e2e buckets start at 0.3 s, so a GPU fleet's p50 of short requests sits in
        # the first bucket on every replica, and a replica twice as slow looks the same
        skew_row(
            data,
            EvidenceKey.E2E_MEAN_SKEW,
            "e2e mean, replica / median of the others",
            lambda m: m.e2e_mean_seconds,
            over,
            ChangeKind.RATIO,
        ),
        # NOTE: token gaps are observed as they are made, requests only once they finish:
        # a replica that turned slow shows in its ITL before its e2e
        skew_row(
            data,
            EvidenceKey.ITL_MEAN_SKEW,
            "ITL mean, replica / median of the others",
            lambda m: m.itl_mean_seconds,
            over,
            ChangeKind.RATIO,
        ),
        skew_row(
            data,
            EvidenceKey.WAITING_SKEW,
            "requests waiting, replica - median of the others",
            lambda m: m.waiting_mean,
            minus,
            ChangeKind.DIFFERENCE,
        ),
        skew_row(
            data,
            EvidenceKey.HIT_RATE_SKEW,
            "prefix hit rate, replica - median of the others",
            hit_rate,
            minus,
            ChangeKind.DIFFERENCE,
            pick_max=False,
        ),
        *lora_rows(data),
        *cold_rows(data),
        *gpu_rows(data),
        *gap_rows(data),
        *_change_rows(data),
        *tenant_rows(data),
    ]
    if not any(r.is_known for r in rows):
        return (
            EvidenceRow(
                EvidenceKey.NOT_ENOUGH_DATA,
                "not enough data: no measurement in the window",
                FLEET,
                NAN,
                NAN,
                NAN,
                ChangeKind.DIFFERENCE,
                Source.NONE,
                "nothing was scraped or recorded over the incident window",
            ),
        )
    return tuple(rows)


def rows_by_key(rows: Iterable[EvidenceRow]) -> dict[EvidenceKey, EvidenceRow]:
    """The first row of each key (changes, which repeat, keep their first)."""
    out: dict[EvidenceKey, EvidenceRow] = {}
    for row in rows:
        out.setdefault(row.key, row)
    return out
