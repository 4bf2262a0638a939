"""Evidence rows about replicas that started since the baseline began (a scale-out, a scale
from zero, a restart): how much slower they serve than the replicas that were already
running.

A replica *started* when its process's start time (``tailwatch:engine_start_time_seconds``)
is after the baseline's start, or, where no start time is scraped, when it served requests
in the incident and none in the baseline. A replica that takes traffic before it is warm
(graphs not captured, kernels compiled on first use, a warm-up skipped) steps slowly for
its first minutes: its token gaps, and its first tokens, against the steady replicas'. Each
side is a mean over the group's requests (each replica's mean weighted by its requests), so
the order and names of replicas never change a row. Without a started replica, or without a
steady one to compare with, the rows are unknown.

The first request after a deploy pays for what a warm replica has cached: a structured-output
grammar is compiled on its first use on each new process. The started replicas' compile
seconds over their first tokens' time (TTFT mean times requests, summed) is a row of its own,
known with a started replica alone (it compares with nothing).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from alerts.triage.data import NAN, Measure, Measurements, TimeWindow, TriageInput, WindowPair
from alerts.triage.evidence_rows import (
    ChangeKind,
    EvidenceKey,
    EvidenceRow,
    exact_sum,
    make_row,
    ratio,
)

COMPILE = EvidenceKey.COLD_COMPILE_SHARE


def is_started(pair: WindowPair, baseline: TimeWindow) -> bool:
    """Whether the replica's process started after ``baseline`` began (see the module
    docstring)."""
    started = pair.incident.start_time_seconds
    if started.is_known:
        return started.value > baseline.start_seconds
    inc, base = pair.incident.num_requests, pair.baseline.num_requests
    return inc.is_known and inc.value > 0 and not (base.is_known and base.value > 0)


def started_targets(data: TriageInput) -> list[str]:
    """The replicas started since the baseline began, by name."""
    return [t for t in sorted(data.replicas) if is_started(data.replicas[t], data.baseline)]


def pooled_mean(
    measurements: Sequence[Measurements], read: Callable[[Measurements], Measure]
) -> Measure:
    """The mean over the requests of every scope: each scope's mean weighted by its
    requests (equally, when a count is unknown); unknown when no mean is."""
    known = [(read(m), m.num_requests) for m in measurements if read(m).is_known]
    if not known:
        return Measure()
    weights = [n.value if n.is_known and n.value > 0 else 1.0 for _, n in known]
    total = exact_sum(weights)
    value = exact_sum(w * mean.value for w, (mean, _) in zip(weights, known, strict=True))
    return Measure(value / total, known[0][0].source)


def _row(
    data: TriageInput,
    key: EvidenceKey,
    what: str,
    read: Callable[[Measurements], Measure],
    started: list[str],
) -> EvidenceRow:
    steady = [t for t in sorted(data.replicas) if t not in started]
    if not started or not steady:
        note = "needs a replica started since the baseline and a steady one"
        return make_row(key, what, Measure(), Measure(), ChangeKind.RATIO, note=note)
    cold = pooled_mean([data.replicas[t].incident for t in started], read)
    warm = pooled_mean([data.replicas[t].incident for t in steady], read)
    note = f"started: {', '.join(started)}; steady: {', '.join(steady)}"
    return make_row(
        key,
        what,
        ratio(cold, warm),
        Measure(NAN),
        ChangeKind.RATIO,
        scope=",".join(started),
        note=note,
    )


def _compile_share_row(data: TriageInput, started: list[str]) -> EvidenceRow:
    what = "grammar compile seconds, share of TTFT, started replicas"
    pairs = [data.replicas[t].incident for t in started]
    compiled = [m.grammar_compile_seconds for m in pairs if m.grammar_compile_seconds.is_known]
    first_token = [
        m.ttft_mean_seconds.value * m.num_requests.value
        for m in pairs
        if m.ttft_mean_seconds.is_known and m.num_requests.is_known
    ]
    if not compiled or not first_token:
        return make_row(COMPILE, what, Measure(), Measure(), ChangeKind.DIFFERENCE)
    seconds = Measure(exact_sum(m.value for m in compiled), compiled[0].source)
    share = ratio(seconds, Measure(exact_sum(first_token), compiled[0].source))
    return make_row(
        COMPILE, what, share, Measure(NAN), ChangeKind.DIFFERENCE, scope=",".join(started)
    )


def cold_rows(data: TriageInput) -> list[EvidenceRow]:
    started = started_targets(data)
    return [
        _row(
            data,
            EvidenceKey.COLD_ITL_RATIO,
            "ITL mean, started replicas / steady ones",
            lambda m: m.itl_mean_seconds,
            started,
        ),
        _row(
            data,
            EvidenceKey.COLD_TTFT_RATIO,
            "TTFT mean, started replicas / steady ones",
            lambda m: m.ttft_mean_seconds,
            started,
        ),
        _compile_share_row(data, started),
    ]
