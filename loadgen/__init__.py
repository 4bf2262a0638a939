"""Tailwatch's load generator: open-loop arrivals over the OpenAI API, client-side
latency records, goodput summaries, rate sweeps and incident scenarios. It speaks only
HTTP to the servers it loads (see ``docs/loadgen.md``)."""

from loadgen.arrivals import Arrivals
from loadgen.distributions import Fixed, LogNormal, Replay, Uniform, load_replay, parse_length
from loadgen.errors import LoadgenError, TargetError, WorkloadError
from loadgen.record import RequestResult, read_jsonl, write_jsonl
from loadgen.routing import Router
from loadgen.runner import RunState, probe, run_schedule
from loadgen.summary import parse_slo, summarize
from loadgen.sweep import KneeResult, find_knee, sweep_rates, write_table
from loadgen.workload import (
    ScheduledRequest,
    SharedPrefix,
    Workload,
    build_schedule,
    parse_workload,
)

__all__ = [
    "Arrivals",
    "Fixed",
    "KneeResult",
    "LoadgenError",
    "LogNormal",
    "Replay",
    "RequestResult",
    "Router",
    "RunState",
    "ScheduledRequest",
    "SharedPrefix",
    "TargetError",
    "Uniform",
    "Workload",
    "WorkloadError",
    "build_schedule",
    "find_knee",
    "load_replay",
    "parse_length",
    "parse_slo",
    "parse_workload",
    "probe",
    "read_jsonl",
    "run_schedule",
    "summarize",
    "sweep_rates",
    "write_jsonl",
    "write_table",
]
