"""``tailwatch rules export --format prometheus``: a rule set as a Prometheus rule file.

Recording rules first (one group of Sloth-style SLI ratios per SLO,
``tailwatch:slo_<name>:error_ratio_rate<w>``), then one group per rule with its own
recording rules and its alert. Each rule is preceded by a comment naming the engines whose
exposition holds every series it reads (``alerts/export/names.py``). Rules an engine cannot
express are listed, with the reason, in the file's header and in :attr:`Export.notes`: never
dropped silently.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import yaml

from alerts.export.console_records import console_records
from alerts.export.exprs import (
    PromRule,
    Unexportable,
    burn_rate_records,
    snapped_bound,
)
from alerts.export.names import EngineNames, engines_exposing
from alerts.kinds import KINDS
from alerts.rules.records import prom_duration
from alerts.rules.sli import LatencySLI
from alerts.rules.types import BurnRateRule
from collectors.dialect_rules import Dialect


@dataclass(frozen=True)
class Export:
    """Groups in file order, the rules that could not be exported (and the SLO notes), and
    the engine whose names were used."""

    dialect: Dialect
    groups: tuple[tuple[str, tuple[PromRule, ...]], ...]
    notes: tuple[str, ...]

    def alerts(self) -> list[PromRule]:
        return [r for _, rules in self.groups for r in rules if r.alert]

    def records(self) -> list[PromRule]:
        return [r for _, rules in self.groups for r in rules if r.record]

    def text(self) -> str:
        return render(self)


def export_rules(rule_set, dialect: Dialect = Dialect.VLLM, notes: Sequence[str] = ()) -> Export:
    """Every rule of ``rule_set`` as Prometheus rules on ``dialect``'s names."""
    names = EngineNames(dialect)
    groups: dict[str, list[PromRule]] = {}
    records: dict[str, tuple[str, tuple[tuple[str, str], ...]]] = {}
    out_notes = list(notes)

    def add(rules: list[PromRule]) -> None:
        """Add one rule's rows, or none of them when a recording rule name is taken."""

        def key(rule: PromRule) -> tuple[str, tuple[tuple[str, str], ...]]:
            return rule.expr, tuple(sorted(rule.labels.items()))

        for rule in rules:
            if rule.record and records.get(rule.record, key(rule)) != key(rule):
                raise ValueError(
                    f"{rule.record} is already recorded by another rule, with other "
                    "labels or another expression"
                )
        for rule in rules:
            if rule.record:
                if rule.record in records:
                    continue
                records[rule.record] = key(rule)
            groups.setdefault(rule.group, []).append(rule)

    burn = [r for r in rule_set if isinstance(r, BurnRateRule)]
    skipped_slos: set[str] = set()
    for slo in dict.fromkeys(r.slo for r in burn):
        of_slo = [r for r in burn if r.slo == slo]
        windows = tuple(sorted({w for r in of_slo for w in r.window_lengths_seconds()}))
        try:
            add(burn_rate_records(of_slo[0], names, windows))
        except Unexportable:
            continue  # NOTE: the SLO's alerts fail the same way below and are reported there
        except ValueError as error:  # two SLO names with one metric token, a sub-ms window
            skipped_slos.add(slo)
            out_notes.append(f"not exported: SLO {slo!r}: {error}")
            continue
        sli = of_slo[0].sli
        if isinstance(sli, LatencySLI):
            out_notes.append(
                f"SLO {slo!r}: measures {sli.metric.value} {snapped_bound(sli).describe()}"
            )
    for record in console_records(names):
        add([record])
    for rule in rule_set:
        if isinstance(rule, BurnRateRule) and rule.slo in skipped_slos:
            continue
        try:
            add(KINDS[type(rule)].export(rule, names))
        except Unexportable as error:
            out_notes.append(f"not exported: {error}")
        except ValueError as error:  # a window Prometheus cannot write (sub-millisecond)
            out_notes.append(f"not exported: rule {rule.name!r}: {error}")
    return Export(dialect, tuple((g, tuple(rs)) for g, rs in groups.items()), tuple(out_notes))


class _Dumper(yaml.SafeDumper):
    """Multi-line expressions as literal blocks, so the file reads like hand-written rules."""


def _str(dumper: yaml.SafeDumper, data: str) -> yaml.Node:
    style = "|" if "\n" in data else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", data, style=style)


_Dumper.add_representer(str, _str)


def rule_mapping(rule: PromRule) -> dict[str, object]:
    """The rule as Prometheus's rule-file mapping."""
    body: dict[str, object] = {"record": rule.record} if rule.record else {"alert": rule.alert}
    body["expr"] = rule.expr
    if rule.alert and rule.for_seconds > 0:
        body["for"] = prom_duration(rule.for_seconds)
    if rule.alert and rule.keep_firing_for_seconds > 0:
        body["keep_firing_for"] = prom_duration(rule.keep_firing_for_seconds)
    if rule.labels:
        body["labels"] = dict(sorted(rule.labels.items()))
    if rule.annotations:
        body["annotations"] = dict(rule.annotations)
    return body


def render(export: Export) -> str:
    """The rule file's text: a header, then ``groups:`` with one comment per rule."""
    engine = export.dialect.value
    lines = [
        f"# Generated by `tailwatch rules export --format prometheus --engine {engine}`.",
        f"# Recording and alerting rules on {engine}'s metric names "
        "(collectors/dialect_rules.py); do not edit, re-export.",
    ]
    lines += [f"# {note}" for note in export.notes]
    lines.append("groups:")
    for name, rules in export.groups:
        lines.append(f"  - name: {name}")
        lines.append("    rules:")
        for rule in rules:
            lines.append(f"      # engines: {', '.join(engines_exposing(rule.sources))}")
            text = yaml.dump(
                [rule_mapping(rule)],
                Dumper=_Dumper,
                sort_keys=False,
                allow_unicode=True,
                width=1_000_000,  # NOTE: never fold an expression onto two lines
            )
            lines += ["      " + line if line else line for line in text.rstrip("\n").split("\n")]
    return "\n".join(lines) + "\n"
