"""The SLO burn-rate rule: multi-window multi-burn-rate over one SLO and one severity, rows
from ``slo/budget.py``'s workbook tables (``alerts/rules/builtin.py`` builds them from
``slos:``)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from alerts.errors import RuleError
from alerts.rules.base import Rule, check_number, duration_text
from alerts.rules.sli import SLI, ErrorSLI, LatencySLI
from slo import BurnRateCheck, BurnRateWindow, Selector, evaluate_burn_rates


@dataclass(frozen=True, kw_only=True)
class BurnRateRule(Rule):
    """Multi-window multi-burn-rate over one SLO and one severity: fire when any row's long and
    short error ratios both exceed ``row.burn_rate_factor * (1 - target)``."""

    kind: ClassVar[str] = "slo-burn-rate"

    slo: str
    sli: SLI
    target: float
    windows: tuple[BurnRateWindow, ...]
    selector: Selector = field(default_factory=Selector)

    def check(self) -> None:
        check_number(self.name, "target", self.target, low=0, high=1, low_open=True, high_open=True)
        if not isinstance(self.sli, LatencySLI | ErrorSLI):
            raise RuleError(self.name, "sli", f"must be a latency or error SLI, got {self.sli!r}")
        if not self.windows or any(w.severity != self.severity for w in self.windows):
            raise RuleError(self.name, "windows", f"needs rows of severity {self.severity!r}")

    def families(self) -> tuple[str, ...]:
        return self.sli.families

    def alert_labels(self) -> dict[str, str]:
        return {**super().alert_labels(), "slo": self.slo}

    def template_values(self) -> dict[str, object]:
        """Adds ``budget_percent``, ``period_days`` and ``rows`` ("2% of the budget within
        1h; ...") to the fields."""
        rows = "; ".join(
            f"{w.budget_fraction:.0%} of the budget within {duration_text(w.long_window_seconds)}"
            for w in self.windows
        )
        period_days = self.windows[0].period_seconds / 86400 if self.windows else 0.0
        return {
            **super().template_values(),
            "budget_percent": (1 - self.target) * 100,
            "period_days": period_days,
            "rows": rows,
        }

    def evaluate(self, error_ratios: Mapping[float, float]) -> tuple[BurnRateCheck, ...]:
        """``slo.evaluate_burn_rates`` over this rule's rows, with error ratios keyed by window
        length in seconds (:meth:`window_lengths_seconds`); the rule fires when any check
        does. NaN ratios (no traffic) never fire."""
        return evaluate_burn_rates(error_ratios, self.target, self.windows)

    def window_lengths_seconds(self) -> tuple[float, ...]:
        """Every window the rows read, short and long, ascending, each once."""
        lengths = {w.long_window_seconds for w in self.windows}
        lengths |= {w.short_window_seconds for w in self.windows}
        return tuple(sorted(lengths))

    def lookback_seconds(self) -> float:
        # NOTE: the shortest long window: any firing row's burn began within it
        return min(w.long_window_seconds for w in self.windows)

    def scaled(self, factor: float) -> BurnRateRule:
        base = super().scaled(factor)
        assert isinstance(base, BurnRateRule)
        # NOTE: the period scales too, which keeps every row's burn-rate factor.
        rows = tuple(
            replace(
                w,
                long_window_seconds=w.long_window_seconds * factor,
                short_window_seconds=w.short_window_seconds * factor,
                period_seconds=w.period_seconds * factor,
            )
            for w in self.windows
        )
        return replace(base, windows=rows)
