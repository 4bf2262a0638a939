"""The pieces every exported rule is made of: :class:`PromRule`, PromQL quoting and
selectors, the engine-name reader that records which engine families a rule reads, and the
tokens recording-rule names are built from.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from alerts.export.names import EngineNames
from alerts.rules.base import Rule
from alerts.rules.records import metric_token
from collectors import canonical as c


class Unexportable(ValueError):
    """A rule that cannot be written on an engine's names; the message says why."""


@dataclass(frozen=True)
class PromRule:
    """One Prometheus rule: a recording rule (``record``) or an alerting rule (``alert``).
    ``sources`` are the engine families its expression reads (which engines it applies to)."""

    group: str
    expr: str
    record: str = ""
    alert: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    for_seconds: float = 0.0
    keep_firing_for_seconds: float = 0.0
    sources: tuple[str, ...] = ()
    rule: str = ""


def quote(value: str) -> str:
    """A PromQL double-quoted string."""
    return json.dumps(value, ensure_ascii=False)


def selector(metric: str, matchers: dict[str, str] | None = None, negative: str = "") -> str:
    """``metric{a="x",b=~"y"}``: keys ending in ``~`` are regex matchers."""
    parts = []
    for key, value in (matchers or {}).items():
        op = "=~" if key.endswith("~") else "="
        parts.append(f"{key.rstrip('~')}{op}{quote(value)}")
    if negative:
        parts.append(negative)
    return metric + ("{" + ",".join(parts) + "}" if parts else "")


class Reader:
    """Names for one rule on one engine; records which engine families were used."""

    def __init__(self, names: EngineNames, rule: Rule) -> None:
        self.names = names
        self.rule = rule
        self.sources: list[str] = []

    def metric(self, family: str, part: str = "", *, per_tenant: bool = False) -> str:
        name = self.names.metric(family, part, per_tenant=per_tenant)
        if name is None:
            what = f"per-tenant {family}" if per_tenant else family
            raise Unexportable(
                f"rule {self.rule.name!r}: {self.names.dialect.value} has no {what} "
                "(collectors/dialect_rules.py)"
            )
        source = self.names.tenant_source(family) if per_tenant else self.names.source(family)
        self.sources.append(source or "")
        return name

    def label(self, canonical: str) -> str:
        return self.names.label(canonical)

    def matchers(self, family: str) -> dict[str, str]:
        """The matchers that keep ``family``'s series to those the collector maps (the API's
        routes of ``http_responses_total``; ``EngineNames.matchers``)."""
        return self.names.matchers(family)

    def fleet(self) -> str:
        return self.label(c.LABEL_MODEL)

    def replica(self) -> str:
        return f"{self.label(c.LABEL_TARGET)}, {self.label(c.LABEL_MODEL)}"


def alert_rule(rule: Rule, reader: Reader, group: str, expr: str, **labels: str) -> PromRule:
    return PromRule(
        group=group,
        expr=expr,
        alert=rule.alert,
        labels={**rule.alert_labels(), **labels},
        annotations=rule.annotations(),
        for_seconds=rule.for_seconds,
        keep_firing_for_seconds=rule.keep_firing_for_seconds,
        sources=tuple(dict.fromkeys(reader.sources)),
        rule=rule.name,
    )


def record_rule(reader: Reader, group: str, name: str, expr: str, **labels: str) -> PromRule:
    return PromRule(
        group=group,
        expr=expr,
        record=name,
        labels=labels,
        sources=tuple(dict.fromkeys(reader.sources)),
        rule=reader.rule.name,
    )


def quantile_token(q: float) -> str:
    return "p" + f"{q * 100:g}".replace(".", "_")


def group_name(rule: Rule) -> str:
    return f"tailwatch-{metric_token(rule.name)}"
