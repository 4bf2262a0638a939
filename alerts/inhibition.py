"""Inhibit rules: a firing *source* alert mutes *target* alerts that share the ``equal`` labels.

Semantics are Alertmanager's (``inhibit/inhibit.go``, ``Inhibitor.Mutes`` and ``hasEqual``):

- a rule applies to a target that matches ``target_matchers``;
- it is inhibited by any alert that matches ``source_matchers``, is firing (not pending, not
  resolved), and has the same value for every ``equal`` label, where an absent label reads as
  ``""`` (so two alerts that both lack the label count as equal);
- when the target itself matches ``source_matchers`` too, sources that also match
  ``target_matchers`` are skipped: an alert never inhibits itself, and two alerts that each
  match both sides do not inhibit each other.

The built-in rule (:data:`DEFAULT_INHIBIT_RULES`): a ``severity="ticket"`` alert is inhibited
by a firing ``severity="page"`` alert with the same ``slo`` label. Both sides must *have* an
``slo`` label (``slo=~".+"``): without that, Alertmanager's "absent equals absent" would let any
page mute every ticket that is not about an SLO. The alertname is deliberately not in
``equal``: a page for an SLO, from any rule (the fast burn-rate window, a tail-latency
incident), already has a human on that SLO, and the slow-burn ticket for it is noise until the
page resolves; inhibition is re-evaluated each time, so the ticket shows again once the page
clears while it still fires.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from alerts.conventions import SEVERITY, SEVERITY_PAGE, SEVERITY_TICKET, SLO
from alerts.errors import InhibitRuleError, LabelError, MatcherError
from alerts.labels import check_label_name
from alerts.matchers import Matcher, MatchType, matches_all, parse_matchers
from alerts.model import Alert, AlertState, unique_by_fingerprint


@dataclass(frozen=True)
class InhibitRule:
    """One inhibit rule. ``name`` only identifies it in errors and reports. Matchers may be
    given as matcher text (``'severity="page"'``)."""

    name: str
    source_matchers: tuple[Matcher, ...]
    target_matchers: tuple[Matcher, ...]
    equal: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InhibitRuleError(repr(self.name), "name", "must be a non-empty string")
        for side in ("source_matchers", "target_matchers"):
            value = getattr(self, side)
            try:
                matchers = parse_matchers(value) if isinstance(value, str) else tuple(value)
            except MatcherError as error:
                raise InhibitRuleError(self.name, side, str(error)) from None
            if not matchers or not all(isinstance(m, Matcher) for m in matchers):
                raise InhibitRuleError(
                    self.name, side, f"needs at least one matcher, got {value!r}"
                )
            object.__setattr__(self, side, matchers)
        equal = (self.equal,) if isinstance(self.equal, str) else tuple(self.equal)
        for label in equal:
            try:
                check_label_name("equal", label)
            except LabelError as error:
                raise InhibitRuleError(self.name, "equal", str(error)) from None
        if len(set(equal)) != len(equal):
            raise InhibitRuleError(self.name, "equal", f"lists a label twice: {equal!r}")
        object.__setattr__(self, "equal", equal)

    def is_target(self, alert: Alert) -> bool:
        return matches_all(self.target_matchers, alert.labels)

    def is_source(self, alert: Alert) -> bool:
        return matches_all(self.source_matchers, alert.labels)

    def inhibitor_of(self, target: Alert, alerts: Iterable[Alert]) -> Alert | None:
        """The first firing source among ``alerts`` that inhibits ``target`` under this rule,
        or None."""
        if not self.is_target(target):
            return None
        # NOTE: Alertmanager's excludeTwoSidedMatch: a target that is also a source may not be
        # inhibited by a source that is also a target (so never by itself).
        target_is_source = self.is_source(target)
        for source in alerts:
            if source.state is not AlertState.FIRING or not self.is_source(source):
                continue
            if any(source.labels.get_value(n) != target.labels.get_value(n) for n in self.equal):
                continue
            if target_is_source and self.is_target(source):
                continue
            return source
        return None


#: A ticket is inhibited by a firing page about the same SLO (see the module docstring).
DEFAULT_INHIBIT_RULES: tuple[InhibitRule, ...] = (
    InhibitRule(
        name="page-inhibits-ticket-for-same-slo",
        source_matchers=(
            Matcher(SEVERITY, MatchType.EQUAL, SEVERITY_PAGE),
            Matcher(SLO, MatchType.REGEX, ".+"),
        ),
        target_matchers=(
            Matcher(SEVERITY, MatchType.EQUAL, SEVERITY_TICKET),
            Matcher(SLO, MatchType.REGEX, ".+"),
        ),
        equal=(SLO,),
    ),
)


def inhibited_by(
    target: Alert, alerts: Sequence[Alert], rules: Iterable[InhibitRule] = DEFAULT_INHIBIT_RULES
) -> str | None:
    """The fingerprint of an alert that inhibits ``target``, or None (Alertmanager's
    ``status.inhibitedBy`` holds one such fingerprint)."""
    for rule in rules:
        source = rule.inhibitor_of(target, alerts)
        if source is not None:
            return source.fingerprint
    return None


def inhibited_alerts(
    alerts: Sequence[Alert], rules: Iterable[InhibitRule] = DEFAULT_INHIBIT_RULES
) -> dict[str, str]:
    """For each inhibited alert's fingerprint, the fingerprint of an alert inhibiting it.

    NOTE: O(alerts² × rules) — the firing set is small (tens), and Alertmanager's own
    ``hasEqual`` scans its source cache the same way."""
    rules = tuple(rules)
    alerts = unique_by_fingerprint(alerts)
    muted: dict[str, str] = {}
    for target in alerts:
        source = inhibited_by(target, alerts, rules)
        if source is not None:
            muted[target.fingerprint] = source
    return muted
