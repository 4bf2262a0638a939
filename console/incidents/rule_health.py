"""Whether alerting itself works, as the console warns about it: rules that failed at the last
evaluation (their alerts are stuck as they were) and a last evaluation older than ten minutes
(the evaluator may have stopped), from ``state.evaluation_health()`` (the same record as
``tailwatch alerts errors``). Pure over the health and ``now``; every stored string is
markdown-escaped, so a rule name or error text is shown as text."""

from __future__ import annotations

import time
from dataclasses import dataclass

from alerts import EvaluationHealth, RuleFailure
from alerts.views import STALE_EVALUATION_SECONDS, age
from console.page_kit import escape

#: The most failing rules listed one per line (the rest are counted).
MAX_LISTED = 10


def utc(seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds))


@dataclass(frozen=True)
class HealthProblems:
    """``failing``: the rules failing now; ``stale_seconds``: the last evaluation's age when
    it is over :data:`STALE_EVALUATION_SECONDS` (else ``None``)."""

    failing: tuple[RuleFailure, ...]
    stale_seconds: float | None
    last_evaluation_seconds: float | None

    @property
    def any(self) -> bool:
        return bool(self.failing) or self.stale_seconds is not None


def problems(health: EvaluationHealth, now: float) -> HealthProblems:
    last = health.last_evaluation_seconds
    stale = None if last is None or now - last <= STALE_EVALUATION_SECONDS else now - last
    return HealthProblems(health.failing, stale, last)


def headline(found: HealthProblems) -> str:
    """One markdown line for a page header (empty when alerting works)."""
    parts = []
    if found.failing:
        names = ", ".join(escape(f.rule) for f in found.failing[:3])
        more = f" and {len(found.failing) - 3} more" if len(found.failing) > 3 else ""
        parts.append(
            f"**{len(found.failing)} alert rule(s) failing** ({names}{more}): their alerts "
            "are not being updated."
        )
    if found.stale_seconds is not None:
        assert found.last_evaluation_seconds is not None
        parts.append(
            f"**Alerts are stale:** the last evaluation was {age(found.stale_seconds)} ago "
            f"({utc(found.last_evaluation_seconds)}); is `tailwatch alerts run` running?"
        )
    return " ".join(parts)


def failure_lines(found: HealthProblems, now: float) -> list[str]:
    """One markdown line per failing rule: name, error, since when and how often."""
    lines = [
        f"- **{escape(f.rule)}** — {escape(f.error_type)}: {escape(f.message)} — failing since "
        f"{utc(f.first_failed_seconds)} ({age(now - f.first_failed_seconds)} ago), "
        f"{f.num_failures} failed evaluation(s)"
        for f in found.failing[:MAX_LISTED]
    ]
    if len(found.failing) > MAX_LISTED:
        lines.append(f"- and {len(found.failing) - MAX_LISTED} more: `tailwatch alerts errors`")
    return lines
