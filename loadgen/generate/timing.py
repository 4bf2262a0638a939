"""How long a generated scenario's phases last, in units of the rule that should catch it.

An alert needs its window to fill with the incident, then its condition to hold for
``for:``, and an evaluation on each side to see it begin and hold: a perturbation shorter
than window + ``for:`` + two evaluation intervals cannot page however large it is. The
baseline lasts at least two windows, so a relative rule (``prefix-hit-drop`` compares the
window with the one before) has a past to compare with; the recovery at least one, so the
alert can resolve inside the run. The windows are the built-in rules' (``alerts``), scaled
as the virtual drill scales them (``VirtualTiming.window_scale``), read when a scenario is
generated: a rewritten rule set gives durations sized to the new windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from random import Random

from alerts.rules import BUILTIN_RULES
from loadgen.virtual.drill import VirtualTiming

#: A run past this many virtual seconds is cut (every phase shrunk alike) to bound the
#: simulation's cost; its ``generated.long_enough`` then says whether its rule could see it.
MAX_RUN_SECONDS = 600.0
_SLACK = 1e-6  # seconds: the rounding of durations to a tenth
#: A ramp sub-phase's length, in rule windows.
RAMP_WINDOWS = (0.25, 0.4)


@dataclass(frozen=True)
class RuleClock:
    """The timing of the rules that raise ``alert``, scaled: the longest window, ``for:``
    and baseline window among them (0 where none has one), and the evaluation interval."""

    alert: str
    window_seconds: float
    for_seconds: float
    baseline_window_seconds: float
    evaluation_interval_seconds: float

    def max_ramp_seconds(self, num_ramp_phases: int) -> float:
        """The longest ``num_ramp_phases`` ramp sub-phases can last together."""
        return num_ramp_phases * RAMP_WINDOWS[1] * self.window_seconds

    @property
    def min_perturbation_seconds(self) -> float:
        """window + ``for:`` + two evaluation intervals."""
        return self.window_seconds + self.for_seconds + 2 * self.evaluation_interval_seconds

    def as_mapping(self) -> dict[str, object]:
        return {
            "alert": str(self.alert),
            "window_seconds": self.window_seconds,
            "for_seconds": self.for_seconds,
            "baseline_window_seconds": self.baseline_window_seconds or None,
            "evaluation_interval_seconds": self.evaluation_interval_seconds,
            "min_perturbation_seconds": round(self.min_perturbation_seconds, 3),
        }


def rule_clock(alert: str, timing: VirtualTiming) -> RuleClock:
    """The clock of the built-in rules raising ``alert`` under ``timing``. NOTE: the longest
    of each figure, so a kind two rules can catch (tail latency on TTFT or on ITL) lasts
    long enough for the slower one."""
    rules = [r for r in BUILTIN_RULES if r.alert == alert]
    if not rules:
        raise ValueError(f"no built-in rule raises {alert!r}")
    scale = timing.window_scale
    return RuleClock(
        alert=str(alert),
        window_seconds=scale * max(float(getattr(r, "window_seconds", 0.0)) for r in rules),
        for_seconds=scale * max(r.for_seconds for r in rules),
        baseline_window_seconds=scale
        * max(float(getattr(r, "baseline_window_seconds", 0.0)) for r in rules),
        evaluation_interval_seconds=timing.evaluation_interval_seconds,
    )


@dataclass(frozen=True)
class Durations:
    """Phase lengths (virtual seconds): ``ramp`` is each ramp sub-phase's."""

    warmup: float
    baseline: float
    ramp: float
    perturbation: float
    recovery: float

    def as_mapping(self) -> dict[str, float]:
        return {k: round(v, 3) for k, v in self.__dict__.items()}


def draw_durations(
    rng: Random, clock: RuleClock, num_ramp_phases: int, warmup_seconds: float
) -> Durations:
    """Each phase at least its minimum (module docstring) times a draw from 1 to 1.25 (the
    baseline 2 to 2.5 windows; a ramp sub-phase 0.25 to 0.4 of one), rounded up to a tenth
    of a second; the whole cut to :data:`MAX_RUN_SECONDS` when it passes it. NOTE: the
    spread is narrow because a virtual second costs CPU (mostly the scrapes' parsing)."""
    window = clock.window_seconds
    durations = Durations(
        warmup=warmup_seconds,
        baseline=rng.uniform(1.0, 1.25) * min_baseline_seconds(clock, warmup_seconds),
        ramp=rng.uniform(*RAMP_WINDOWS) * window,
        perturbation=rng.uniform(1.0, 1.25) * clock.min_perturbation_seconds,
        recovery=rng.uniform(1.0, 1.25) * window,
    )
    total = total_seconds(durations, num_ramp_phases)
    scale = min(1.0, MAX_RUN_SECONDS / total) if total > 0 else 1.0
    return Durations(*(_tenth(v * scale) for v in durations.__dict__.values()))


def total_seconds(durations: Durations, num_ramp_phases: int) -> float:
    d = durations
    return d.warmup + d.baseline + num_ramp_phases * d.ramp + d.perturbation + d.recovery


def min_baseline_seconds(clock: RuleClock, warmup_seconds: float) -> float:
    """The shortest baseline: two windows, and more than the warm-up and the incident's
    first window, ``for:`` and two evaluations together: the relative rules compare with
    the median of their windows over the past (``alerts.rules.baseline``), which in a run
    this short holds the warm-up's cold windows and the incident's own; the baseline's
    must outnumber them while the rule could first fire."""
    return max(2 * clock.window_seconds, warmup_seconds + clock.min_perturbation_seconds)


def long_enough(durations: Durations, clock: RuleClock) -> bool:
    """Whether the rule could page on this run: the perturbation (at full magnitude) holds
    window + ``for:`` + two evaluations, the baseline :func:`min_baseline_seconds`, the
    recovery a window."""
    return (
        durations.perturbation >= clock.min_perturbation_seconds - _SLACK
        and durations.baseline >= min_baseline_seconds(clock, durations.warmup) - _SLACK
        and durations.recovery >= clock.window_seconds - _SLACK
    )


def _tenth(seconds: float) -> float:
    # NOTE: up, not to nearest, so a duration drawn at its minimum stays at it (less a
    # float's dust: 0.1 x 300 is 30.000000000000004)
    return math.ceil(seconds * 10 - 1e-6) / 10
