"""Knob-lab results: sweeps, replays and their measured points, as the store keeps them.

A :class:`LabRun` is one study — a sweep (rates × one knob's values, each point repeated), or
a replay of a production window against candidate knobs — and its :class:`LabPoint` rows
are what each (knob value, rate, repeat) measured. ``tailwatch sweep`` and ``tailwatch
replay`` write them through :class:`~collectors.store.protocols.LabStore` as they go, so the
console's knob lab draws a running sweep's progress and a finished one's knee from the
same rows (:class:`~collectors.store.protocols.LabReader`).

Values are JSON: knobs and workloads as the CLI took them, a point's ``summary`` as
``loadgen.summary.summarize`` returns it, and ``samples`` the per-request figures a
bootstrap needs (``ttft_ms``, ``e2e_ms``, ``itl_ms`` lists, and whatever else a writer
keeps) — a writer bounds their length; the store keeps what it is given.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

JsonScalar = str | int | float | bool | None


class LabRunNotFound(LookupError):
    """A lab run id the store does not hold (every :class:`~collectors.store.protocols.LabStore`
    raises it for a point or an end written to a run it does not hold)."""


class LabRunKind(enum.StrEnum):
    SWEEP = "sweep"
    REPLAY = "replay"


class LabRunStatus(enum.StrEnum):
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"  # ``error`` says why
    INTERRUPTED = "interrupted"  # Ctrl-C or a stopped process: the points so far are kept


@dataclass(frozen=True)
class LabRun:
    """One study. ``id`` is the store's (None before it is written)."""

    kind: LabRunKind
    name: str  # the user's label, e.g. "mnbt 512 vs 4096"
    created_at: float  # epoch seconds
    target: str  # "sim:llama-3.1-8b@h100", a URL, or "tiny" (a bundled engine)
    simulated: bool  # a sim: engine, in virtual or real time: never production
    knobs: Mapping[str, Any]  # the engine knobs every point shares
    workload: Mapping[str, Any]  # the traffic, as the CLI took it (or the replayed window)
    sweep_knob: str | None = None  # the knob varied across points; None: rates only
    knob_values: Sequence[JsonScalar] = ()  # its values, in the order they run
    rates: Sequence[float] = ()  # the arrival rates (req/s); a replay has its own
    num_repeats: int = 1
    num_planned_points: int = 0  # len(knob_values or [None]) × len(rates or [None]) × repeats
    status: LabRunStatus = LabRunStatus.RUNNING
    error: str | None = None
    finished_at: float | None = None
    window: tuple[float, float] | None = None  # a replay: the production window replayed
    id: int | None = None


@dataclass(frozen=True)
class LabPoint:
    """What one (knob value, rate, repeat) measured. ``rate`` is the offered rate (a replay:
    the window's mean arrival rate); ``summary`` holds at least ``slo_attainment``,
    ``request_goodput``, ``request_throughput`` and the ``ttft_ms``/``itl_ms`` quantiles."""

    run_id: int
    knob_value: JsonScalar
    rate: float
    repeat: int
    summary: Mapping[str, Any]
    samples: Mapping[str, Sequence[float]] = field(default_factory=dict)
    measured_at: float = 0.0  # epoch seconds the point finished
