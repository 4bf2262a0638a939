"""Live knob and fault changes, validated all or nothing: one function for every front end.

The served engine (``AsyncEngine``, in its engine thread between two steps) and a simulated
replica of the virtual fleet (``loadgen.virtual``, between two of its virtual steps) apply
an ``/admin/config`` patch through :func:`apply_knob_changes`, so a drill's admin patch
does the same thing to either: the engine's live knobs (``LIVE_KNOBS``), the admission
limits in front of it, and the drill faults below, which are kept out of ``EngineConfig``.

- ``step_delay_seconds``: every step is followed by this much idle time (a throttled GPU,
  a noisy neighbour).
- ``prefill_seconds_per_token``: each step also takes this long per prompt token it
  computed, a bigger model's prefill throughput (0.0005: 2,000 tokens/s), so a long-prompt
  drill stalls decodes the same on any machine.
- ``fail_next_steps``: that many of the next steps (with a batch) raise after the model ran.

A simulated engine also takes its priced features' knobs (``engine.sim.features``:
``spec_decode_acceptance_rate`` and the ``structured_output_*`` costs), so a scenario can
change how well speculation pays or what grammars cost part-way; a torch engine refuses them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from engine.admission import Admission
from engine.errors import ConfigError
from engine.llm_engine import KnobChange, LLMEngine
from engine.sim.features import SIM_FEATURE_KNOBS, SimFeatureKnobs

__all__ = [
    "ADMISSION_KNOBS",
    "DELAY_FAULTS",
    "FAULTS",
    "MAX_FAIL_NEXT_STEPS",
    "NOT_INFO_LABELS",
    "DelayFaults",
    "apply_knob_changes",
    "knobs_in_force",
]

FAULTS: tuple[str, ...] = ("step_delay_seconds", "prefill_seconds_per_token", "fail_next_steps")
#: The faults that are seconds, with their upper bounds.
DELAY_FAULTS: dict[str, float] = {"step_delay_seconds": 10.0, "prefill_seconds_per_token": 0.01}
# The front end's admission limits, live too (None: unbounded): the knob triage recommends
# for overload (lower max_waiting_requests) can be turned without a restart.
ADMISSION_KNOBS: tuple[str, ...] = ("max_waiting_requests", "max_concurrency_per_tenant")
MAX_FAIL_NEXT_STEPS = 1000
#: What ``knobs_in_force`` shows that is no label of ``vllm:cache_config_info``: a fault that
#: counts down by itself, and the simulator's feature knobs (drill parameters, not config).
NOT_INFO_LABELS: tuple[str, ...] = ("fail_next_steps", *SIM_FEATURE_KNOBS)


class DelayFaults(Protocol):
    """What holds the delay faults (the engine loop; a virtual replica): seconds, >= 0."""

    step_delay_seconds: float
    prefill_seconds_per_token: float


def knobs_in_force(engine: LLMEngine, faults: DelayFaults, admission: Admission) -> dict[str, Any]:
    """The knobs ``GET /admin/config`` shows: the engine's, the faults and admission's."""
    knobs = {
        **engine.knobs(),
        **{fault: getattr(faults, fault) for fault in DELAY_FAULTS},
        "fail_next_steps": engine.num_steps_to_fail,
        **{knob: getattr(admission, knob) for knob in ADMISSION_KNOBS},
    }
    if engine.simulation is not None:
        features = engine.simulation.features.knobs
        knobs.update({knob: getattr(features, knob) for knob in SIM_FEATURE_KNOBS})
    return knobs


def _checked_sim_features(engine: LLMEngine, changes: Mapping[str, Any]) -> SimFeatureKnobs | None:
    """The simulator's feature knobs after ``changes`` (None: they name none of them)."""
    asked = {k: v for k, v in changes.items() if k in SIM_FEATURE_KNOBS}
    if not asked:
        return None
    if engine.simulation is None:
        raise ConfigError(
            f"{', '.join(sorted(asked))}: a simulator knob; this engine runs a model "
            "(only a sim:<model>@<gpu> engine prices its features)"
        )
    return engine.simulation.features.knobs.changed(asked)


def _checked_delays(faults: DelayFaults, changes: Mapping[str, Any]) -> dict[str, float]:
    delays = {}
    for fault, limit in DELAY_FAULTS.items():
        delay = changes.get(fault, getattr(faults, fault))
        if isinstance(delay, bool) or not isinstance(delay, int | float):
            raise ConfigError(f"{fault}={delay!r}: must be a number of seconds")
        if not 0 <= delay <= limit:
            raise ConfigError(f"{fault}={delay}: must be between 0 and {limit}")
        delays[fault] = float(delay)
    return delays


def _checked_fail_steps(engine: LLMEngine, changes: Mapping[str, Any]) -> int:
    fail_steps = changes.get("fail_next_steps", engine.num_steps_to_fail)
    if isinstance(fail_steps, bool) or not isinstance(fail_steps, int):
        raise ConfigError(f"fail_next_steps={fail_steps!r}: must be a whole number of steps")
    if not 0 <= fail_steps <= MAX_FAIL_NEXT_STEPS:
        raise ConfigError(
            f"fail_next_steps={fail_steps}: must be between 0 and {MAX_FAIL_NEXT_STEPS}"
        )
    return fail_steps


def apply_knob_changes(
    engine: LLMEngine, faults: DelayFaults, admission: Admission, changes: Mapping[str, Any]
) -> list[KnobChange]:
    """Validate ``changes`` (knob → value) and apply them, all or nothing; call between two
    steps. Returns the changes that moved a value (a ``ConfigError`` naming the knob, and
    nothing applied, for a bad one)."""
    delays = _checked_delays(faults, changes)
    fail_steps = _checked_fail_steps(engine, changes)
    features = _checked_sim_features(engine, changes)
    limits = {k: v for k, v in changes.items() if k in ADMISSION_KNOBS}
    for knob, value in limits.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise ConfigError(f"{knob}={value!r}: must be a positive integer or null")
    knob_changes = {
        k: v
        for k, v in changes.items()
        if k not in FAULTS and k not in ADMISSION_KNOBS and k not in SIM_FEATURE_KNOBS
    }
    applied = engine.update_knobs(knob_changes) if knob_changes else []

    def moved(knob: str, old: Any, new: Any) -> KnobChange:
        return KnobChange(knob, old, new, engine.clock(), engine.wall_clock())

    # NOTE: set after everything validated (all or nothing); the served engine's admission
    # reads the int on the event loop, and one attribute store is atomic.
    for knob, value in limits.items():
        old = getattr(admission, knob)
        if value != old:
            setattr(admission, knob, value)
            applied.append(moved(knob, old, value))
    if fail_steps != engine.num_steps_to_fail:
        applied.append(moved("fail_next_steps", engine.num_steps_to_fail, fail_steps))
        engine.num_steps_to_fail = fail_steps
    for fault, delay in delays.items():
        if delay != getattr(faults, fault):
            applied.append(moved(fault, getattr(faults, fault), delay))
            setattr(faults, fault, delay)
    if features is not None and engine.simulation is not None:
        holder = engine.simulation.features
        for knob in SIM_FEATURE_KNOBS:
            old, new = getattr(holder.knobs, knob), getattr(features, knob)
            if old != new:
                applied.append(moved(knob, old, new))
        holder.knobs = features  # NOTE: replaced whole, between steps
    return applied
