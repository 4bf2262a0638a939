"""Error budgets, burn rates and multi-window multi-burn-rate (MWMB) alert evaluation.

Target ``T``, budget ``B = 1 - T``; error ratio ``E(w) = bad / total`` over a window ``w``;
burn rate ``E(w) / B`` (1 spends exactly the budget over the SLO period). An alert row fires
when the error ratio over *both* its long and short window exceeds ``factor * B``; rows of
one severity are ORed (Google SRE Workbook, "Alerting on SLOs", and
``shared/reference/prometheus-slo.md`` §3). Windows and budget fractions are data (the
tables below); each factor is derived from its fraction, in :func:`burn_rate_factor` only.
For a latency SLO the error ratio is the fraction of requests over the threshold,
``1 - objective_attainment(...)``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from slo.errors import SLOError

HOUR_SECONDS = 3600.0
DAY_SECONDS = 86400.0
# NOTE: 1 - target is not exact in binary (1 - 0.9999 < 1e-4), so an error ratio exactly at a
# row's threshold could fire or not depending on rounding. Ratios within this relative margin
# above the threshold count as "at" it and do not fire.
_THRESHOLD_RELATIVE_MARGIN = 1e-9


@dataclass(frozen=True)
class BurnRateWindow:
    """One MWMB row: fire when both windows burn faster than :attr:`burn_rate_factor`.

    The row is written as what it means, "``budget_fraction`` of the period's budget spent
    within the long window", and the factor is derived from it (:func:`burn_rate_factor`),
    so the two can never disagree. Scaling all three durations by one factor (compressed
    drills) keeps the factor.
    """

    severity: str
    long_window_seconds: float
    short_window_seconds: float
    budget_fraction: float
    period_seconds: float

    def __post_init__(self) -> None:
        durations = {
            "long_window_seconds": self.long_window_seconds,
            "short_window_seconds": self.short_window_seconds,
            "period_seconds": self.period_seconds,
        }
        for name, value in durations.items():
            if not (math.isfinite(value) and value > 0):
                raise SLOError(f"{self.severity} row: {name} must be positive, got {value}")
        if self.short_window_seconds > self.long_window_seconds:
            raise SLOError(
                f"{self.severity} row: the short window ({self.short_window_seconds:g} s) must "
                f"not exceed the long one ({self.long_window_seconds:g} s)"
            )
        if not 0 < self.budget_fraction <= 1:
            raise SLOError(
                f"{self.severity} row: budget_fraction must be in (0, 1], got "
                f"{self.budget_fraction}"
            )

    @property
    def burn_rate_factor(self) -> float:
        """The burn rate both windows must exceed: ``fraction * period / long_window``."""
        return burn_rate_factor(self.budget_fraction, self.period_seconds, self.long_window_seconds)


class BudgetPolicyRow(NamedTuple):
    """A row of a burn-rate policy before a period is chosen: severity, windows, fraction."""

    severity: str
    long_window_seconds: float
    short_window_seconds: float
    budget_fraction: float


#: SRE Workbook table 5-8 plus its 1d/2h ticket row (also Sloth's ``google-{28d,30d}.yaml``):
#: 2 % of the budget in 1 h, 5 % in 6 h, 10 % in 1 d and 10 % in 3 d; short = long / 12.
SRE_WORKBOOK_POLICY: tuple[BudgetPolicyRow, ...] = (
    BudgetPolicyRow("page", 1 * HOUR_SECONDS, 5 * 60.0, 0.02),
    BudgetPolicyRow("page", 6 * HOUR_SECONDS, 30 * 60.0, 0.05),
    BudgetPolicyRow("ticket", 1 * DAY_SECONDS, 2 * HOUR_SECONDS, 0.10),
    BudgetPolicyRow("ticket", 3 * DAY_SECONDS, 6 * HOUR_SECONDS, 0.10),
)


def burn_rate_table(
    policy: Sequence[BudgetPolicyRow], period_seconds: float
) -> tuple[BurnRateWindow, ...]:
    """The policy's rows over one SLO period, each with its factor derived from its fraction."""
    return tuple(BurnRateWindow(*row, period_seconds=period_seconds) for row in policy)


#: 30 days: factors 14.4, 6, 3, 1 (the Workbook's).
SRE_WORKBOOK_30D = burn_rate_table(SRE_WORKBOOK_POLICY, 30 * DAY_SECONDS)
#: 28 days: factors 13.44, 5.6, 2.8, 14/15 (Sloth's ``google-28d.yaml``).
SRE_WORKBOOK_28D = burn_rate_table(SRE_WORKBOOK_POLICY, 28 * DAY_SECONDS)


