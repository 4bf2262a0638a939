"""The exceptions ``alerts`` raises.

Every error is a ``ValueError`` (the inputs were wrong, not the program) except
:class:`NotificationError`, which reports a receiver that could not be reached or refused a
notification. Messages say what was wrong, with which value, and what to do about it.
"""

from __future__ import annotations


class AlertsError(ValueError):
    """Base class of the input errors raised by ``alerts``."""


class LabelError(AlertsError):
    """A label or annotation set is invalid. ``field`` names it (``labels``,
    ``annotations``, ``equal``, ...) and ``name`` the offending label name."""

    def __init__(self, field: str, name: str, problem: str) -> None:
        super().__init__(f"{field}: label {name!r}: {problem}")
        self.field = field
        self.name = name
        self.problem = problem


class AlertError(AlertsError):
    """An alert's fields contradict each other (a firing alert without a start, a resolved one
    that ends before it started). ``field`` names the field at fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"alert field {field!r}: {problem}")
        self.field = field
        self.problem = problem


class MatcherError(AlertsError):
    """A label matcher could not be parsed or compiled. ``text`` is the matcher as written."""

    def __init__(self, text: str, problem: str) -> None:
        super().__init__(f"matcher {text!r}: {problem}")
        self.text = text
        self.problem = problem


class SilenceError(AlertsError):
    """A silence is invalid. ``field`` names the field at fault."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"silence field {field!r}: {problem}")
        self.field = field
        self.problem = problem


class AcknowledgementError(AlertsError):
    """An incident cannot be acknowledged or unacknowledged as asked: a field is invalid
    (``field`` names it: ``by``, ``comment``, ``at_seconds``), or the incident is unknown,
    resolved, or (to unacknowledge) not acknowledged (``field`` is ``incident``)."""

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(
            problem if field == "incident" else f"acknowledgement field {field!r}: {problem}"
        )
        self.field = field
        self.problem = problem


class InhibitRuleError(AlertsError):
    """An inhibit rule is invalid. ``rule`` is its name, ``field`` the field at fault."""

    def __init__(self, rule: str, field: str, problem: str) -> None:
        super().__init__(f"inhibit rule {rule!r}, field {field!r}: {problem}")
        self.rule = rule
        self.field = field
        self.problem = problem


class NotifierConfigError(AlertsError):
    """A notifier was configured with an invalid value (URL, timeout, retry policy)."""


class NotificationError(RuntimeError):
    """A notification was not delivered. ``receiver`` is the URL posted to, ``attempts`` how
    many requests were made, ``is_retryable`` whether the last failure was one that is retried
    (connection error, timeout, 5xx, 429) — False for a 4xx refusal, which retrying cannot
    fix. ``status_code`` is the last HTTP status, None when no response came back."""

    def __init__(
        self,
        message: str,
        receiver: str,
        attempts: int,
        is_retryable: bool,
        status_code: int | None = None,
    ) -> None:
        super().__init__(message)
        self.receiver = receiver
        self.attempts = attempts
        self.is_retryable = is_retryable
        self.status_code = status_code


class RuleError(AlertsError):
    """An alert rule is invalid. ``rule`` is its name, ``field`` the field at fault, spelled
    as in ``tailwatch.yaml`` (``for``, ``threshold_seconds``, ...)."""

    def __init__(self, rule: str, field: str, problem: str) -> None:
        super().__init__(f"rule {rule!r}, field {field!r}: {problem}")
        self.rule = rule
        self.field = field
        self.problem = problem
