"""The drill's collector process starts from relative paths: ``tailwatch scenario drill``
keeps its work in ``.tailwatch/drills/<scenario>`` (relative to where it runs) while the
collector runs inside that folder, so a relative config path pointed nowhere. It is started,
health-gated and stopped by ``tailwatch.processes``, and its evaluator's progress is read
from its ``/metrics``, not from its log."""

from __future__ import annotations

import time
from pathlib import Path

import yaml

from loadgen.replicas import write_targets_file
from tailwatch.alert_drill import DrillTiming, drill_collector_config, running_collector
from tailwatch.collect_evaluation import evaluations_of
from tailwatch.config import parse_config
from tailwatch.processes import free_port


def test_the_collector_starts_from_a_relative_workdir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    workdir = Path(".tailwatch/drills/overload")
    workdir.mkdir(parents=True)
    targets = (workdir / "targets.json").resolve()
    write_targets_file(targets, [], "overload")
    config = workdir / "tailwatch.yaml"
    settings = drill_collector_config(f"sqlite:///{tmp_path / 'store.db'}", targets, DrillTiming())
    config.write_text(yaml.safe_dump(settings), "utf-8")
    port = free_port()
    # running_collector() raises DrillError when the process never answers /targets
    with running_collector(config, workdir, port, 0) as base:
        assert base == f"http://127.0.0.1:{port}"
        # the evaluator's progress, on the collector's /metrics (its log is not an API)
        deadline = time.monotonic() + 60
        while evaluations_of(base) < 2 and time.monotonic() < deadline:
            time.sleep(0.2)
        assert evaluations_of(base) >= 2
    assert (workdir / "collector.log").exists()


def test_the_drill_config_is_the_drills_compressed_clock(tmp_path: Path) -> None:
    timing = DrillTiming()
    mapping = drill_collector_config("sqlite:///x.db", tmp_path / "targets.json", timing)
    config = parse_config(mapping)
    assert config.collector.scrape_interval_seconds == timing.scrape_interval_seconds
    assert config.collector.scrape_timeout_seconds == timing.scrape_interval_seconds
    assert config.collector.targets_file == tmp_path / "targets.json"
    assert config.collector.gpu == "off"
    assert config.alerts.in_collector
    assert config.alerts.window_scale == timing.window_scale
    assert config.alerts.evaluation_interval_seconds == timing.evaluation_interval_seconds
