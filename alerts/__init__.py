"""Tailwatch's alerting: from a rule to a page and its triage (``docs/alerts.md``; the layout in
``docs/architecture.md``).

The core sits here (the alert model, labels and matchers, the lifecycle step, the evaluator and
its schedule, alert state, incidents, silences, inhibition, the table of rule kinds), with one
subpackage per concept: :mod:`alerts.rules`, :mod:`alerts.notify`, :mod:`alerts.export`,
:mod:`alerts.triage`, :mod:`alerts.views` and :mod:`alerts.sql`. Code outside ``alerts/``
imports through these ``__init__`` modules; inside, modules import each other by their full
path. This module also exports what reads :mod:`alerts.kinds` (the evaluator, the rule-file
export, the promtool tests, the backtest), since a subpackage's ``__init__`` may not."""

from alerts.backtest import (
    MAX_EVALUATIONS,
    Backtest,
    Firing,
    RuleBacktest,
    backtest,
    backtest_json,
    backtest_lines,
    evaluation_times,
)
from alerts.conventions import ALERTNAME, SEVERITY, SEVERITY_PAGE
from alerts.errors import (
    AcknowledgementError,
    AlertError,
    AlertsError,
    InhibitRuleError,
    LabelError,
    MatcherError,
    NotificationError,
    NotifierConfigError,
    RuleError,
    SilenceError,
)
from alerts.evaluator import EvaluationResult, Evaluator, rule_of
from alerts.export.promtool_tests import promtool_test_files
from alerts.export.rule_file import export_rules
from alerts.grouping import Explanation, group_fired, symptoms_of
from alerts.incidents import (
    MAX_ACK_BY,
    MAX_ACK_COMMENT,
    MAX_INCIDENT_ID,
    Acknowledgement,
    Incident,
    opener_of,
)
from alerts.inhibition import DEFAULT_INHIBIT_RULES, InhibitRule, inhibited_alerts, inhibited_by
from alerts.kinds import KINDS, RegistryError, RuleKind, check_registry, evaluate_rule
from alerts.labels import LabelSet, fingerprint, fingerprint_hex
from alerts.matchers import (
    Matcher,
    MatchType,
    format_matchers,
    matches_all,
    parse_matcher,
    parse_matchers,
)
from alerts.model import Alert, AlertState, unique_by_fingerprint
from alerts.notify.notifiers import AlertmanagerNotifier, Delivery, Notifier, WebhookNotifier
from alerts.notify.payloads import (
    AlertGroup,
    group_alerts,
    group_key,
    postable_alerts,
    postable_silence,
    valid_until_seconds,
    webhook_message,
)
from alerts.notify.retry import RetryPolicy, is_retryable_status
from alerts.rule_errors import EvaluationError, EvaluationHealth, RuleFailure
from alerts.schedule import Tick, due_tick, next_after, run_ticks, slot_seconds
from alerts.silences import Silence, SilenceState, silenced_alerts, silenced_by
from alerts.state import AlertStateStore, MemoryAlertState
from alerts.transitions import Notified, Transition
from alerts.vocabulary import ACTIONS, AlertName, Cause

__all__ = [
    "ACTIONS",
    "ALERTNAME",
    "DEFAULT_INHIBIT_RULES",
    "KINDS",
    "MAX_ACK_BY",
    "MAX_ACK_COMMENT",
    "MAX_EVALUATIONS",
    "MAX_INCIDENT_ID",
    "SEVERITY",
    "SEVERITY_PAGE",
    "Acknowledgement",
    "AcknowledgementError",
    "Alert",
    "AlertError",
    "AlertGroup",
    "AlertName",
    "AlertState",
    "AlertStateStore",
    "AlertmanagerNotifier",
    "AlertsError",
    "Backtest",
    "Cause",
    "Delivery",
    "EvaluationError",
    "EvaluationHealth",
    "EvaluationResult",
    "Evaluator",
    "Explanation",
    "Firing",
    "Incident",
    "InhibitRule",
    "InhibitRuleError",
    "LabelError",
    "LabelSet",
    "MatchType",
    "Matcher",
    "MatcherError",
    "MemoryAlertState",
    "NotificationError",
    "Notified",
    "Notifier",
    "NotifierConfigError",
    "RegistryError",
    "RetryPolicy",
    "RuleBacktest",
    "RuleError",
    "RuleFailure",
    "RuleKind",
    "Silence",
    "SilenceError",
    "SilenceState",
    "Tick",
    "Transition",
    "WebhookNotifier",
    "backtest",
    "backtest_json",
    "backtest_lines",
    "check_registry",
    "due_tick",
    "evaluate_rule",
    "evaluation_times",
    "export_rules",
    "fingerprint",
    "fingerprint_hex",
    "format_matchers",
    "group_alerts",
    "group_fired",
    "group_key",
    "inhibited_alerts",
    "inhibited_by",
    "is_retryable_status",
    "matches_all",
    "next_after",
    "opener_of",
    "parse_matcher",
    "parse_matchers",
    "postable_alerts",
    "postable_silence",
    "promtool_test_files",
    "rule_of",
    "run_ticks",
    "silenced_alerts",
    "silenced_by",
    "slot_seconds",
    "symptoms_of",
    "unique_by_fingerprint",
    "valid_until_seconds",
    "webhook_message",
]
