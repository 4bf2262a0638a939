"""A backtest of the rules over a past window (``tailwatch rules backtest``; issue 24, item 2):
the real :class:`~alerts.evaluator.Evaluator` run at every evaluation time from ``start`` to
``end``, on a :class:`~alerts.state.MemoryAlertState` and no notifiers, over whatever
:class:`MetricsReader` the application reads (the store, or a Prometheus-compatible server
through the push-down reader). ``for:`` and ``keep_firing_for:`` therefore behave exactly as
live; nothing is saved and nobody is notified.

What comes back is, per rule, each interval it fired (start, end, severity, peak value,
labels), so a team sees how noisy a rule set is before switching it on. With ``triage``, each
firing also carries the cause and scope triage named when it fired (over what the reader held
by then, as the live evaluator's explainer does), so the team sees what the page would have
said. Pure over its arguments: the caller opens the reader and prints."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from alerts.conventions import ALERTNAME, SEVERITY
from alerts.evaluator import Evaluator, rule_of
from alerts.model import Alert, AlertState
from alerts.rules.base import Rule
from alerts.state import MemoryAlertState
from alerts.triage import triage_explainer
from alerts.views.display import age, iso, json_value, printable
from collectors.store.protocols import MetricsReader

#: The most evaluations one backtest runs: a window and step beyond it are refused.
MAX_EVALUATIONS = 100_000


@dataclass(frozen=True)
class Firing:
    """One interval an alert fired: from ``start`` (pending → firing) to ``end`` (the
    evaluation that resolved it; ``None`` while still firing at the window's end), the
    highest value it had while firing, and its labels (without alertname and severity).
    ``cause`` and ``scope``: triage's, when the backtest ran it and a cause stood out."""

    labels: Mapping[str, str]
    start: float
    end: float | None
    peak: float | None
    cause: str = ""
    scope: str = ""


@dataclass(frozen=True)
class RuleBacktest:
    """One rule's firings over the window, and how many of its evaluations failed (the
    first failure's message)."""

    rule: str
    alert: str
    severity: str
    firings: tuple[Firing, ...] = ()
    errors: int = 0
    first_error: str = ""


@dataclass(frozen=True)
class Backtest:
    start: float
    end: float
    step: float
    evaluations: int
    rules: tuple[RuleBacktest, ...] = field(default_factory=tuple)

    def counts(self) -> dict[str, int]:
        """Firings per severity (every severity a rule has, zeros included)."""
        counts = {r.severity: 0 for r in self.rules}
        for r in self.rules:
            counts[r.severity] += len(r.firings)
        return counts


def evaluation_times(
    start: float, end: float, step: float, limit: int = MAX_EVALUATIONS
) -> tuple[float, ...]:
    """``start``, ``start + step``, … up to and including ``end``; a ``ValueError`` naming
    the option for a window that is empty or backwards, a step that is not a positive number
    of seconds, or more than ``limit`` evaluations."""
    for flag, value in (("--from", start), ("--to", end)):
        if not math.isfinite(value):
            raise ValueError(f"{flag} {value!r}: must be a finite time")
    if not (math.isfinite(step) and step > 0):
        raise ValueError(f"--step {step!r}: must be a positive duration")
    if not start < end:
        raise ValueError(f"--from {iso(start)} is not before --to {iso(end)}")
    steps = (end - start) / step  # NOTE: infinite for a step of a few denormal seconds
    count = math.floor(steps + 1e-9) + 1 if math.isfinite(steps) else None
    if count is None or count > limit:
        shown = f"{count:,}" if count is not None else "countless"
        raise ValueError(
            f"{shown} evaluations from {iso(start)} to {iso(end)} every {step:g} s: more "
            f"than {limit:,}; shorten the window or raise --step"
        )
    return tuple(start + k * step for k in range(count))


def _shown(alert: Alert) -> dict[str, str]:
    return {k: v for k, v in sorted(alert.labels.items()) if k not in (ALERTNAME, SEVERITY)}


def _peak(peak: float | None, value: float | None) -> float | None:
    if value is None or math.isnan(value):
        return peak
    return value if peak is None or value > peak else peak


def backtest(
    rules: Iterable[Rule],
    reader: MetricsReader,
    start: float,
    end: float,
    step: float,
    *,
    triage: bool = False,
) -> Backtest:
    """Evaluate ``rules`` over ``reader`` at every time of :func:`evaluation_times` and
    collect each rule's firing intervals, with triage's cause when ``triage`` (see the module
    docstring)."""
    times = evaluation_times(start, end, step)
    rules = tuple(rules)
    state = MemoryAlertState()
    explain = triage_explainer(reader, None, state, rules) if triage else None
    evaluator = Evaluator(rules, reader, state, inhibit_rules=(), explain=explain)
    open_: dict[str, tuple[Rule, Firing]] = {}  # fingerprint → its rule and interval so far
    closed: dict[str, list[Firing]] = {r.name: [] for r in rules}
    errors: dict[str, list[str]] = {r.name: [] for r in rules}
    for now in times:
        result = evaluator.evaluate_once(now)
        for error in result.errors:
            errors.setdefault(error.rule, []).append(error.message)
        for alert in result.alerts:
            if alert.state is AlertState.PENDING:
                continue
            known = open_.get(alert.fingerprint)
            if alert.state is AlertState.FIRING:
                if known is None:
                    rule = rule_of(alert, rules)
                    if rule is None:  # NOTE: every alert here is raised by one of ``rules``
                        continue
                    began = alert.started_at_seconds
                    firing = Firing(_shown(alert), now if began is None else began, None, None)
                else:
                    rule, firing = known
                peak = _peak(firing.peak, alert.value)
                cause, scope = firing.cause or alert.cause, firing.scope or alert.cause_scope
                open_[alert.fingerprint] = (
                    rule,
                    Firing(firing.labels, firing.start, None, peak, cause, scope if cause else ""),
                )
            elif known is not None:  # resolved
                rule, firing = open_.pop(alert.fingerprint)
                ended = alert.ended_at_seconds
                closed[rule.name].append(replace(firing, end=now if ended is None else ended))
    for rule, firing in open_.values():
        closed[rule.name].append(firing)
    return Backtest(
        start,
        end,
        step,
        len(times),
        tuple(
            RuleBacktest(
                r.name,
                str(r.alert),
                r.severity,
                tuple(sorted(closed[r.name], key=lambda f: (f.start, sorted(f.labels.items())))),
                len(errors[r.name]),
                errors[r.name][0] if errors[r.name] else "",
            )
            for r in rules
        ),
    )


def _value(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _labels(labels: Mapping[str, str]) -> str:
    return ", ".join(f"{k}={printable(v)}" for k, v in labels.items()) or "(no labels)"


def backtest_lines(result: Backtest) -> list[str]:
    """What ``tailwatch rules backtest`` prints: a heading, then per rule its firings (or
    ``no alerts``), then the counts per severity."""
    lines = [
        f"backtest {iso(result.start)} → {iso(result.end)} every {age(result.step)}: "
        f"{result.evaluations:,} evaluations of {len(result.rules)} rules"
    ]
    for r in result.rules:
        head = f"{r.rule} ({r.alert}, {r.severity})"
        count = len(r.firings)
        lines.append(
            f"{head}: {count} firing{'s' if count != 1 else ''}" if count else f"{head}: no alerts"
        )
        for f in r.firings:
            end = "still firing" if f.end is None else iso(f.end)
            length = age((result.end if f.end is None else f.end) - f.start)
            cause = f"  cause: {printable(f.cause)} ({printable(f.scope)})" if f.cause else ""
            lines.append(
                f"  {iso(f.start)} → {end} ({length})  peak {_value(f.peak)}  "
                f"{_labels(f.labels)}{cause}"
            )
        if r.errors:
            lines.append(f"  {r.errors} evaluations failed; first: {printable(r.first_error)}")
    counts = ", ".join(f"{n} {severity}" for severity, n in sorted(result.counts().items()))
    fired = sum(1 for r in result.rules if r.firings)
    lines.append(f"total: {counts or 'no rules'}; {fired} of {len(result.rules)} rules fired")
    return lines


def backtest_json(result: Backtest) -> dict[str, Any]:
    """The backtest as JSON: times ISO 8601 UTC, values as ``alerts list --json`` gives them."""
    return {
        "from": iso(result.start),
        "to": iso(result.end),
        "step_seconds": result.step,
        "evaluations": result.evaluations,
        "counts": result.counts(),
        "rules": [
            {
                "rule": r.rule,
                "alert": r.alert,
                "severity": r.severity,
                "count": len(r.firings),
                "errors": r.errors,
                "first_error": r.first_error or None,
                "firings": [
                    {
                        "start": iso(f.start),
                        "end": iso(f.end),
                        "seconds": (result.end if f.end is None else f.end) - f.start,
                        "still_firing": f.end is None,
                        "peak": json_value(f.peak),
                        "labels": dict(f.labels),
                        "cause": f.cause or None,
                        "scope": f.scope or None,
                    }
                    for f in r.firings
                ],
            }
            for r in result.rules
        ],
    }
