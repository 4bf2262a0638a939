"""The Prometheus rule export: golden file, promtool check, and generated promtool tests that
prove every exported alert fires on synthetic series and stays silent on clean ones."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from alerts import export_rules, promtool_test_files
from alerts.export import EngineNames, engines_exposing, prom_duration
from collectors.dialect_rules import Dialect
from tailwatch.cli import app
from tailwatch.config import load_config
from tests.services import promtool_binary

FIXTURES = Path(__file__).parent / "fixtures" / "rules_export"
CONFIG = FIXTURES / "tailwatch.yaml"
GOLDEN = {
    Dialect.VLLM: FIXTURES / "vllm.rules.yml",
    Dialect.TAILWATCH: FIXTURES / "tailwatch.rules.yml",
}
UPDATE_ENV = "TAILWATCH_UPDATE_GOLDEN"


def _export(dialect: Dialect):
    settings = load_config(CONFIG)
    rules = settings.alerts.rules
    return export_rules(rules, dialect, settings.alerts.notes), rules


@pytest.mark.parametrize("dialect", list(GOLDEN))
def test_export_matches_the_golden_file(dialect):
    text = _export(dialect)[0].text()
    golden = GOLDEN[dialect]
    if os.environ.get(UPDATE_ENV) == "1":
        golden.write_text(text, encoding="utf-8")
    assert text == golden.read_text(encoding="utf-8"), (
        f"the export changed; review and regenerate with {UPDATE_ENV}=1"
    )


def test_export_uses_the_dialect_tables_names():
    names = EngineNames(Dialect.VLLM)
    assert names.metric("preemptions_total") == "vllm:num_preemptions_total"
    assert names.metric("ttft_seconds", "_bucket") == "vllm:time_to_first_token_seconds_bucket"
    assert names.metric("kv_cache_usage") == "vllm:kv_cache_usage_perc"
    assert names.metric("http_responses_total") is None
    assert EngineNames(Dialect.TAILWATCH).metric("http_responses_total") == (
        "tailwatch:http_responses_total"
    )
    assert engines_exposing(["vllm:num_preemptions"]) == ("tailwatch", "vllm")
    text = _export(Dialect.VLLM)[0].text()
    for name in (
        "vllm:time_to_first_token_seconds_bucket",
        "vllm:num_requests_waiting",
        "vllm:num_preemptions_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prefix_cache_queries_total",
        "vllm:kv_cache_usage_perc",
        "tailwatch:slo_chat_ttft:error_ratio_rate5m",
        'model_name="llama-3-8b"',
        'le="0.25"',
    ):
        assert name in text
    assert "vllm:num_preemptions[" not in text  # the name vLLM's own example gets wrong
    assert (
        "# SLO 'chat-ttft': measures ttft <= 0.25 s, the bucket edge below the threshold 0.3 s"
        in text
    )
    assert "# not exported: rule 'gpu-health'" in text
    assert "# not exported: rule 'http-errors': vllm has no http_responses_total" in text
    bundled = _export(Dialect.TAILWATCH)[0].text()
    # NOTE: the API's routes only, as the collector maps them (an engine before the handler
    # label has none, which "" matches): probes and scrapes never dilute the error rate
    api = 'handler=~"/v1/.*|"'
    assert f'tailwatch:http_responses_total{{{api},code=~"5[0-9][0-9]"}}[5m]' in bundled
    assert (
        "# not exported: rule 'slo-burn-rate:acme-ttft:page': vllm has no per-tenant "
        "ttft_seconds" in text
    )
    assert 'tailwatch:tenant_time_to_first_token_seconds_bucket{tenant="acme",le="1.0"}' in bundled
    assert (
        f'tailwatch:http_responses_total{{{api},code=~"[1-5][0-9][0-9]",code!~"429|499"}}'
        in bundled
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300, "5m"), (5400, "1h30m"), (86400 * 3, "3d"), (1.5, "1s500ms"), (3.0, "3s")],
)
def test_prom_duration(seconds, text):
    assert prom_duration(seconds) == text


@pytest.mark.parametrize("bad", [0, -1, float("nan"), float("inf"), 0.0001])
def test_prom_duration_refuses(bad):
    with pytest.raises(ValueError):
        prom_duration(bad)


def _promtool(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool_binary(), *args], cwd=cwd, capture_output=True, text=True, timeout=300
    )


def _write_export(folder: Path, dialect: Dialect):
    export, rules = _export(dialect)
    (folder / "rules.yml").write_text(export.text(), encoding="utf-8")
    files, notes = promtool_test_files(export, rules, "rules.yml")
    assert notes == ()
    for name, body in files.items():
        (folder / name).write_text(body, encoding="utf-8")
    return folder, export, files


@pytest.fixture(scope="module", params=list(GOLDEN), ids=lambda d: d.value)
def exported(request, tmp_path_factory):
    return _write_export(tmp_path_factory.mktemp("promtool"), request.param)


def test_promtool_check_accepts_the_export(exported):
    folder, export, _ = exported
    result = _promtool("check", "rules", "rules.yml", cwd=folder)
    assert result.returncode == 0, result.stdout + result.stderr
    count = len(export.records()) + len(export.alerts())
    assert f"SUCCESS: {count} rules found" in result.stdout


def test_every_exported_alert_has_a_promtool_test(exported):
    _, export, files = exported
    tested = set()
    for body in files.values():
        for test in yaml.safe_load(body)["tests"]:
            for check in test["alert_rule_test"]:
                if check["exp_alerts"]:
                    tested |= {
                        (*tuple(sorted(a["exp_labels"].items())), ("alertname", check["alertname"]))
                        for a in check["exp_alerts"]
                    }
    alerts = {(a.alert, tuple(sorted(a.labels.items()))) for a in export.alerts()}
    for name, labels in alerts:
        assert any(set(labels) <= set(t) and ("alertname", name) in t for t in tested), (
            name,
            labels,
        )


def test_promtool_tests_pass(exported):
    folder, _, files = exported
    result = _promtool("test", "rules", *sorted(files), cwd=folder)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert result.stdout.count("SUCCESS") == len(files)


def swapped_inputs(body: str) -> str:
    """A promtool test file (``promtool_test_files``) with its firing and clean cases'
    input series swapped: what makes every one of its assertions fail."""
    document = yaml.safe_load(body)
    firing, clean = document["tests"]
    firing["input_series"], clean["input_series"] = clean["input_series"], firing["input_series"]
    return yaml.safe_dump(document, sort_keys=False, width=1_000_000)


def test_promtool_tests_fail_when_inputs_are_swapped(tmp_path):
    """The tests can fail: with the firing and clean inputs swapped, every file fails."""
    _, _, files = _write_export(tmp_path, Dialect.VLLM)
    for name, body in files.items():
        (tmp_path / name).write_text(swapped_inputs(body))
    for name in sorted(files):
        result = _promtool("test", "rules", name, cwd=tmp_path)
        assert result.returncode == 1, (name, result.stdout, result.stderr[-2000:])
        assert "FAILED" in result.stdout + result.stderr, name


def test_cli_export_writes_the_file_and_tests(tmp_path):
    out = tmp_path / "rules.yml"
    tests_dir = tmp_path / "tests"
    tests_dir.mkdir()
    result = CliRunner().invoke(
        app,
        [
            "rules",
            "export",
            "--format",
            "prometheus",
            "--config",
            str(CONFIG),
            "--output",
            str(out),
            "--tests",
            str(tests_dir),
        ],
    )
    assert result.exit_code == 0, result.output
    assert out.read_text() == GOLDEN[Dialect.VLLM].read_text()
    assert "note: not exported: rule 'gpu-health'" in result.output
    written = sorted(p.name for p in tests_dir.iterdir())
    assert "kv_saturation.test.yml" in written
    assert yaml.safe_load((tests_dir / written[0]).read_text())["rule_files"] == ["../rules.yml"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--format", "thanos"], "error: --format='thanos': must be one of prometheus"),
        (["--engine", "tgi"], "error: --engine='tgi': must be one of vllm, tailwatch"),
        (["--output", "/nonexistent/dir/r.yml"], "error: --output /nonexistent/dir/r.yml:"),
        (["--tests", "."], "error: --tests: needs --output"),
    ],
)
def test_cli_export_user_errors_are_one_line(args, message):
    result = CliRunner().invoke(app, ["rules", "export", *args])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output


def test_cli_export_reports_a_bad_config(tmp_path):
    config = tmp_path / "tailwatch.yaml"
    config.write_text("alerts: {rules: {queue-growth: {for: soon}}}\n")
    result = CliRunner().invoke(app, ["rules", "export", "--config", str(config)])
    assert result.exit_code == 2
    assert "error: alerts: rule 'queue-growth', field 'for': " in result.output


@pytest.mark.parametrize("scale", [1e-300, 0.3333, 1e-4, 7.0, 1e6])
def test_any_window_scale_exports_or_reports_why_not(scale):
    from collectors.config import ConfigError
    from tailwatch.config import parse_config

    try:
        config = parse_config({"slos": [], "alerts": {"window_scale": scale}})
    except ConfigError as error:
        assert str(error).startswith("alerts: rule ")
        return
    export = export_rules(config.alerts.rules)
    exported = {r.rule for r in export.records() + export.alerts()}
    for rule in config.alerts.rules:
        assert rule.name in exported or any(rule.name in note for note in export.notes), rule.name


def test_two_slos_with_one_metric_token_are_reported_not_merged():
    from tailwatch.config import parse_config

    slo = {"indicator": {"errors": {"source": "requests"}}, "target": 0.99, "period_days": 30}
    config = parse_config({"slos": [{"name": "a-b", **slo}, {"name": "a_b", **slo}]})
    export = export_rules(config.alerts.rules)
    assert {a.labels.get("slo") for a in export.alerts() if a.alert == "slo-burn-rate"} == {"a-b"}
    assert any(note.startswith("not exported: SLO 'a_b': ") for note in export.notes)


@settings(max_examples=60, deadline=None)
@given(
    rule=st.sampled_from(
        [
            "queue-growth",
            "kv-saturation",
            "prefix-hit-drop",
            "replica-imbalance",
            "replica-imbalance-waiting",
            "error-rate",
            "tail-latency-ttft",
            "tail-latency-itl",
        ]
    ),
    key=st.sampled_from(
        [
            "for",
            "window_seconds",
            "baseline_window_seconds",
            "waiting_min",
            "growth_min",
            "queue_share_min",
            "usage_min",
            "ratio_max",
            "ratio_min",
            "excess_min",
            "threshold_seconds",
            "median_max_seconds",
            "quantile",
            "replicas_min",
        ]
    ),
    value=st.floats(min_value=1e-6, max_value=1e6) | st.integers(min_value=1, max_value=10**6),
)
def test_any_valid_override_exports_and_gets_promtool_tests_or_a_reason(rule, key, value):
    from collectors.config import ConfigError
    from tailwatch.config import parse_config

    try:
        config = parse_config({"slos": [], "alerts": {"rules": {rule: {key: value}}}})
    except ConfigError:
        return
    export = export_rules(config.alerts.rules)
    files, notes = promtool_test_files(export, config.alerts.rules)
    tested = len(files) + len(notes)
    assert tested >= len({a.rule for a in export.alerts() if a.alert != "metric-absent"})


def test_promtool_tests_hold_for_scaled_windows_and_odd_thresholds(tmp_path):
    settings = load_config(FIXTURES / "extreme.yaml")
    rules = settings.alerts.rules
    export = export_rules(rules, Dialect.VLLM, settings.alerts.notes)
    (tmp_path / "rules.yml").write_text(export.text(), encoding="utf-8")
    files, notes = promtool_test_files(export, rules, "rules.yml")
    assert notes == (
        "no promtool test: rule 'tail-latency-ttft': median_max_seconds 0.0001 is below every "
        "edge of ttft_seconds",
    )
    for name, body in files.items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    assert _promtool("check", "rules", "rules.yml", cwd=tmp_path).returncode == 0
    result = _promtool("test", "rules", *sorted(files), cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-3000:]
