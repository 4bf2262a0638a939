"""The drill's collector process starts from relative paths: ``tailwatch scenario drill``
keeps its work in ``.tailwatch/drills/<scenario>`` (relative to where it runs) while the
collector runs inside that folder, so a relative config path pointed nowhere."""

from __future__ import annotations

from pathlib import Path

import yaml

from loadgen.replicas import write_targets_file
from tailwatch.alert_drill import DrillTiming
from tailwatch.drill_collector import collector, collector_config, free_port


def test_the_collector_starts_from_a_relative_workdir(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    workdir = Path(".tailwatch/drills/overload")
    workdir.mkdir(parents=True)
    targets = (workdir / "targets.json").resolve()
    write_targets_file(targets, [], "overload")
    config = workdir / "tailwatch.yaml"
    settings = collector_config(f"sqlite:///{tmp_path / 'store.db'}", targets, DrillTiming())
    config.write_text(yaml.safe_dump(settings), "utf-8")
    port = free_port()
    # collector() raises DrillError when the process never says it listens
    with collector(config, workdir, port) as base:
        assert base == f"http://127.0.0.1:{port}"
