"""Every rule kind in one table: its rule type, its evaluation over the store, its PromQL export
and its ``promtool test rules`` case, one :class:`RuleKind` entry each.

The evaluator (:func:`evaluate_rule`), the rule-file export (:mod:`alerts.export.rule_file`) and
the promtool tests (:mod:`alerts.export.promtool_tests`) all look a rule up here, and the
``alerts:`` config parses the kinds of :data:`alerts.rules.types.RULE_KINDS`. The table is
checked when this module is imported: an entry missing a piece, a kind of ``RULE_KINDS`` without
an entry, or an entry for a type ``RULE_KINDS`` does not name raises :class:`RegistryError`, so a
new kind cannot reach a tick, an export or a promtool run half-built.

A new kind: its dataclass in :mod:`alerts.rules.types` (and ``RULE_KINDS``), its evaluation in
:mod:`alerts.rules.evaluate` (or ``evaluate_replica``), its PromQL in
:mod:`alerts.export.exprs` (raising :class:`~alerts.export.promql_text.Unexportable` with the
reason where no engine can express it), its case in :mod:`alerts.export.promtool_cases`, and a
row here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import Any

from alerts.errors import RuleError
from alerts.export import client_gap, exprs, promtool_cases
from alerts.export.names import EngineNames
from alerts.export.promql_text import PromRule
from alerts.export.promtool_series import Case
from alerts.export.slo import burn_rate_alert
from alerts.rules import evaluate, evaluate_gap, evaluate_replica
from alerts.rules.base import Rule
from alerts.rules.burn_rate import BurnRateRule
from alerts.rules.read import Instance
from alerts.rules.types import (
    RULE_KINDS,
    ClientGapRule,
    ErrorRateRule,
    GPUHealthRule,
    KVSaturationRule,
    MetricAbsentRule,
    PrefixHitDropRule,
    QueueGrowthRule,
    RatioShiftRule,
    ReplicaImbalanceRule,
    TailLatencyRule,
    TargetDownRule,
)
from collectors.store.protocols import MetricsReader

__all__ = ["KINDS", "RegistryError", "RuleKind", "check_registry", "evaluate_rule", "kind_of"]


class RegistryError(TypeError):
    """The table of rule kinds is incomplete: a programming error, raised at import."""


@dataclass(frozen=True)
class RuleKind:
    """One rule kind, whole.

    - ``rule``: the frozen dataclass (its ``kind`` is the name under ``alerts.rules``);
    - ``evaluate(rule, reader, now)``: the alert expression's output vector at ``now``;
    - ``export(rule, names)``: its Prometheus recording and alerting rules on one engine's names;
    - ``promtool_case``: the synthetic input that makes its exported alert fire and stay silent
      (``(rule, names, alert)``; the burn-rate case takes all of one SLO's rules at once,
      ``(rules, names)``). It raises ``CaseError`` where there is nothing to test.
    """

    rule: type[Rule]
    evaluate: Callable[[Any, MetricsReader, float], list[Instance]]
    export: Callable[[Any, EngineNames], list[PromRule]]
    promtool_case: Callable[..., Case]

    def __post_init__(self) -> None:
        if not (isinstance(self.rule, type) and issubclass(self.rule, Rule)):
            raise RegistryError(f"RuleKind.rule must be a Rule subclass, not {self.rule!r}")
        for piece in fields(self)[1:]:
            if not callable(getattr(self, piece.name)):
                raise RegistryError(f"rule kind {self.rule.kind!r} has no {piece.name}")

    @property
    def name(self) -> str:
        return self.rule.kind


def check_registry(
    entries: Iterable[RuleKind], kinds: Mapping[str, type[Rule]] = RULE_KINDS
) -> Mapping[type[Rule], RuleKind]:
    """``entries`` by rule type, read-only, once every kind of ``kinds`` has exactly one entry
    and every entry a kind; :class:`RegistryError` naming what is missing otherwise."""
    table: dict[type[Rule], RuleKind] = {}
    for entry in entries:
        if entry.rule in table:
            raise RegistryError(f"rule kind {entry.name!r} has two entries")
        table[entry.rule] = entry
    missing = sorted(name for name, rule in kinds.items() if rule not in table)
    if missing:
        raise RegistryError(f"rule kinds without an entry in alerts.kinds: {', '.join(missing)}")
    unknown = sorted(e.name for rule, e in table.items() if kinds.get(rule.kind) is not rule)
    if unknown:
        raise RegistryError(f"entries for kinds RULE_KINDS does not name: {', '.join(unknown)}")
    return MappingProxyType(table)


#: Every rule kind, by rule type.
KINDS: Mapping[type[Rule], RuleKind] = check_registry(
    (
        RuleKind(
            BurnRateRule,
            evaluate.burn_rate,
            burn_rate_alert,
            promtool_cases.burn_rate_case,
        ),
        RuleKind(
            TailLatencyRule,
            evaluate.tail_latency,
            exprs.tail_latency,
            promtool_cases.tail_latency_case,
        ),
        RuleKind(
            QueueGrowthRule,
            evaluate.queue_growth,
            exprs.queue_growth,
            promtool_cases.queue_growth_case,
        ),
        RuleKind(
            KVSaturationRule,
            evaluate_replica.kv_saturation,
            exprs.kv_saturation,
            promtool_cases.kv_saturation_case,
        ),
        RuleKind(
            PrefixHitDropRule,
            evaluate.prefix_hit_drop,
            exprs.prefix_hit_drop,
            promtool_cases.prefix_hit_drop_case,
        ),
        RuleKind(
            ReplicaImbalanceRule,
            evaluate_replica.replica_imbalance,
            exprs.replica_imbalance,
            promtool_cases.replica_imbalance_case,
        ),
        RuleKind(
            ErrorRateRule,
            evaluate.error_rate,
            exprs.error_rate,
            promtool_cases.error_rate_case,
        ),
        RuleKind(
            TargetDownRule,
            evaluate_replica.target_down,
            exprs.target_down,
            promtool_cases.target_down_case,
        ),
        RuleKind(
            GPUHealthRule,
            evaluate_replica.gpu_health,
            exprs.gpu_health,
            promtool_cases.gpu_health_case,
        ),
        RuleKind(
            MetricAbsentRule,
            evaluate.metric_absent,
            exprs.metric_absent,
            promtool_cases.metric_absent_case,
        ),
        RuleKind(
            RatioShiftRule,
            evaluate.ratio_shift,
            exprs.ratio_shift,
            promtool_cases.ratio_shift_case,
        ),
        RuleKind(
            ClientGapRule,
            evaluate_gap.client_gap,
            client_gap.client_gap,
            client_gap.client_gap_case,
        ),
    )
)


def kind_of(rule: Rule) -> RuleKind:
    """``rule``'s entry; a :class:`RuleError` for a type outside the table (a subclass made
    outside :mod:`alerts.rules.types`)."""
    entry = KINDS.get(type(rule))
    if entry is None:
        raise RuleError(rule.name, "kind", f"no evaluation for kind {rule.kind!r}")
    return entry


def evaluate_rule(rule: Rule, reader: MetricsReader, now: float) -> list[Instance]:
    """The output vector of ``rule``'s expression at ``now``. Raises what the reads raise
    (``LayoutChangeError``, ``LayoutMismatchError``, ``SemanticsMismatchError``) and a
    :class:`RuleError` for a rule kind without an evaluation."""
    return kind_of(rule).evaluate(rule, reader, now)
