"""What ``tailwatch alerts errors`` shows, and the warning ``alerts list`` prints: the rules
that failed to evaluate (:class:`alerts.rule_errors.EvaluationHealth`), as plain dicts (the
``--json`` form), a rich table and one line. Pure over the stored health and ``now_seconds``."""

from __future__ import annotations

from typing import Any

from rich.table import Table
from rich.text import Text

from alerts.rule_errors import EvaluationHealth
from alerts.views.display import age, iso, printable

#: A last evaluation older than this in ``alerts list`` is worth a warning: the evaluator
#: (``tailwatch alerts run``) may have stopped.
STALE_EVALUATION_SECONDS = 600.0


def health_json(health: EvaluationHealth) -> dict[str, Any]:
    return {
        "last_evaluation": iso(health.last_evaluation_seconds),
        "failures": [
            {
                "rule": f.rule,
                "failing": health.is_failing(f),
                "error_type": f.error_type,
                "message": f.message,
                "first_failed": iso(f.first_failed_seconds),
                "last_failed": iso(f.last_failed_seconds),
                "num_failures": f.num_failures,
            }
            for f in health.failures
        ],
    }


def _when(seconds: float | None, now_seconds: float) -> str:
    return "never" if seconds is None else f"{iso(seconds)} ({age(now_seconds - seconds)} ago)"


def health_table(health: EvaluationHealth, now_seconds: float) -> Table:
    failing = len(health.failing)
    table = Table(
        title=f"{failing} rule(s) failing at the last evaluation, "
        f"{_when(health.last_evaluation_seconds, now_seconds)}"
    )
    table.add_column("rule", no_wrap=True)
    table.add_column("now", no_wrap=True)
    table.add_column("failures", justify="right", no_wrap=True)
    table.add_column("first failed", no_wrap=True)
    table.add_column("last failed", no_wrap=True)
    table.add_column("error", overflow="fold", ratio=1)
    for f in health.failures:
        table.add_row(
            Text(printable(f.rule)),
            Text("failing" if health.is_failing(f) else "works again"),
            Text(str(f.num_failures)),
            Text(iso(f.first_failed_seconds) or ""),
            Text(f"{age(now_seconds - f.last_failed_seconds)} ago"),
            Text(f"{printable(f.error_type)}: {printable(f.message)}"),
        )
    return table


def health_warnings(health: EvaluationHealth, now_seconds: float) -> list[str]:
    """The lines ``alerts list`` prints on stderr: failing rules, a stale last evaluation."""
    lines = []
    failing = health.failing
    if failing:
        names = ", ".join(printable(f.rule) for f in failing[:5])
        more = f" and {len(failing) - 5} more" if len(failing) > 5 else ""
        lines.append(
            f"warning: {len(failing)} rule(s) failed to evaluate at the last evaluation "
            f"({names}{more}): their alerts are not being updated; see `tailwatch alerts errors`"
        )
    last = health.last_evaluation_seconds
    if last is not None and now_seconds - last > STALE_EVALUATION_SECONDS:
        lines.append(
            f"warning: the last evaluation was saved {age(now_seconds - last)} ago "
            f"({iso(last)}); is `tailwatch alerts run` running?"
        )
    return lines
