"""``tailwatch replay``: a stored production window replayed against candidate knobs, its
figures next to what production saw, kept as a lab run of kind ``replay``.

The window's records become a trace (:mod:`loadgen.replay_trace`), the trace runs on a
target (:mod:`loadgen.replay_targets`), and both sides are summarized by
``loadgen.summary.summarize`` over the same requests (those the trace replays) and the
same time basis (the window's length; the replay's divided by ``speed``), so their
percentiles, attainment and goodput compare like for like. What production's records
cannot say, the production side leaves as None: they carry no inter-token gaps, so its
ITL is unknown (compare TPOT) and an ITL objective is refused.

The lab point (one per replay) holds in ``summary`` the replay's ``summarize`` dict at the
top level (what every lab point has), plus ``"production"`` (the same shape, from the
records), ``"difference"`` (replay against production, per figure) and ``"replay"``
(``speed``, ``virtual_time``, ``run_seconds``); see docs/knob-lab.md, "Replay".
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.request_records import RequestRecord
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus
from collectors.store.protocols import LabStore, RequestReader
from loadgen.errors import WorkloadError
from loadgen.record import RequestResult
from loadgen.replay_targets import (
    Progress,
    TargetRun,
    check_knobs,
    is_sim_engine,
    run_bundled,
    run_simulated,
    run_urls,
)
from loadgen.replay_trace import ReplayTrace, build_trace, read_window
from loadgen.summary import parse_slo, summarize
from slo import tpot_seconds
from slo.outcomes import Outcome, finished_reason_outcome
from slo.window import format_utc

#: The most per-request figures a lab point keeps of each kind (evenly thinned past it).
MAX_SAMPLES = 2000
COMPARED = ("ttft_ms", "tpot_ms", "itl_ms", "e2el_ms")
QUANTILES = ("p50", "p95", "p99")


@dataclass(frozen=True)
class ReplayPlan:
    """What to replay on: ``engine`` (``tiny``, ``sim:<model>@<gpu>``) or ``url`` (a running
    server, its own knobs in force), the candidate ``knobs``, ``slo`` (``parse_slo``'s
    text), ``speed`` (arrivals this many times faster) and the synthesized prompts' seed."""

    engine: str | None = "tiny"
    url: str | None = None
    knobs: Mapping[str, Any] = field(default_factory=dict)
    slo: str = ""
    speed: float = 1.0
    seed: int = 0
    name: str = ""

    def check(self) -> None:
        """Refuse a plan that cannot run, before anything is read or written."""
        if (self.engine is None) == (self.url is None):
            raise WorkloadError("engine", "give exactly one of an engine and a URL")
        if isinstance(self.speed, bool) or not (math.isfinite(self.speed) and self.speed > 0):
            raise WorkloadError("speed", f"must be a finite number > 0, got {self.speed!r}")
        if self.url is not None and self.knobs:
            raise WorkloadError(
                "knob",
                "a running server (--url) replays under its own knobs; set them there "
                "(PATCH /admin/config) or replay on --engine",
            )
        if self.engine is not None:
            check_knobs(self.engine, self.knobs)
        if parse_slo(self.slo).itl_seconds is not None:
            raise WorkloadError(
                "slo.itl",
                "production's records carry no inter-token gaps, so the window cannot be "
                "judged against an ITL objective; use tpot",
            )

    @property
    def target(self) -> str:
        return self.engine if self.engine is not None else str(self.url)


@dataclass(frozen=True)
class ReplayReport:
    run_id: int
    status: LabRunStatus
    trace: ReplayTrace
    production: dict[str, Any]
    replay: dict[str, Any]
    difference: dict[str, Any]
    knobs: Mapping[str, Any] | None


def load_trace(
    reader: RequestReader,
    start: float,
    end: float,
    *,
    tenant: str | None = None,
    seed: int = 0,
) -> ReplayTrace:
    """The window's trace; ``WorkloadError`` when it holds no record or none replayable."""
    if not end > start:
        raise WorkloadError("window", f"to ({end!r}) must be after from ({start!r})")
    records = read_window(reader, start, end, tenant=tenant)
    trace = build_trace(records, start, end, tenant=tenant, seed=seed)
    if not records:
        who = f" of tenant {tenant!r}" if tenant is not None else ""
        raise WorkloadError(
            "window", f"no request records{who} between {format_utc(start)} and {format_utc(end)}"
        )
    if not trace.requests:
        raise WorkloadError(
            "window",
            f"none of its {trace.num_records} request records can be replayed "
            f"({_reasons(trace.unreplayable)})",
        )
    return trace


