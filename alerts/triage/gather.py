"""Build a :class:`~alerts.triage.data.TriageInput` from the store, through its protocols only.

``gather(metrics, requests, incident, baseline, replica_targets=...)`` reads the canonical
families over both windows for the fleet and for each replica (the ``target`` label), the
request records (``RequestReader.requests``) for exact phase times and per-tenant figures
(:mod:`alerts.triage.tenants`), the exemplars and records of the slowest requests, and the
change events (``changes``: a ``ChangeReader``, the store's) from the baseline's start, or
further back when the onset's span reaches there
(:func:`alerts.triage.change_hypotheses.changes_window`), to the incident's end.

NOTE: request records name their replica by the engine's own id (``service.instance.id``, a
UUID), not by the metrics' ``target``; ``replica_targets`` maps one to the other. A record
whose replica is not in the map counts for the fleet but for no replica (and the fleet's
figures say how many such records there were). ``requests`` may be ``None`` when tracing is
off: every figure then comes from the metrics.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from alerts.triage.by_target import ByTargetReads
from alerts.triage.change_hypotheses import changes_window
from alerts.triage.data import (
    KnobChange,
    Measure,
    SlowRequest,
    Source,
    TimeWindow,
    TriageInput,
    WindowPair,
)
from alerts.triage.measure_scope import Scope, measure_scope
from alerts.triage.tenants import tenant_pairs
from collectors import canonical as c
from collectors.changes import KNOB_CHANGES_FAMILY, LABEL_KNOB
from collectors.request_records import RequestRecord
from collectors.store.change_records import ChangeEvent
from collectors.store.protocols import ChangeReader, MetricsReader, RequestReader

TRACE_ID_LABELS = ("trace_id", "traceID", "trace-id")
#: Families whose exemplars link a slow request: e2e first (the request's whole latency).
EXEMPLAR_FAMILIES = (c.E2E_SECONDS, c.TTFT_SECONDS)
#: The families whose series name the replicas (by their ``target`` label).
TARGET_FAMILIES = (c.TTFT_SECONDS, c.E2E_SECONDS, c.REQUESTS_RUNNING, c.KV_CACHE_USAGE)


@dataclass(frozen=True)
class GatherOptions:
    """``max_slow_requests``: how many slow requests to link; ``record_limit``: the most
    request records read per window; ``change_limit``: the most change events read (the
    newest)."""

    max_slow_requests: int = 10
    record_limit: int = 10_000
    change_limit: int = 1000


def _targets(metrics: MetricsReader) -> list[str]:
    found: set[str] = set()
    for family in TARGET_FAMILIES:
        for info in metrics.series(family):
            target = dict(info.labels).get(c.LABEL_TARGET)
            if target:
                found.add(target)
    return sorted(found)


def _records(requests: RequestReader | None, window: TimeWindow, limit: int) -> list[RequestRecord]:
    if requests is None:
        return []
    return requests.requests(window.start_seconds, window.end_seconds, limit=limit)


def _unmapped_note(records: Sequence[RequestRecord], replica_targets: Mapping[str, str]) -> str:
    unmapped = sum(1 for r in records if r.replica not in replica_targets)
    if not records or not unmapped:
        return ""
    return f"{unmapped} of {len(records)} request records name no known target"


def _window_pair(
    metrics: MetricsReader,
    selector: Mapping[str, str] | None,
    records: tuple[Sequence[RequestRecord], Sequence[RequestRecord]],
    incident: TimeWindow,
    baseline: TimeWindow,
) -> WindowPair:
    return WindowPair(
        measure_scope(metrics, Scope(selector, records[0]), incident),
        measure_scope(metrics, Scope(selector, records[1]), baseline),
    )


def _with_note(pair: WindowPair, note: str) -> WindowPair:
    """The fleet's arrival row says when some records could not be placed on a replica."""
    if not note:
        return pair
    m = pair.incident.arrival_rate_per_second
    joined = f"{m.note}; {note}" if m.note else note
    arrivals = Measure(m.value, m.source, joined)
    return replace(pair, incident=replace(pair.incident, arrival_rate_per_second=arrivals))


