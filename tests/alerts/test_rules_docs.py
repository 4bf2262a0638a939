"""docs/alerts.md stays true: its config example loads and exports, and its built-in table
lists every built-in rule with its severity and for:."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from alerts import export_rules
from alerts.export import prom_duration
from alerts.rules import BUILTIN_RULES, QueueGrowthRule, TailLatencyRule
from tailwatch.config import parse_config

DOC = Path(__file__).parents[2] / "docs" / "alerts.md"


def _example() -> dict:
    text = DOC.read_text(encoding="utf-8")
    block = re.search(
        r"<!-- alerts-config-example -->\n```yaml\n(.*?)```\n<!-- /alerts-config-example -->",
        text,
        re.S,
    )
    assert block, "the alerts config example is missing from docs/alerts.md"
    return yaml.safe_load(block.group(1))


def test_the_documented_config_example_loads_and_exports():
    config = parse_config(_example())
    rules = config.alerts.rules
    queue = rules.get("queue-growth")
    assert isinstance(queue, QueueGrowthRule) and queue.for_seconds == 60
    assert rules.get("gpu-health") is None
    tail = rules.get("e2e-tail")
    assert isinstance(tail, TailLatencyRule) and tail.window_seconds == 600
    assert rules.get("slo-burn-rate:chat-ttft:page").runbook == "https://wiki.example/slo"
    assert [n.kind for n in config.alerts.notifiers] == ["webhook", "alertmanager"]
    assert (config.alerts.evaluation_interval_seconds, config.alerts.in_collector) == (15, True)
    export = export_rules(rules, notes=config.alerts.notes)
    text = DOC.read_text(encoding="utf-8")
    wrote = re.search(r"wrote (\d+) recording and (\d+) alerting rules to rules.yml", text)
    found = re.search(r"SUCCESS: (\d+) rules found", text)
    assert wrote and found, "the export example's counts are missing from docs/alerts.md"
    counts = (len(export.records()), len(export.alerts()))
    assert counts == (int(wrote[1]), int(wrote[2])), f"the doc says {wrote[0]!r}: {counts}"
    assert sum(counts) == int(found[1])


def test_the_builtin_table_lists_every_builtin_rule():
    text = DOC.read_text(encoding="utf-8")
    text = text[text.index("### Built-in rules") : text.index("### Burn-rate rules from")]
    for rule in BUILTIN_RULES:
        row = next(
            (line for line in text.splitlines() if line.startswith(f"| `{rule.name}` |")), None
        )
        assert row is not None, rule.name
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells[1] == f"`{rule.alert}`" and cells[2] == rule.severity, row
        assert cells[-2] == prom_duration(rule.for_seconds), row
        keep = rule.keep_firing_for_seconds
        assert cells[-1] == (prom_duration(keep) if keep else "0"), row
