"""What triage reads: plain measurements of an incident window against a baseline window.

Every number is a :class:`Measure`: a value (NaN when unknown) and the :class:`Source` it came
from, so the evidence table can say where each row's figures came from (a histogram, a
counter, a gauge, or the request records' exact phase times). :mod:`alerts.triage.gather` builds a
:class:`TriageInput` from the store; tests build one by hand. Nothing here reads a clock, a
database or the network.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from alerts.errors import AlertsError
from collectors.store.change_records import ChangeEvent

NAN = math.nan


class TriageInputError(AlertsError):
    """A triage input that cannot be read (a window that ends before it starts, ...)."""


class Source(enum.StrEnum):
    """Where a measurement came from."""

    HISTOGRAM = "histogram"
    COUNTER = "counter"
    GAUGE = "gauge"
    REQUEST_RECORDS = "request records"
    EXEMPLARS = "exemplars"
    CHANGE_EVENTS = "change events"
    NONE = "none"  # no data


@dataclass(frozen=True)
class Measure:
    """One measured value and its source; ``note`` says how it was read when that matters
    (e.g. "histogram too coarse: exact phase times of 40 request records")."""

    value: float = NAN
    source: Source = Source.NONE
    note: str = ""

    @property
    def is_known(self) -> bool:
        return isinstance(self.value, int | float) and math.isfinite(self.value)


UNKNOWN = Measure()


@dataclass(frozen=True)
class Measurements:
    """One window's measurements for one scope (the fleet or one replica). Every field
    defaults to unknown, so an input may carry only what was measured.

    Means are per request; ``*_p95``/``*_p99`` are quantiles; counts are increases over the
    window; ``waiting_mean`` and ``kv_usage_max`` are gauge readings over the window."""

    num_requests: Measure = UNKNOWN  # requests finished (or arrived, from records)
    arrival_rate_per_second: Measure = UNKNOWN
    ttft_mean_seconds: Measure = UNKNOWN
    queue_mean_seconds: Measure = UNKNOWN
    prefill_mean_seconds: Measure = UNKNOWN
    ttft_p95_seconds: Measure = UNKNOWN
    itl_p99_seconds: Measure = UNKNOWN
    e2e_p50_seconds: Measure = UNKNOWN
    e2e_mean_seconds: Measure = UNKNOWN
    prompt_tokens_p95: Measure = UNKNOWN
    prompt_tokens_mean: Measure = UNKNOWN
    itl_mean_seconds: Measure = UNKNOWN
    output_tokens_mean: Measure = UNKNOWN
    num_preemptions: Measure = UNKNOWN
    kv_usage_max: Measure = UNKNOWN  # a 0..1 fraction
    prefix_queries: Measure = UNKNOWN  # tokens looked up in the prefix cache
    prefix_hits: Measure = UNKNOWN
    waiting_mean: Measure = UNKNOWN
    rejected_share: Measure = UNKNOWN  # 429 responses over all responses, 0..1
    lora_loads: Measure = UNKNOWN  # adapter loads (a cold adapter read in), all adapters
    lora_load_seconds: Measure = UNKNOWN  # seconds spent loading adapters
    start_time_seconds: Measure = UNKNOWN  # Unix time the engine process started (latest)
    structured_finished: Measure = UNKNOWN  # structured-output requests finished
    structured_length: Measure = UNKNOWN  # of them, finished with "length" (cut at max_tokens)
    running_mean: Measure = UNKNOWN  # requests running (the batch), a gauge's mean, summed
    gpu_utilization_mean: Measure = UNKNOWN  # NVML's busy fraction 0..1, mean over GPUs
    spec_draft_tokens: Measure = UNKNOWN  # draft tokens proposed (speculative decoding)
    spec_accepted_tokens: Measure = UNKNOWN  # draft tokens the target accepted
    spec_accept_rate_mean: Measure = UNKNOWN  # SGLang's acceptance gauge (0..1), mean
    grammar_compile_seconds: Measure = UNKNOWN  # spent compiling structured-output grammars
    client_ttft_p95_seconds: Measure = UNKNOWN  # first tokens as clients saw them (a gateway's)


@dataclass(frozen=True)
class WindowPair:
    """The same scope measured over the incident and over the baseline window."""

    incident: Measurements = field(default_factory=Measurements)
    baseline: Measurements = field(default_factory=Measurements)


@dataclass(frozen=True)
class TimeWindow:
    """``[start_seconds, end_seconds]`` in Unix seconds."""

    start_seconds: float
    end_seconds: float

    def __post_init__(self) -> None:
        start, end = self.start_seconds, self.end_seconds
        if not (math.isfinite(start) and math.isfinite(end) and end > start):
            raise TriageInputError(
                f"window [{start}, {end}]: needs finite times with end after start"
            )

    @property
    def duration_seconds(self) -> float:
        return self.end_seconds - self.start_seconds


@dataclass(frozen=True)
class KnobChange:
    """Live knob changes on one replica in a window, from the knob counter
    (``alerts.triage.gather.knob_changes``): the knob lab's "changed since measured". Triage
    reads the change events instead (``TriageInput.changes``)."""

    target: str
    knob: str
    num_changes: float
    at_seconds: float | None = None  # the first scrape that saw the change, when known


@dataclass(frozen=True)
class SlowRequest:
    """A slow request, found in exemplars or request records, keyed by trace id."""

    trace_id: str
    e2e_seconds: float = NAN
    ttft_seconds: float = NAN
    queue_seconds: float = NAN
    prefill_seconds: float = NAN
    request_id: str | None = None
    target: str | None = None
    sources: frozenset[Source] = frozenset()


@dataclass(frozen=True)
class TriageInput:
    """Everything triage reads about one incident; ``changes``: the change events from the
    baseline's start to the incident's end (``collectors.store.change_records``)."""

    incident: TimeWindow
    baseline: TimeWindow
    fleet: WindowPair = field(default_factory=WindowPair)
    replicas: Mapping[str, WindowPair] = field(default_factory=dict)  # by target
    changes: tuple[ChangeEvent, ...] = ()
    slow_requests: tuple[SlowRequest, ...] = ()
    #: by tenant, from the request records (:mod:`alerts.triage.tenants`): each tenant's
    #: requests, prompt tokens (``num_requests`` x ``prompt_tokens_mean``), TTFT and queue
    #: means; empty when the records name fewer than two tenants
    tenants: Mapping[str, WindowPair] = field(default_factory=dict)