def knob_changes(metrics: MetricsReader, start: float, end: float) -> tuple[KnobChange, ...]:
    """Per target and knob, the counter's increase over ``[start, end]``; a series first seen
    inside the range counts its first reading in full (a labelled counter appears at its
    first change). The knob lab's reading (a sweep's knobs changed since it measured);
    triage reads the change events."""
    out: list[KnobChange] = []
    series = metrics.samples(KNOB_CHANGES_FAMILY, None, 0.0, end)
    for labels, samples in sorted(series.items()):
        label = dict(labels)
        points = [(float(t), float(v)) for t, v in samples]
        before = [v for t, v in points if t < start]
        inside = [(t, v) for t, v in points if t >= start]
        if not inside:
            continue
        readings = [before[-1] if before else 0.0, *(v for _, v in inside)]
        steps = [0.0] * len(inside)
        for i, (prev, cur) in enumerate(itertools.pairwise(readings)):
            steps[i] = cur - prev if cur >= prev else cur  # a reset restarts from zero
        increase = sum(steps)
        if increase <= 0:
            continue
        first = next(t for (t, _), step in zip(inside, steps, strict=True) if step > 0)
        out.append(
            KnobChange(label.get(c.LABEL_TARGET, ""), label.get(LABEL_KNOB, "?"), increase, first)
        )
    return tuple(out)


def _trace_id(labels: Sequence[tuple[str, str]]) -> str | None:
    found = dict(labels)
    for name in TRACE_ID_LABELS:
        if found.get(name):
            return found[name].lower()
    return None


def _exemplar_requests(
    metrics: MetricsReader, targets: Sequence[str], window: TimeWindow, limit: int
) -> list[SlowRequest]:
    found: list[SlowRequest] = []
    for family, target in itertools.product(EXEMPLAR_FAMILIES, targets):
        exemplars = metrics.exemplars(
            family, {c.LABEL_TARGET: target}, window.start_seconds, window.end_seconds
        )
        # NOTE: unpacked, not read by attribute: a reader may return StoredExemplar or the
        # plain (upper_bound, value, labels) tuple it is equal to.
        plain = [(float(value), labels) for _, value, labels in exemplars]
        ranked = sorted(plain, key=lambda e: -e[0] if math.isfinite(e[0]) else 0.0)
        for value, labels in ranked[:limit]:
            trace_id = _trace_id(labels)
            if trace_id is None:
                continue
            field = "e2e_seconds" if family == c.E2E_SECONDS else "ttft_seconds"
            found.append(
                SlowRequest(
                    trace_id, target=target, sources=frozenset({Source.EXEMPLARS}), **{field: value}
                )
            )
    return found


def _record_requests(
    records: Sequence[RequestRecord], replica_targets: Mapping[str, str], limit: int
) -> list[SlowRequest]:
    def e2e(r: RequestRecord) -> float:
        return r.e2e_seconds if r.e2e_seconds is not None else -math.inf

    slowest = sorted((r for r in records if r.trace_id), key=lambda r: (-e2e(r), r.trace_id))
    return [
        SlowRequest(
            trace_id=r.trace_id.lower(),
            e2e_seconds=math.nan if r.e2e_seconds is None else r.e2e_seconds,
            ttft_seconds=math.nan if r.ttft_seconds is None else r.ttft_seconds,
            queue_seconds=math.nan if r.queue_seconds is None else r.queue_seconds,
            prefill_seconds=math.nan if r.prefill_seconds is None else r.prefill_seconds,
            request_id=r.request_id,
            target=replica_targets.get(r.replica or ""),
            sources=frozenset({Source.REQUEST_RECORDS}),
        )
        for r in slowest[:limit]
    ]


def gather(
    metrics: MetricsReader,
    requests: RequestReader | None,
    incident: TimeWindow,
    baseline: TimeWindow,
    *,
    replica_targets: Mapping[str, str] | None = None,
    options: GatherOptions | None = None,
    changes: ChangeReader | None = None,
) -> TriageInput:
    """The triage input of one incident (see the module docstring)."""
    options = options or GatherOptions()
    mapping = dict(replica_targets or {})
    targets = _targets(metrics)
    inc_records = _records(requests, incident, options.record_limit)
    base_records = _records(requests, baseline, options.record_limit)
    fleet = _window_pair(metrics, None, (inc_records, base_records), incident, baseline)
    fleet = _with_note(fleet, _unmapped_note(inc_records, mapping))
    replicas = {}
    each = ByTargetReads(metrics)  # NOTE: one read of every replica per family and window
    for target in targets:
        mine = (
            [r for r in inc_records if mapping.get(r.replica or "") == target],
            [r for r in base_records if mapping.get(r.replica or "") == target],
        )
        replicas[target] = _window_pair(each, {c.LABEL_TARGET: target}, mine, incident, baseline)
    slow = [
        *_exemplar_requests(each, targets, incident, options.max_slow_requests),
        *_record_requests(inc_records, mapping, options.max_slow_requests),
    ]
    found: tuple[ChangeEvent, ...] = ()
    if changes is not None:
        start, end = changes_window(incident, baseline)
        found = tuple(changes.change_events(start, end, limit=options.change_limit))
    return TriageInput(
        incident=incident,
        baseline=baseline,
        fleet=fleet,
        replicas=replicas,
        changes=found,
        slow_requests=tuple(slow),
        tenants=tenant_pairs(inc_records, base_records),
    )