def _reasons(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))


def production_results(trace: ReplayTrace) -> list[RequestResult]:
    """The replayed requests as production served them, in ``summarize``'s terms: a record
    succeeded when it has no error, a good finish reason (or none), and TTFT and e2e."""
    return [_production_result(r.index, r.offset_seconds, r.record) for r in trace.requests]


def _production_result(index: int, offset: float, record: RequestRecord) -> RequestResult:
    reason = record.finish_reason
    ok = (
        not record.is_error
        and (reason is None or finished_reason_outcome(reason) is Outcome.GOOD)
        and record.ttft_seconds is not None
        and record.e2e_seconds is not None
    )
    return RequestResult(
        index,
        offset,
        sent_seconds=offset,
        ttft_seconds=record.ttft_seconds,
        e2e_seconds=record.e2e_seconds,
        prompt_tokens=record.input_tokens or 0,
        output_tokens=record.output_tokens or 0,
        status=200 if ok else 0,
        error="" if ok else (reason or "error"),
        replica=record.replica or "",
        tenant=record.tenant,
        response_id=record.request_id,
        finish_reason=reason or "",
    )


def server_side(
    results: Sequence[RequestResult], records: Sequence[RequestRecord] | None
) -> list[RequestResult]:
    """``results`` timed by the engine's own records where it kept one (matched by response
    id; ITL stays the client's, the records have no per-token times); the client's result
    where it did not (a request refused or failed before the engine). ``records`` None: the
    client's results as they are."""
    if records is None:
        return list(results)
    by_id = {r.request_id: r for r in records}
    out = []
    for result in results:
        record = by_id.get(result.response_id) if result.response_id else None
        if record is None:
            out.append(result)
            continue
        timed = _production_result(result.index, result.scheduled_seconds, record)
        timed.itl_seconds = list(result.itl_seconds)
        if not result.succeeded:  # NOTE: what the client saw fail, failed
            timed.status, timed.error = result.status, result.error or "error"
        out.append(timed)
    return out


def difference(replay: Mapping[str, Any], production: Mapping[str, Any]) -> dict[str, Any]:
    """Replay against production for each compared quantile, attainment and goodput:
    ``{"replay", "production", "difference", "ratio"}`` (None where a side is unknown)."""
    out: dict[str, Any] = {}
    for metric in COMPARED:
        for q in QUANTILES:
            out[f"{metric}.{q}"] = _pair(replay[metric][q], production[metric][q])
    for key in ("slo_attainment", "request_goodput", "request_throughput", "total_cached_tokens"):
        out[key] = _pair(replay.get(key), production.get(key))
    return out


def _pair(replay: float | None, production: float | None) -> dict[str, float | None]:
    known = [v for v in (replay, production) if v is not None and math.isfinite(v)]
    if len(known) < 2:
        return {"replay": replay, "production": production, "difference": None, "ratio": None}
    assert replay is not None and production is not None
    ratio = replay / production if production else None
    return {
        "replay": replay,
        "production": production,
        "difference": replay - production,
        "ratio": ratio,
    }


def run_trace(plan: ReplayPlan, trace: ReplayTrace, progress: Progress | None) -> TargetRun:
    """The trace on the plan's target."""
    schedule = trace.schedule(plan.speed)
    if plan.url is not None:
        return run_urls([plan.url], schedule, progress)
    assert plan.engine is not None
    if is_sim_engine(plan.engine):
        return run_simulated(plan.engine, plan.knobs, schedule, progress)
    return run_bundled(plan.engine, plan.knobs, schedule, progress)


