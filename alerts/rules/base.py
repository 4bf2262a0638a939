"""What every alert rule shares: name, alert, severity, labels, annotations, ``for:`` and
``keep_firing_for:``; validation that names the rule and the field; and scaling.

The kinds are in ``alerts/rules/types.py``; every duration is seconds and every window field ends in
``window_seconds``, so :meth:`Rule.scaled` compresses any kind for tests and drills.
"""

from __future__ import annotations

import enum
import math
import re
from dataclasses import dataclass, field, fields, replace
from typing import Any, ClassVar

from alerts.conventions import (
    DESCRIPTION,
    RUNBOOK,
    SEVERITY,
    SEVERITY_PAGE,
    SEVERITY_TICKET,
    SUMMARY,
)
from alerts.errors import LabelError, RuleError
from alerts.labels import LabelSet

SEVERITIES = (SEVERITY_PAGE, SEVERITY_TICKET)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
#: Dataclass field → the key ``tailwatch.yaml`` spells it with (and errors name).
CONFIG_KEYS = {"for_seconds": "for", "keep_firing_for_seconds": "keep_firing_for"}
#: The longest window or ``for:`` a rule may have: ten years (Prometheus's durations end near
#: 292 years; nothing meaningful is longer than a decade).
MAX_DURATION_SECONDS = 10 * 365 * 86400.0
#: Labels a rule's ``labels`` may not set: the alert's identity fields of their own.
RESERVED_LABELS = ("alertname", SEVERITY)


_TEXT_FIELDS = ("summary", "description", "runbook")


def duration_text(seconds: float) -> str:
    """Seconds for people: ``300`` → ``5m``, ``5400`` → ``1h30m``, ``2.5`` → ``2.5s``."""
    if seconds >= 60 and seconds == int(seconds):
        whole = int(seconds)
        text = ""
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
            count, whole = divmod(whole, size)
            if count:
                text += f"{count}{unit}"
        return text
    return f"{seconds:g}s"


def config_key(field_name: str) -> str:
    return CONFIG_KEYS.get(field_name, field_name)


def check_number(
    rule: str,
    field_name: str,
    value: Any,
    *,
    low: float = 0.0,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = False,
) -> float:
    """``value`` as a float if it is a finite number in the range, else a :class:`RuleError`
    naming the rule and the field (as the config spells it)."""
    key = config_key(field_name)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleError(rule, key, f"must be a number, got {value!r}")
    try:
        number = float(value)
    except OverflowError:
        raise RuleError(rule, key, f"must be a finite number, got {value!r}") from None
    if not math.isfinite(number):
        raise RuleError(rule, key, f"must be a finite number, got {value!r}")
    too_low = number <= low if low_open else number < low
    too_high = number >= high if high_open else number > high
    if too_low or too_high:
        left = "(" if low_open else "["
        right = ")" if high_open else "]"
        raise RuleError(rule, key, f"must be in {left}{low:g}, {high:g}{right}, got {value!r}")
    return number


@dataclass(frozen=True, kw_only=True)
class Rule:
    """What every kind shares (see the module docstring)."""

    kind: ClassVar[str] = ""

    name: str
    alert: str
    severity: str = SEVERITY_TICKET
    labels: LabelSet = field(default_factory=LabelSet)
    summary: str = ""
    description: str = ""
    runbook: str = ""
    for_seconds: float = 0.0
    keep_firing_for_seconds: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise RuleError(
                str(self.name),
                "name",
                "must be letters, digits and _ . : - (starting with a letter or digit)",
            )
        object.__setattr__(self, "name", str(self.name))  # an AlertName is stored as text
        for key in ("alert", "summary", "description", "runbook"):
            if not isinstance(getattr(self, key), str):
                raise RuleError(self.name, key, f"must be a string, got {getattr(self, key)!r}")
            object.__setattr__(self, key, str(getattr(self, key)))
        if not _NAME.fullmatch(self.alert):
            raise RuleError(self.name, "alert", f"not a valid alert name: {self.alert!r}")
        if self.severity not in SEVERITIES:
            raise RuleError(
                self.name, "severity", f"must be one of {list(SEVERITIES)}, got {self.severity!r}"
            )
        try:
            labels = LabelSet.coerce(self.labels, "labels")
        except LabelError as error:
            raise RuleError(self.name, "labels", str(error)) from None
        for reserved in RESERVED_LABELS:
            if reserved in labels:
                raise RuleError(self.name, f"labels.{reserved}", "is set by the rule itself")
        object.__setattr__(self, "labels", labels)
        for key in ("for_seconds", "keep_firing_for_seconds"):
            seconds = check_number(self.name, key, getattr(self, key), high=MAX_DURATION_SECONDS)
            object.__setattr__(self, key, seconds)
        self.check()
        self.annotations()  # NOTE: a placeholder that names no field fails here, not at send

    def template_values(self) -> dict[str, Any]:
        """What annotation text may name in braces (``{threshold_seconds:g}``): the rule's
        number, text and enum fields, and each ``*window_seconds`` as text without the suffix
        (``window``: ``5m``)."""
        values: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, enum.Enum):
                value = value.value
            if isinstance(value, int | float | str) and f.name not in _TEXT_FIELDS:
                values[f.name] = value
        for name in list(values):
            if name.endswith("window_seconds"):
                values[name.removesuffix("_seconds")] = duration_text(values[name])
        return values

    def check(self) -> None:
        """The kind's own validation (thresholds, windows)."""

    def families(self) -> tuple[str, ...]:
        """The canonical families this rule reads."""
        return ()

    def alert_labels(self) -> dict[str, str]:
        """The labels every alert of this rule carries (series labels come on top)."""
        return {**self.labels, SEVERITY: self.severity}

    def annotations(self) -> dict[str, str]:
        """``summary``, ``description`` and ``runbook`` with their placeholders filled in from
        :meth:`template_values` (``{{`` and ``}}`` are literal braces); empty ones left out."""
        values = self.template_values()
        out = {}
        for key, text in ((SUMMARY, self.summary), (DESCRIPTION, self.description), (RUNBOOK, self.runbook)):  # fmt: skip
            if not text:
                continue
            try:
                out[key] = text.format_map(values)
            except KeyError as error:
                name = error.args[0]
                if name in {f.name for f in fields(self)}:
                    raise RuleError(
                        self.name,
                        key,
                        f"{{{name}}} is not set on this rule (null); set it or leave it out of the text",
                    ) from None
                known = ", ".join(sorted(values))
                raise RuleError(self.name, key, f"{{{name}}} names no field; known: {known}") from None  # fmt: skip
            except (ValueError, IndexError, AttributeError, TypeError) as error:
                raise RuleError(
                    self.name, key, f"{error} (write {{{{ and }}}} for literal braces)"
                ) from None
        return out

    def lookback_seconds(self) -> float:
        """How far before the condition first held the data that made it hold reaches (the
        rule's window): triage's incident window starts that much earlier, and its baseline
        ends there, so the onset is never part of the baseline."""
        return float(getattr(self, "window_seconds", 0.0))

    def scaled(self, factor: float) -> Rule:
        """This rule with every window and ``for:`` multiplied by ``factor`` (> 0)."""
        check_number(self.name, "scale", factor, low=0, low_open=True)
        changes: dict[str, Any] = {}
        for f in fields(self):
            if f.name.endswith("window_seconds") or f.name in CONFIG_KEYS:
                changes[f.name] = getattr(self, f.name) * factor
        return replace(self, **changes)
