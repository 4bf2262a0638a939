"""Evidence rows about replicas: the least-queued one, prefix hit rates of steady and new
replicas, and per-replica skew against the median of the others. Replica order and names never
change a score: every figure is an exactly rounded sum, a min, a max or a median, a skew tie
goes to the replica whose baseline makes the larger change, and only replicas whose rows are
the same are left to the lowest target name.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Mapping

from alerts.triage.data import NAN, Measure, Measurements, TriageInput, WindowPair
from alerts.triage.evidence_rows import (
    FLEET,
    ChangeKind,
    EvidenceKey,
    EvidenceRow,
    finite,
    hit_rate,
    make_row,
    queue_share,
    ratio,
    total,
)


def least_queued_row(data: TriageInput) -> EvidenceRow:
    """The replica that queues least: arrivals above capacity queue on every replica."""
    shares = {t: queue_share(p.incident) for t, p in data.replicas.items()}
    known = sorted((m.value, t) for t, m in shares.items() if m.is_known)
    kind = ChangeKind.DIFFERENCE
    if len(known) < 2:  # one replica (or none measured per replica): the fleet's own share
        fleet = data.fleet
        return make_row(
            EvidenceKey.LEAST_QUEUE_SHARE,
            "queue share, least-queued replica",
            queue_share(fleet.incident),
            queue_share(fleet.baseline),
            kind,
        )
    _, target = known[0]
    pair = data.replicas[target]
    return make_row(
        EvidenceKey.LEAST_QUEUE_SHARE,
        "queue share, least-queued replica",
        shares[target],
        queue_share(pair.baseline),
        kind,
        scope=target,
    )


def _is_new(pair: WindowPair) -> bool:
    """A replica that served prefix lookups in the incident but none in the baseline."""
    inc, base = pair.incident.prefix_queries, pair.baseline.prefix_queries
    return inc.is_known and inc.value > 0 and not (base.is_known and base.value > 0)


def prefix_rows(data: TriageInput) -> list[EvidenceRow]:
    pairs = data.replicas
    new = [t for t in sorted(pairs) if _is_new(pairs[t])]
    steady = [t for t in sorted(pairs) if t not in new]
    all_queries = total(pairs[t].incident.prefix_queries for t in sorted(pairs))
    on_new = total(pairs[t].incident.prefix_queries for t in new)
    if not new and all_queries.is_known:
        on_new = Measure(0.0, all_queries.source)
    share = ratio(on_new, all_queries)
    if steady:
        inc_hits = total(pairs[t].incident.prefix_hits for t in steady)
        inc_queries = total(pairs[t].incident.prefix_queries for t in steady)
        base_hits = total(pairs[t].baseline.prefix_hits for t in steady)
        base_queries = total(pairs[t].baseline.prefix_queries for t in steady)
        steady_inc, steady_base = ratio(inc_hits, inc_queries), ratio(base_hits, base_queries)
    else:  # no per-replica data: the fleet's own hit rate
        steady_inc, steady_base = hit_rate(data.fleet.incident), hit_rate(data.fleet.baseline)
    scope = FLEET if not new else ",".join(steady) or FLEET
    new_note = f"new since baseline: {', '.join(new)}" if new else ""
    return [
        make_row(
            EvidenceKey.STEADY_HIT_RATE,
            "prefix hit rate, replicas serving in both windows",
            steady_inc,
            steady_base,
            ChangeKind.DIFFERENCE,
            scope=scope,
        ),
        make_row(
            EvidenceKey.NEW_REPLICA_QUERY_SHARE,
            "prefix lookups on replicas new since baseline",
            share,
            Measure(0.0, share.source) if share.is_known else Measure(),
            ChangeKind.DIFFERENCE,
            note=new_note,
        ),
    ]


def _skew(
    values: Mapping[str, Measure],
    relation: Callable[[float, float], float],
    pick_max: bool,
    tie_break: Callable[[str], float],
) -> tuple[str, Measure] | None:
    """Each replica's value against the median of the others (``relation(value, median)``);
    the replica with the largest (``pick_max``) or smallest relation, the lowest
    ``tie_break(target)`` on ties, the lowest name only after that."""
    known = {t: m for t, m in values.items() if m.is_known}
    if len(known) < 2:
        return None
    skews: list[tuple[float, float, str]] = []
    for target, m in known.items():
        others = statistics.median(o.value for t, o in known.items() if t != target)
        rel = relation(m.value, others)
        if finite(rel):
            skews.append((-rel if pick_max else rel, tie_break(target), target))
    if not skews:
        return None
    key, _, target = min(skews)
    # NOTE: the skew compares replicas whose figures may come from different sources (one
    # replica's histogram places its values, another's does not): say so per replica.
    sources = {m.source for m in known.values()}
    notes = [f"{t}: {m.note}" for t, m in sorted(known.items()) if m.note]
    if len(sources) > 1:
        notes.insert(0, ", ".join(f"{t} from {m.source.value}" for t, m in sorted(known.items())))
    return target, Measure(-key if pick_max else key, known[target].source, "; ".join(notes))


def over(value: float, median: float) -> float:
    return value / median if median > 0 else NAN


def minus(value: float, median: float) -> float:
    return value - median


def skew_row(
    data: TriageInput,
    key: EvidenceKey,
    what: str,
    read: Callable[[Measurements], Measure],
    relation: Callable[[float, float], float],
    kind: ChangeKind,
    pick_max: bool = True,
) -> EvidenceRow:
    baselines = {t: read(p.baseline) for t, p in data.replicas.items()}

    def smaller_change_later(target: str) -> float:
        # NOTE: replicas whose incident skews tie (equal values) can differ in their own
        # baseline skew, which the slow-replica score reads; the lowest name picked one by
        # name and renaming replicas changed the score. Ties go to the larger change against
        # the replica's own baseline (a lower baseline skew, a higher one with pick_max
        # off; unknown last), so only replicas whose rows are the same are left to the name
        base = _skew_for(target, baselines, relation)
        if not base.is_known:
            return math.inf
        return base.value if pick_max else -base.value

    incident = _skew(
        {t: read(p.incident) for t, p in data.replicas.items()},
        relation,
        pick_max,
        smaller_change_later,
    )
    if incident is None:
        return make_row(key, what, Measure(), Measure(), kind, note="needs two replicas with data")
    target, value = incident
    baseline = _skew_for(target, baselines, relation)
    return make_row(key, what, value, baseline, kind, scope=target)


def _skew_for(
    target: str, values: Mapping[str, Measure], relation: Callable[[float, float], float]
) -> Measure:
    mine = values.get(target)
    others = [m.value for t, m in values.items() if t != target and m.is_known]
    if mine is None or not mine.is_known or not others:
        return Measure()
    return Measure(relation(mine.value, statistics.median(others)), mine.source)