def replay_window(
    reader: RequestReader,
    lab: LabStore,
    start: float,
    end: float,
    plan: ReplayPlan,
    *,
    tenant: str | None = None,
    progress: Progress | None = None,
    on_trace: Callable[[ReplayTrace], None] | None = None,
    clock: Callable[[], float] = time.time,
) -> ReplayReport:
    """Replay the window ``[start, end]`` (epoch seconds) as ``plan`` says and store it in
    ``lab``: the run first (status running), its one point, then its end (finished, or
    failed with the error, or interrupted). ``WorkloadError`` before anything is stored when
    the plan or the window cannot be replayed."""
    plan.check()
    objectives = parse_slo(plan.slo)
    trace = load_trace(reader, start, end, tenant=tenant, seed=plan.seed)
    if on_trace is not None:
        on_trace(trace)
    simulated = plan.engine is not None and is_sim_engine(plan.engine)
    run_id = lab.create_lab_run(
        LabRun(
            kind=LabRunKind.REPLAY,
            name=plan.name or f"replay of {start:.0f}–{end:.0f} on {plan.target}",
            created_at=clock(),
            target=plan.target,
            simulated=simulated,
            knobs=dict(plan.knobs),
            workload=trace.describe(),
            rates=(len(trace.requests) / trace.window_seconds,),
            num_planned_points=1,
            window=(start, end),
        )
    )
    try:
        run = run_trace(plan, trace, progress)
    except BaseException as error:
        interrupted = isinstance(error, KeyboardInterrupt)
        status = LabRunStatus.INTERRUPTED if interrupted else LabRunStatus.FAILED
        lab.finish_lab_run(run_id, status, None if interrupted else _first_line(error))
        raise
    production = summarize(production_results(trace), trace.window_seconds, objectives)
    results = server_side(run.results, run.server_records)
    replayed = summarize(results, trace.window_seconds / plan.speed, objectives)
    client = None
    if run.server_records is not None:
        client = summarize(run.results, trace.window_seconds / plan.speed, objectives)
    production["total_cached_tokens"] = _cached_tokens(r.record for r in trace.requests)
    replayed["total_cached_tokens"] = run.total_cached_tokens
    diff = difference(replayed, production)
    lab.add_lab_point(
        LabPoint(
            run_id=run_id,
            knob_value=None,
            rate=len(trace.requests) / trace.window_seconds,
            repeat=0,
            summary={
                **replayed,
                "production": production,
                "difference": diff,
                "replay": {
                    "speed": plan.speed,
                    "virtual_time": simulated,
                    "run_seconds": run.duration_seconds,
                    "knobs_in_force": dict(run.knobs) if run.knobs is not None else None,
                    "timed_at": "server"
                    if run.server_records is not None or simulated
                    else "client",
                },
                "client": client,
            },
            samples=_samples(results, production_results(trace)),
            measured_at=clock(),
        )
    )
    status = LabRunStatus.INTERRUPTED if run.interrupted else LabRunStatus.FINISHED
    lab.finish_lab_run(run_id, status)
    return ReplayReport(run_id, status, trace, production, replayed, diff, run.knobs)


def _cached_tokens(records: Iterable[RequestRecord]) -> int | None:
    """Prompt tokens served from the prefix cache; None when no record says."""
    counts = [r.cached_tokens for r in records if r.cached_tokens is not None]
    return sum(counts) if counts else None


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _samples(
    replay: Sequence[RequestResult], production: Sequence[RequestResult]
) -> dict[str, list[float]]:
    """Per-request figures in ms for bootstraps, at most :data:`MAX_SAMPLES` of each."""
    out: dict[str, list[float]] = {}
    for prefix, results in (("", replay), ("production_", production)):
        ok = [r for r in results if r.succeeded]
        timed = [r for r in ok if r.ttft_seconds is not None and r.e2e_seconds is not None]
        out[f"{prefix}ttft_ms"] = _thin([r.ttft_seconds * 1000 for r in timed])  # type: ignore[operator]
        out[f"{prefix}e2e_ms"] = _thin([r.e2e_seconds * 1000 for r in timed])  # type: ignore[operator]
        out[f"{prefix}tpot_ms"] = _thin(
            [
                tpot_seconds(r.e2e_seconds, r.ttft_seconds, r.output_tokens) * 1000
                for r in timed
                if r.output_tokens > 1
            ]
        )
    out["itl_ms"] = _thin([gap * 1000 for r in replay if r.succeeded for gap in r.itl_seconds])
    return out


def _thin(values: list[float]) -> list[float]:
    if len(values) <= MAX_SAMPLES:
        return values
    step = len(values) / MAX_SAMPLES
    return [values[int(i * step)] for i in range(MAX_SAMPLES)]
