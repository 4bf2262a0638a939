"""Alert rules as data: one frozen dataclass per kind, the built-in set, the ``alerts:`` section
of ``tailwatch.yaml``, and each kind's evaluation over a :class:`~collectors.store.MetricsReader`."""

from alerts.rules.base import Rule
from alerts.rules.builtin import (
    BUILTIN_RULES,
    INSIDE_SLO_SUFFIX,
    WITH_LOAD_SUFFIX,
    builtin_rule_set,
    metric_absent_rule,
    with_rules,
)
from alerts.rules.burn_rate import BurnRateRule
from alerts.rules.check import check_rules
from alerts.rules.config import AlertsConfig, load_alerts, parse_duration
from alerts.rules.evaluate import common_step, recorded_sli_ratios
from alerts.rules.sli import LATENCY_FAMILIES, ErrorSLI, LatencySLI, snap_threshold
from alerts.rules.types import RULE_KINDS, KVSaturationRule, QueueGrowthRule, TailLatencyRule

__all__ = [
    "BUILTIN_RULES",
    "INSIDE_SLO_SUFFIX",
    "LATENCY_FAMILIES",
    "RULE_KINDS",
    "WITH_LOAD_SUFFIX",
    "AlertsConfig",
    "BurnRateRule",
    "ErrorSLI",
    "KVSaturationRule",
    "LatencySLI",
    "QueueGrowthRule",
    "Rule",
    "TailLatencyRule",
    "builtin_rule_set",
    "check_rules",
    "common_step",
    "load_alerts",
    "metric_absent_rule",
    "parse_duration",
    "recorded_sli_ratios",
    "snap_threshold",
    "with_rules",
]
