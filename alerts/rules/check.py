"""``tailwatch rules check``: which rules read a family that has series on no target.

A rule whose series exist nowhere can never fire: the metric-name drift every anchor ships
(a renamed metric after an engine upgrade, a dialect the collector does not map). Reads only
:meth:`collectors.store.protocols.MetricsReader.series`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple, Protocol

from alerts.rules.types import Rule, TargetDownRule


class SeriesReader(Protocol):
    """The one method of ``MetricsReader`` this check needs."""

    def series(self, family: str, labels: None = None) -> list: ...


class RuleCheck(NamedTuple):
    """A rule and the families it reads that no target has (empty: the rule can fire)."""

    rule: str
    alert: str
    missing_families: tuple[str, ...]


def check_rules(rules: Iterable[Rule], reader: SeriesReader) -> list[RuleCheck]:
    """Every rule with the families it reads that have no series, in rule order; each family
    is looked up once. Target-down reads scrape status, not a family, and is never missing."""
    present: dict[str, bool] = {}
    out = []
    for rule in rules:
        if isinstance(rule, TargetDownRule):
            out.append(RuleCheck(rule.name, rule.alert, ()))
            continue
        missing = []
        for family in rule.families():
            if family not in present:
                present[family] = bool(reader.series(family))
            if not present[family]:
                missing.append(family)
        out.append(RuleCheck(rule.name, rule.alert, tuple(missing)))
    return out