@dataclass(frozen=True)
class BurnRateCheck:
    """The evaluation of one row: the measured ratios and burn rates, and the verdict."""

    window: BurnRateWindow
    long_error_ratio: float
    short_error_ratio: float
    long_burn_rate: float
    short_burn_rate: float
    threshold_error_ratio: float
    is_firing: bool


def error_budget(target: float) -> float:
    """``1 - target`` for a target in (0, 1)."""
    if not 0 < target < 1:
        raise SLOError(f"target must be a fraction in (0, 1), got {target}")
    return 1.0 - target


def error_ratio(num_bad: float, num_total: float) -> float:
    """``bad / total``; NaN with no traffic (nothing is known, and NaN never fires)."""
    if num_bad < 0 or num_total < 0 or num_bad > num_total:
        raise SLOError(f"need 0 <= bad <= total, got bad={num_bad}, total={num_total}")
    return num_bad / num_total if num_total else math.nan


def burn_rate(ratio: float, target: float) -> float:
    """How fast the budget burns: ``error_ratio / (1 - target)``."""
    return ratio / error_budget(target)


def budget_remaining(num_bad: float, num_total: float, target: float) -> float:
    """Share of the period's budget left, ``1 - E(period) / B``; negative once overspent,
    1 with no traffic."""
    ratio = error_ratio(num_bad, num_total)
    return 1.0 if math.isnan(ratio) else 1.0 - burn_rate(ratio, target)


def budget_spent_fraction(rate: float, window_seconds: float, period_seconds: float) -> float:
    """Share of the budget a burn rate spends in a window: ``rate * window / period``."""
    return rate * window_seconds / period_seconds


def time_to_exhaustion_seconds(rate: float, period_seconds: float) -> float:
    """Time for a full budget to run out at ``rate``: ``period / rate`` (inf at 0)."""
    return math.inf if rate <= 0 else period_seconds / rate


def burn_rate_factor(
    budget_fraction: float, period_seconds: float, long_window_seconds: float
) -> float:
    """The burn rate that spends ``budget_fraction`` of the budget in ``long_window``:
    ``fraction * period / long_window`` (Workbook; Sloth's ``getBurnRateFactor``).

    The one place the factor is computed: the tables hold only fractions and windows.
    NOTE: evaluated as ``(fraction * period) / window``, which gives the published 13.44, 5.6,
    2.8 and 14/15 exactly, where ``fraction * (period / window)`` is one ulp off.
    """
    return budget_fraction * period_seconds / long_window_seconds


def burn_rate_windows(period_days: int) -> tuple[BurnRateWindow, ...]:
    """The workbook table for a 28- or 30-day period."""
    tables = {28: SRE_WORKBOOK_28D, 30: SRE_WORKBOOK_30D}
    if period_days not in tables:
        raise SLOError(f"no burn-rate table for {period_days} days; use 28 or 30")
    return tables[period_days]


def evaluate_burn_rates(
    error_ratios: Mapping[float, float],
    target: float,
    windows: Sequence[BurnRateWindow] = SRE_WORKBOOK_30D,
) -> tuple[BurnRateCheck, ...]:
    """Evaluate every row against error ratios keyed by window length in seconds.

    Raises :class:`SLOError` naming the missing window when a row's window has no ratio.
    NaN ratios (no traffic) never fire.
    """
    budget = error_budget(target)
    checks = []
    for window in windows:
        long_ratio = _ratio_for(error_ratios, window.long_window_seconds)
        short_ratio = _ratio_for(error_ratios, window.short_window_seconds)
        threshold = window.burn_rate_factor * budget
        limit = threshold * (1 + _THRESHOLD_RELATIVE_MARGIN)
        checks.append(
            BurnRateCheck(
                window=window,
                long_error_ratio=long_ratio,
                short_error_ratio=short_ratio,
                long_burn_rate=long_ratio / budget,
                short_burn_rate=short_ratio / budget,
                threshold_error_ratio=threshold,
                is_firing=long_ratio > limit and short_ratio > limit,
            )
        )
    return tuple(checks)


def firing_severities(checks: Sequence[BurnRateCheck]) -> tuple[str, ...]:
    """Severities with at least one firing row, in table order, each once."""
    return tuple(dict.fromkeys(c.window.severity for c in checks if c.is_firing))


def _ratio_for(error_ratios: Mapping[float, float], window_seconds: float) -> float:
    if window_seconds not in error_ratios:
        known = ", ".join(f"{w:g} s" for w in sorted(error_ratios)) or "none"
        raise SLOError(
            f"no error ratio for the {window_seconds:g} s window (given: {known}); compute "
            "the error ratio over every window of the burn-rate table"
        )
    return error_ratios[window_seconds]
