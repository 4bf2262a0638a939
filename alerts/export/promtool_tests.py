"""``promtool test rules`` files for an export: every exported alert fires on synthetic series
and stays silent on clean ones, with exact labels and annotations; recording rules are checked
with exact values (``alerts/export/promtool_cases.py`` builds the inputs).

Alerts sharing an alert name are tested together, since promtool compares every firing alert
of the name: the burn-rate rules of one SLO (page and ticket), and all metric-absent alerts.
"""

from __future__ import annotations

from collections.abc import Sequence

import yaml

from alerts.export.exprs import PromRule
from alerts.export.names import EngineNames
from alerts.export.promtool_series import Case, CaseError
from alerts.export.rule_file import Export
from alerts.kinds import KINDS
from alerts.rules.records import metric_token, prom_duration
from alerts.rules.types import BurnRateRule, MetricAbsentRule


def _exp_alert(labels: dict[str, str], annotations: dict[str, str]) -> dict[str, object]:
    return {"exp_labels": dict(sorted(labels.items())), "exp_annotations": dict(annotations)}


def _test_file(
    rules_file: str,
    title: str,
    alertname: str,
    case: Case,
    annotations: dict[str, str],
) -> str:
    interval = prom_duration(case.interval_seconds)
    at = prom_duration(case.eval_seconds)
    silent_times = sorted({case.eval_seconds * k / 4 for k in (1, 2, 3, 4)})
    firing = {
        "name": f"{title} fires",
        "interval": interval,
        "input_series": [{"series": s, "values": v} for s, v in case.firing],
        "alert_rule_test": [
            {
                "eval_time": at,
                "alertname": alertname,
                "exp_alerts": [
                    _exp_alert(labels, case.annotations[i] if case.annotations else annotations)
                    for i, labels in enumerate(case.expected)
                ],
            }
        ],
    }
    if case.records:
        firing["promql_expr_test"] = [
            {
                "expr": expr,
                "eval_time": prom_duration(when),
                "exp_samples": [{"labels": labels, "value": value} for labels, value in samples],
            }
            for expr, when, samples in case.records
        ]
    clean = {
        "name": f"{title} stays silent on clean series",
        "interval": interval,
        "input_series": [{"series": s, "values": v} for s, v in case.clean],
        "alert_rule_test": [
            {"eval_time": prom_duration(t), "alertname": alertname, "exp_alerts": []}
            for t in silent_times
        ],
    }
    document = {
        "rule_files": [rules_file],
        "evaluation_interval": interval,
        "tests": [firing, clean],
    }
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, width=1_000_000)


def promtool_test_files(
    export: Export, rule_set: Sequence[object], rules_file: str = "rules.yml"
) -> tuple[dict[str, str], tuple[str, ...]]:
    """``{file name: text}`` of promtool test files for every alert in ``export``, and a note
    for each alert no synthetic input could be built for (with the reason)."""
    names = EngineNames(export.dialect)
    by_name = {r.name: r for r in rule_set}  # type: ignore[attr-defined]
    files: dict[str, str] = {}
    notes: list[str] = []
    alerts = export.alerts()
    done_slos: set[str] = set()
    absent = [a for a in alerts if isinstance(by_name.get(a.rule), MetricAbsentRule)]
    for alert in alerts:
        rule = by_name[alert.rule]
        try:
            if isinstance(rule, BurnRateRule):
                if rule.slo in done_slos:
                    continue
                done_slos.add(rule.slo)
                of_slo = [
                    by_name[a.rule]
                    for a in alerts
                    if isinstance(by_name[a.rule], BurnRateRule) and by_name[a.rule].slo == rule.slo
                ]
                case = KINDS[BurnRateRule].promtool_case(of_slo, names)
                title = f"slo {rule.slo} burn rate"
            elif isinstance(rule, MetricAbsentRule):
                if alert is not absent[0]:
                    continue
                case = _all_absent(rule, names, absent)
                title = "metric absent"
            else:
                case = KINDS[type(rule)].promtool_case(rule, names, alert)
                title = rule.name
        except CaseError as error:
            notes.append(f"no promtool test: {error}")
            continue
        file_name = f"{metric_token(title.replace(' ', '-'))}.test.yml"
        files[file_name] = _test_file(rules_file, title, alert.alert, case, alert.annotations)
    return files, tuple(notes)


def _all_absent(rule: MetricAbsentRule, names: EngineNames, alerts: list[PromRule]) -> Case:
    """Every metric-absent alert fires when only unrelated series exist; none when all do."""
    cases = [KINDS[MetricAbsentRule].promtool_case(rule, names, a) for a in alerts]
    first = cases[0]
    clean = list(dict.fromkeys(s for case in cases for s in case.clean))
    expected = [case.expected[0] for case in cases]
    return Case(
        first.firing, clean, first.eval_seconds, expected, interval_seconds=first.interval_seconds
    )
