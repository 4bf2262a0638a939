"""Rules that failed to evaluate: the error of one evaluation (:class:`EvaluationError`) and
what the store keeps of them (:class:`RuleFailure`, one per rule: the latest error and a
count), so a rule that is silently broken shows in ``tailwatch alerts list`` and ``alerts
errors`` instead of only in the evaluator's log.

Bounded by design: one record per rule name, whatever the number of evaluations; retention
deletes the records of rules that have not failed for the retention period.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class EvaluationError:
    """A rule that could not be evaluated at ``at_seconds``, and why."""

    rule: str
    at_seconds: float
    error_type: str
    message: str


@dataclass(frozen=True)
class RuleFailure:
    """What the store keeps of a rule's failures: the latest error (``error_type``,
    ``message``, ``last_failed_seconds``), when the first recorded one was, and how many
    evaluations of the rule have failed since (``num_failures``)."""

    rule: str
    error_type: str
    message: str
    first_failed_seconds: float
    last_failed_seconds: float
    num_failures: int


@dataclass(frozen=True)
class EvaluationHealth:
    """The evaluator's health as stored: when it last saved an evaluation (``None``: never)
    and every rule's :class:`RuleFailure`, latest failure first."""

    last_evaluation_seconds: float | None
    failures: tuple[RuleFailure, ...]

    def is_failing(self, failure: RuleFailure) -> bool:
        """Whether ``failure``'s rule failed at the last saved evaluation (it is broken now,
        not only in the past)."""
        return (
            self.last_evaluation_seconds is not None
            and failure.last_failed_seconds >= self.last_evaluation_seconds
        )

    @property
    def failing(self) -> tuple[RuleFailure, ...]:
        return tuple(f for f in self.failures if self.is_failing(f))


def recorded(
    previous: Mapping[str, RuleFailure], errors: Sequence[EvaluationError]
) -> dict[str, RuleFailure]:
    """The records of the rules in ``errors`` after they are added to ``previous`` (by rule):
    the latest error replaces the text and time, the count goes up by one per error."""
    out: dict[str, RuleFailure] = {}
    for error in errors:
        before = out.get(error.rule) or previous.get(error.rule)
        out[error.rule] = RuleFailure(
            rule=error.rule,
            error_type=error.error_type,
            message=error.message,
            first_failed_seconds=(
                error.at_seconds
                if before is None
                else min(before.first_failed_seconds, error.at_seconds)
            ),
            last_failed_seconds=(
                error.at_seconds
                if before is None
                else max(before.last_failed_seconds, error.at_seconds)
            ),
            num_failures=1 if before is None else before.num_failures + 1,
        )
    return out


def latest_first(failures: Sequence[RuleFailure]) -> tuple[RuleFailure, ...]:
    return tuple(sorted(failures, key=lambda f: (-f.last_failed_seconds, f.rule)))
