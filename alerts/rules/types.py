"""Alert rules as data: one frozen dataclass per kind, validated when built.

Every rule has a ``name`` (unique in a rule set; the key under ``alerts.rules`` in
``tailwatch.yaml``), the ``alert`` it raises (its ``alertname``, one of
:class:`alerts.vocabulary.AlertName` for the built-ins), a ``severity``, extra ``labels``,
the annotations ``summary``, ``description`` and ``runbook``, and ``for_seconds`` /
``keep_firing_for_seconds`` (Prometheus's ``for:`` and ``keep_firing_for:``). The kinds add
their thresholds and windows. Every duration is seconds, and every window field ends in
``window_seconds``, so :meth:`Rule.scaled` can compress a rule for tests and drills.

:meth:`Rule.families` says which canonical families a rule reads: what ``metric absent`` and
``tailwatch rules check`` look for. What the conditions mean is in ``docs/alerts.md``; the
evaluator (not here) and the Prometheus export (``alerts/export*.py``) implement them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

from alerts.errors import LabelError, RuleError
from alerts.labels import LabelSet
from alerts.rules.base import (
    MAX_DURATION_SECONDS,
    SEVERITIES,
    Rule,
    check_number,
    config_key,
)
from alerts.rules.burn_rate import BurnRateRule
from alerts.rules.client_gap import ClientGapRule
from alerts.rules.sli import LATENCY_FAMILIES, ErrorSLI
from collectors import canonical as c
from slo import (
    ErrorRatioIndicator,
    LatencyMetric,
)


def _window(rule: Rule, name: str) -> float:
    return check_number(
        rule.name, name, getattr(rule, name), low=0, low_open=True, high=MAX_DURATION_SECONDS
    )


def _optional(rule: Rule, name: str, **bounds: float | bool) -> None:
    """``check_number`` for a field that may be ``None`` (the condition is off)."""
    if getattr(rule, name) is not None:
        check_number(rule.name, name, getattr(rule, name), **bounds)  # type: ignore[arg-type]


def _times(value: float | None) -> str:
    return "" if value is None else f"{value:g}x"


#: How a tail rule weighs the load (``TailLatencyRule.load``): ``beyond`` holds only for a
#: rise more than ``rise_min`` times what the load's own rise explains; ``within`` only for
#: a rise the load explains (the twin that tickets it).
TAIL_LOADS = ("beyond", "within")


@dataclass(frozen=True, kw_only=True)
class TailLatencyRule(Rule):
    """ "Median fine, tail broken", against the fleet's own past: the ``quantile`` of
    ``metric`` over the window is more than ``rise_min`` times its value over the baseline
    window just before it (``baseline_window_seconds``, ending where the window starts)
    while the median rose at most ``median_rise_max`` times, both windows holding at least
    ``min_observations`` observations (fewer than 1 / (1 - quantile) and the "p99" is just
    the slowest one: one hiccup would page).

    ``threshold_seconds`` and ``median_max_seconds`` add absolute conditions (the tail above,
    the median at most), for teams that want a fixed line; ``rise_min`` and
    ``median_rise_max`` set to ``None`` leave only those. ``tail_max_seconds`` (the tail at
    most) makes the rule for a rise that stays inside an SLO (:func:`alerts.rules.builtin.
    slo_severities`). Every condition set must hold.

    ``load`` weighs the rise against the load, read from the same histogram: its
    observations over the window against the median of the baseline windows' (requests for
    TTFT, decoded tokens for ITL). ``beyond``: the tail must rise ``rise_min`` times over its
    baseline scaled by that load rise (at least 1), so traffic that doubled within capacity
    and took the tail 1.5x with it is not a tail incident; ``within``: only a rise the load
    explains (above ``rise_min`` times the baseline, at most that scaled by the load rise),
    the ticket twin of a ``beyond`` page. Both need ``rise_min``."""

    kind: ClassVar[str] = "tail-latency"

    metric: LatencyMetric
    quantile: float = 0.99
    rise_min: float | None = 2.0
    median_rise_max: float | None = 1.5
    threshold_seconds: float | None = None
    median_max_seconds: float | None = None
    tail_max_seconds: float | None = None
    load: str | None = None
    min_observations: float = 100.0
    window_seconds: float = 300.0
    baseline_window_seconds: float = 3600.0

    def check(self) -> None:
        if self.metric not in LATENCY_FAMILIES:
            known = [m.value for m in LATENCY_FAMILIES]
            raise RuleError(self.name, "metric", f"must be one of {known}, got {self.metric!r}")
        check_number(self.name, "quantile", self.quantile, low=0.5, high=1, low_open=True, high_open=True)  # fmt: skip
        _optional(self, "rise_min", low=1, low_open=True)
        _optional(self, "median_rise_max", low=1)
        _optional(self, "threshold_seconds", low=0, low_open=True)
        _optional(self, "median_max_seconds", low=0, low_open=True)
        _optional(self, "tail_max_seconds", low=0, low_open=True)
        if self.rise_min is None and self.threshold_seconds is None:
            raise RuleError(
                self.name,
                "rise_min",
                "the tail needs a test: a rise over its baseline (rise_min) or a fixed line "
                "(threshold_seconds)",
            )
        if self.load is not None:
            if not isinstance(self.load, str) or self.load not in TAIL_LOADS:
                raise RuleError(self.name, "load", f"must be one of {list(TAIL_LOADS)} or null, got {self.load!r}")  # fmt: skip
            if self.rise_min is None:
                raise RuleError(
                    self.name,
                    "load",
                    "weighs the tail's rise against the load's, so it needs rise_min",
                )
        check_number(self.name, "min_observations", self.min_observations)
        _window(self, "window_seconds")
        _window(self, "baseline_window_seconds")

    @property
    def is_relative(self) -> bool:
        """Whether a condition reads the baseline window."""
        return self.rise_min is not None or self.median_rise_max is not None

    def families(self) -> tuple[str, ...]:
        return (LATENCY_FAMILIES[self.metric],)

    def template_values(self) -> dict[str, object]:
        """Adds ``percentile`` (``p99``), ``tail_percent`` (1 for p99) and ``condition``:
        the conditions set, in words (annotations read the same whichever are)."""
        values = super().template_values()
        percentile = f"p{self.quantile * 100:g}"
        baseline = values["baseline_window"]
        tail, median = [], []
        if self.rise_min is not None:
            tail.append(f"above {_times(self.rise_min)} its {baseline} baseline")
        if self.load == "beyond":
            tail[-1] += " scaled by the load's rise"
        elif self.load == "within":
            tail.append("within what the load's rise explains")
        if self.threshold_seconds is not None:
            tail.append(f"above {self.threshold_seconds:g} s")
        if self.tail_max_seconds is not None:
            tail.append(f"at most {self.tail_max_seconds:g} s")
        if self.median_rise_max is not None:
            median.append(f"within {_times(self.median_rise_max)} its baseline")
        if self.median_max_seconds is not None:
            median.append(f"at most {self.median_max_seconds:g} s")
        condition = f"{percentile} {' and '.join(tail)}"
        if median:
            condition += f" while p50 stays {' and '.join(median)}"
        return {
            **values,
            "percentile": percentile,
            "tail_percent": round((1 - self.quantile) * 100, 6),
            "condition": condition,
        }

    def alert_labels(self) -> dict[str, str]:
        return {**super().alert_labels(), "metric": self.metric.value}


@dataclass(frozen=True, kw_only=True)
class QueueGrowthRule(Rule):
    """Requests queue, against the fleet's own past: the mean queue time over the window is
    more than ``rise_min`` times its mean over the baseline window just before it, and
    queueing is at least ``queue_share_min`` of TTFT (``sum(queue) / sum(ttft)``: waiting,
    not prefill, is what first tokens are made of), over at least ``min_observations``
    queued requests in each window.

    Requests must also wait on every replica, not just in bursts: at least
    ``waiting_per_replica_min`` waiting per replica on average over the window (a queue
    that builds up, as arrivals above capacity make it; within capacity, bursts queue for a
    few milliseconds and are gone at the next scrape). ``waiting_min`` (the fleet's waiting
    requests now) and ``growth_min`` (their growth over the window) add absolute conditions;
    ``rise_min`` set to ``None`` drops the baseline."""

    kind: ClassVar[str] = "queue-growth"

    rise_min: float | None = 2.0
    queue_share_min: float = 0.5
    min_observations: float = 50.0
    waiting_per_replica_min: float | None = 1.0
    waiting_min: float | None = None
    growth_min: float | None = None
    window_seconds: float = 300.0
    baseline_window_seconds: float = 3600.0

    def check(self) -> None:
        _optional(self, "rise_min", low=1, low_open=True)
        check_number(self.name, "queue_share_min", self.queue_share_min, high=1, low_open=True, low=0)  # fmt: skip
        check_number(self.name, "min_observations", self.min_observations)
        _optional(self, "waiting_per_replica_min")
        _optional(self, "waiting_min")
        _optional(self, "growth_min", low=0, low_open=True)
        _window(self, "window_seconds")
        _window(self, "baseline_window_seconds")

    def families(self) -> tuple[str, ...]:
        return (c.REQUESTS_WAITING, c.QUEUE_SECONDS, c.TTFT_SECONDS)

    def template_values(self) -> dict[str, object]:
        """Adds ``condition``: the conditions set, in words."""
        values = super().template_values()
        parts = [f"queueing is at least {self.queue_share_min:.0%} of TTFT"]
        if self.rise_min is not None:
            parts.append(
                f"the mean queue time is above {_times(self.rise_min)} its "
                f"{values['baseline_window']} baseline"
            )
        if self.waiting_per_replica_min is not None:
            parts.append(f"at least {self.waiting_per_replica_min:g} wait per replica")
        if self.waiting_min is not None:
            parts.append(f"at least {self.waiting_min:g} requests wait")
        if self.growth_min is not None:
            parts.append(f"the queue grew by {self.growth_min:g}")
        return {**values, "condition": ", ".join(parts)}


@dataclass(frozen=True, kw_only=True)
class KVSaturationRule(Rule):
    """A replica's KV cache peaked at ``usage_min`` or more over the window while it
    preempted (recompute storms): at least ``preemptions_min`` preemptions in the window, at
    more than ``rise_min`` times its rate over the baseline window before it (a replica that
    never preempted before rises from zero). ``preemptions_per_second_min`` adds a fixed
    rate line."""

    kind: ClassVar[str] = "kv-saturation"

    usage_min: float = 0.9
    preemptions_min: float = 5.0
    rise_min: float | None = 2.0
    preemptions_per_second_min: float | None = None
    window_seconds: float = 300.0
    baseline_window_seconds: float = 3600.0

    def check(self) -> None:
        check_number(self.name, "usage_min", self.usage_min, low=0, high=1, low_open=True)
        check_number(self.name, "preemptions_min", self.preemptions_min)
        _optional(self, "rise_min", low=1, low_open=True)
        _optional(self, "preemptions_per_second_min")
        _window(self, "window_seconds")
        _window(self, "baseline_window_seconds")

    def families(self) -> tuple[str, ...]:
        return (c.KV_CACHE_USAGE, c.PREEMPTIONS_TOTAL)


@dataclass(frozen=True, kw_only=True)
class PrefixHitDropRule(Rule):
    """The fleet's prefix-cache hit rate over the window fell below ``ratio_max`` times its
    rate over the baseline window just before it, from a baseline of at least
    ``baseline_hit_rate_min``, with at least ``min_queries`` tokens looked up in each."""

    kind: ClassVar[str] = "prefix-hit-drop"

    ratio_max: float = 0.7
    baseline_hit_rate_min: float = 0.2
    min_queries: float = 1000.0
    window_seconds: float = 300.0
    baseline_window_seconds: float = 3600.0

    def check(self) -> None:
        check_number(self.name, "ratio_max", self.ratio_max, low=0, high=1, low_open=True, high_open=True)  # fmt: skip
        check_number(self.name, "baseline_hit_rate_min", self.baseline_hit_rate_min, high=1)
        check_number(self.name, "min_queries", self.min_queries)
        _window(self, "window_seconds")
        _window(self, "baseline_window_seconds")

    def families(self) -> tuple[str, ...]:
        return (c.PREFIX_CACHE_HITS_TOTAL, c.PREFIX_CACHE_QUERIES_TOTAL)


#: What a replica-imbalance rule compares: a replica's waiting queue, or the mean or the
#: median of its e2e latency or inter-token latency.
IMBALANCE_SIGNALS = ("waiting", "e2e_mean", "itl_mean", "e2e_p50", "itl_p50")
#: The histogram each latency signal reads (a mean is ``_sum / _count``, a p50 its median).
IMBALANCE_FAMILIES = {
    "e2e_mean": c.E2E_SECONDS,
    "itl_mean": c.ITL_SECONDS,
    "e2e_p50": c.E2E_SECONDS,
    "itl_p50": c.ITL_SECONDS,
}


@dataclass(frozen=True, kw_only=True)
class ReplicaImbalanceRule(Rule):
    """The fleet against itself: one replica's ``signal`` is more than ``ratio_min`` times
    the fleet median (itself included, as PromQL's ``quantile by (model)``), in a fleet of
    at least ``replicas_min`` replicas, each latency median over at least
    ``min_observations`` observations on that replica. ``excess_min`` (seconds or requests
    above the median) adds an absolute margin; 0 leaves it off."""

    kind: ClassVar[str] = "replica-imbalance"

    signal: str = "e2e_p50"
    ratio_min: float = 1.5
    excess_min: float = 0.0
    replicas_min: int = 3
    min_observations: float = 20.0
    window_seconds: float = 300.0

    def check(self) -> None:
        if self.signal not in IMBALANCE_SIGNALS:
            raise RuleError(
                self.name,
                "signal",
                f"must be one of {list(IMBALANCE_SIGNALS)}, got {self.signal!r}",
            )
        check_number(self.name, "ratio_min", self.ratio_min, low=1, low_open=True)
        check_number(self.name, "excess_min", self.excess_min)
        if isinstance(self.replicas_min, bool) or not isinstance(self.replicas_min, int):
            raise RuleError(self.name, "replicas_min", f"must be an integer, got {self.replicas_min!r}")  # fmt: skip
        check_number(self.name, "replicas_min", self.replicas_min, low=2, high=10_000)
        check_number(self.name, "min_observations", self.min_observations)
        _window(self, "window_seconds")

    def families(self) -> tuple[str, ...]:
        if self.signal == "waiting":
            return (c.REQUESTS_WAITING,)
        return (IMBALANCE_FAMILIES[self.signal],)

    def alert_labels(self) -> dict[str, str]:
        return {**super().alert_labels(), "signal": self.signal}


@dataclass(frozen=True, kw_only=True)
class ErrorRateRule(Rule):
    """The fleet's error ratio (``slo.outcomes``: errors, and 429s/``rejected`` unless load
    shedding is not counted) over the window is above ``ratio_max``."""

    kind: ClassVar[str] = "error-rate"

    indicator: ErrorRatioIndicator
    ratio_max: float = 0.05
    window_seconds: float = 300.0

    def check(self) -> None:
        if not isinstance(self.indicator, ErrorRatioIndicator):
            raise RuleError(self.name, "source", f"must be an error indicator, got {self.indicator!r}")  # fmt: skip
        check_number(self.name, "ratio_max", self.ratio_max, high=1, high_open=True)
        _window(self, "window_seconds")

    @property
    def sli(self) -> ErrorSLI:
        return ErrorSLI(self.indicator)

    def families(self) -> tuple[str, ...]:
        return self.sli.families


@dataclass(frozen=True, kw_only=True)
class TargetDownRule(Rule):
    """A target that served engine metrics failed its scrapes (Prometheus's ``up == 0``)."""

    kind: ClassVar[str] = "target-down"


#: NVML throttle reasons that mean trouble (``collectors/gpu.py``'s ``reason`` values);
#: ``sw_power_cap`` is left out: a busy GPU at its power limit is working as designed.
DEFAULT_THROTTLE_REASONS = (
    "hw_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "sw_thermal_slowdown",
)


@dataclass(frozen=True, kw_only=True)
class GPUHealthRule(Rule):
    """A GPU counted new uncorrected ECC errors over the window, or one of
    ``throttle_reasons`` holds its clocks down. Silent where no NVML data exists."""

    kind: ClassVar[str] = "gpu-health"

    throttle_reasons: tuple[str, ...] = DEFAULT_THROTTLE_REASONS
    window_seconds: float = 300.0

    def check(self) -> None:
        from collectors.gpu import THROTTLE_REASONS

        known = sorted(THROTTLE_REASONS.values())
        for reason in self.throttle_reasons:
            if reason not in known:
                raise RuleError(self.name, "throttle_reasons", f"{reason!r} is not one of {known}")
        _window(self, "window_seconds")

    def families(self) -> tuple[str, ...]:
        return (c.GPU_ECC_ERRORS_TOTAL, c.GPU_THROTTLE_ACTIVE)


@dataclass(frozen=True, kw_only=True)
class MetricAbsentRule(Rule):
    """A family the other rules read has series on no target (metric-name drift)."""

    kind: ClassVar[str] = "metric-absent"

    checked_families: tuple[str, ...] = ()

    def check(self) -> None:
        known = set(c.FAMILIES) | set(c.GPU_FAMILIES)
        for family in self.checked_families:
            if family not in known:
                raise RuleError(self.name, "checked_families", f"unknown family {family!r}")

    def families(self) -> tuple[str, ...]:
        return self.checked_families


#: Which way a ratio-shift rule watches its ratio move.
RATIO_DIRECTIONS = ("rise", "fall")


@dataclass(frozen=True, kw_only=True)
class RatioShiftRule(Rule):
    """A ratio of two counters' increases moved against the fleet's own past: per model,
    ``increase(numerator{numerator_matchers}) / increase(denominator{denominator_matchers})``
    over the window against the median of the same ratio over the baseline window before it
    (``alerts.rules.baseline``). ``direction: rise`` holds when the ratio is at least
    ``factor`` times its baseline (``factor`` > 1) and at least ``difference_min`` above it;
    ``fall`` when it is at most ``factor`` times its baseline (``factor`` < 1) and at least
    ``difference_min`` below it. The absolute floor keeps a ratio that moves from nothing
    (a 0.1 % share tripling) quiet. Each window, baseline ones included, needs at least
    ``min_denominator`` of the denominator's increase; a numerator with no series counts as
    0 (a finish reason no request has ended with yet).

    Generic: the length-finish share of requests (structured-output truncation) is one
    instance, the speculative-decoding acceptance rate (a fall) another."""

    kind: ClassVar[str] = "ratio-shift"

    numerator: str
    denominator: str
    numerator_matchers: LabelSet = field(default_factory=LabelSet)
    denominator_matchers: LabelSet = field(default_factory=LabelSet)
    direction: str = "rise"
    factor: float = 2.0
    difference_min: float = 0.05
    min_denominator: float = 50.0
    window_seconds: float = 300.0
    baseline_window_seconds: float = 3600.0

    def check(self) -> None:
        for key in ("numerator", "denominator"):
            family = getattr(self, key)
            if c.FAMILIES.get(family) is not c.Kind.COUNTER:
                counters = sorted(f for f, k in c.FAMILIES.items() if k is c.Kind.COUNTER)
                raise RuleError(self.name, key, f"must be a counter family, one of {counters}; got {family!r}")  # fmt: skip
        for key in ("numerator_matchers", "denominator_matchers"):
            try:
                object.__setattr__(self, key, LabelSet.coerce(getattr(self, key), key))
            except LabelError as error:
                raise RuleError(self.name, key, str(error)) from None
        if self.direction not in RATIO_DIRECTIONS:
            raise RuleError(self.name, "direction", f"must be one of {list(RATIO_DIRECTIONS)}, got {self.direction!r}")  # fmt: skip
        if self.direction == "rise":
            check_number(self.name, "factor", self.factor, low=1, low_open=True)
        else:
            check_number(self.name, "factor", self.factor, low=0, high=1, low_open=True, high_open=True)  # fmt: skip
        check_number(self.name, "difference_min", self.difference_min)
        check_number(self.name, "min_denominator", self.min_denominator)
        _window(self, "window_seconds")
        _window(self, "baseline_window_seconds")

    def families(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((self.numerator, self.denominator)))

    def template_values(self) -> dict[str, object]:
        """Adds ``condition``: the move watched, in words."""
        values = super().template_values()
        rise = self.direction == "rise"
        bound, way = ("at least", "above") if rise else ("at most", "below")
        condition = (
            f"{bound} {self.factor:g}x its {values['baseline_window']} baseline and at least "
            f"{self.difference_min:g} {way} it"
        )
        return {**values, "condition": condition}


RULE_KINDS: Mapping[str, type[Rule]] = {
    k.kind: k
    for k in (
        BurnRateRule,
        TailLatencyRule,
        QueueGrowthRule,
        KVSaturationRule,
        PrefixHitDropRule,
        ReplicaImbalanceRule,
        ErrorRateRule,
        TargetDownRule,
        GPUHealthRule,
        MetricAbsentRule,
        RatioShiftRule,
        ClientGapRule,
    )
}

__all__ = [
    "DEFAULT_THROTTLE_REASONS",
    "IMBALANCE_FAMILIES",
    "IMBALANCE_SIGNALS",
    "RATIO_DIRECTIONS",
    "RULE_KINDS",
    "SEVERITIES",
    "TAIL_LOADS",
    "BurnRateRule",
    "ClientGapRule",
    "ErrorRateRule",
    "GPUHealthRule",
    "KVSaturationRule",
    "MetricAbsentRule",
    "PrefixHitDropRule",
    "QueueGrowthRule",
    "RatioShiftRule",
    "ReplicaImbalanceRule",
    "Rule",
    "TailLatencyRule",
    "TargetDownRule",
    "check_number",
    "config_key",
]
