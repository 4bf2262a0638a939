"""A targets file in Prometheus file_sd format: parsing, errors naming the group and key, the
watcher on a fake stat/read/clock, and the collector taking changes next cycle while a broken
file keeps the previous list scraped."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from collectors import collector_metrics as cm
from collectors.collector import Collector
from collectors.config import ConfigError
from collectors.scrape import Scraper, Target
from collectors.store import Store
from collectors.targets_file import (
    TargetsFileWatcher,
    load_targets,
    merged_targets,
    read_targets_file,
)
from tests.collectors.test_collector import cycles
from tests.collectors.test_scrape import faulty_app, serve_app

FILE_SD = """
- targets: ["10.0.0.7:8000", "10.0.0.8:8000"]
  labels: {zone: a, __metrics_path__: /stats/metrics, __meta_consul_dc: dc1, job: vllm}
- targets: ["gpu-box:30000"]
  labels: {__scheme__: https, __param_format: prometheus, replica: 3}
- targets: ["[::1]:9400"]
"""


def test_file_sd_groups_become_targets_named_host_port():
    targets = load_targets(FILE_SD, "targets.yaml")
    assert [(t.name, t.url, dict(t.labels)) for t in targets] == [
        ("10.0.0.7:8000", "http://10.0.0.7:8000/stats/metrics", {"zone": "a", "job": "vllm"}),
        ("10.0.0.8:8000", "http://10.0.0.8:8000/stats/metrics", {"zone": "a", "job": "vllm"}),
        ("gpu-box:30000", "https://gpu-box:30000/metrics?format=prometheus", {"replica": "3"}),
        ("[::1]:9400", "http://[::1]:9400/metrics", {}),
    ]


def test_the_json_form_reads_the_same(tmp_path):
    path = tmp_path / "targets.json"
    path.write_text(
        '[\n\t{"targets": ["10.0.0.7:8000"], "labels": {"zone": "a"}},\n\t{"targets": []}\n]'
    )
    (target,) = read_targets_file(path)
    assert (target.name, target.url, dict(target.labels)) == (
        "10.0.0.7:8000",
        "http://10.0.0.7:8000/metrics",
        {"zone": "a"},
    )
    assert load_targets("[]", "t.yaml") == ()


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "t.yaml: the file is empty; write [] for no targets"),
        ("targets: [a:1]", "t.yaml: expected a list of target groups, got {'targets'"),
        ("- [a:1]", "t.yaml[0]: expected a mapping with targets and labels, got ['a:1']"),
        ("- {targets: [a:1]}\n- {labels: {}}", "t.yaml[1].targets: required"),
        (
            "- {targets: [a:1], lables: {}}",
            "t.yaml[0].lables: unknown key (known: labels, targets)",
        ),
        ("- {targets: a:1}", "t.yaml[0].targets: expected a list of host:port, got 'a:1'"),
        (
            "- {targets: [a:1, 'http://b:2/metrics']}",
            "t.yaml[0].targets[1]: expected host:port, got 'http://b:2/metrics'",
        ),
        ("- {targets: [a:1, 7]}", "t.yaml[0].targets[1]: expected host:port, got 7"),
        (
            "- {targets: ['a:99999']}",
            "t.yaml[0].targets[0]: expected host:port with a port 0-65535, got 'a:99999'",
        ),
        (
            "- {targets: ['[::1:80']}",
            "t.yaml[0].targets[0]: expected host:port with a port 0-65535, got '[::1:80'",
        ),
        (
            "- {targets: [a:1], labels: [zone]}",
            "t.yaml[0].labels: expected a mapping, got ['zone']",
        ),
        (
            "- {targets: [a:1], labels: {bad-name: x}}",
            "t.yaml[0].labels: invalid label name 'bad-name'",
        ),
        ("- {targets: [a:1], labels: {target: x}}", "t.yaml[0].labels.target: reserved"),
        ("- {targets: [a:1], labels: {zone: [1]}}", "t.yaml[0].labels.zone: expected a string"),
        (
            "- {targets: [a:1], labels: {__scheme__: ftp}}",
            "t.yaml[0].labels.__scheme__: expected http or https, got 'ftp'",
        ),
        (
            "- {targets: [a:1], labels: {__metrics_path__: metrics}}",
            "t.yaml[0].labels.__metrics_path__: expected a path such as /metrics, got 'metrics'",
        ),
        (
            "- {targets: [a:1]}\n- {targets: ['a:1']}",
            "t.yaml: target 'a:1' is listed twice; each host:port once",
        ),
        ("- {targets: [a:1]\n", "t.yaml: not valid YAML at line 2"),
    ],
)
def test_errors_name_the_group_and_the_key(text, message):
    with pytest.raises(ConfigError) as raised:
        load_targets(text, "t.yaml")
    assert str(raised.value).startswith(message), str(raised.value)


def test_a_bad_json_file_and_a_missing_file_are_named(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text('[{"targets": ["a:1"]},\n]')
    with pytest.raises(ConfigError, match=r"^t.json: not valid JSON at line 2$"):
        read_targets_file(bad)
    with pytest.raises(ConfigError, match=r"^cannot read targets file .*none.yaml: No such file"):
        read_targets_file(tmp_path / "none.yaml")


def test_a_file_target_may_not_reuse_a_static_name():
    static = load_targets("- {targets: ['a:1', 'b:2']}", "static")
    with pytest.raises(ConfigError, match=r"^t\.yaml: target 'b:2' is also a static target"):
        merged_targets(static, static[1:], "t.yaml")
    assert merged_targets(static[:1], static[1:], "t.yaml") == static


class FakeFile:
    """A file for the watcher: content, mtime and size as the test sets them."""

    def __init__(self, content: bytes | None = b"[]", mtime_ns: int = 1):
        self.content = content
        self.mtime_ns = mtime_ns
        self.reads = 0

    def write(self, content: bytes | None, mtime_ns: int) -> None:
        self.content, self.mtime_ns = content, mtime_ns

    def stat(self, _path: Path) -> os.stat_result:
        if self.content is None:
            raise FileNotFoundError(2, "No such file or directory")
        return _Stat(self.mtime_ns, len(self.content))  # type: ignore[return-value]

    def read(self, _path: Path) -> bytes:
        self.reads += 1
        if self.content is None:
            raise FileNotFoundError(2, "No such file or directory")
        return self.content


class _Stat:
    def __init__(self, mtime_ns: int, size: int):
        self.st_mtime_ns, self.st_size = mtime_ns, size


def watcher_on(file: FakeFile, now: list[float], reread_seconds: float = 60.0):
    return TargetsFileWatcher(
        "/etc/tw/targets.yaml", reread_seconds, stat=file.stat, read=file.read,
        clock=lambda: now[0],
    )  # fmt: skip


def names(update) -> list[str]:
    return [target.name for target in update.targets]


def test_the_watcher_reports_each_change_once_and_errors_once_per_change():
    file = FakeFile(b"- {targets: ['a:1']}\n")
    now = [0.0]
    watcher = watcher_on(file, now)
    assert names(watcher.poll()) == ["a:1"]  # the first read is always reported
    assert watcher.poll() is None and file.reads == 1  # unchanged stat: not even read

    file.write(b"- {targets: ['a:1', 'b:2']}\n", mtime_ns=2)
    assert names(watcher.poll()) == ["a:1", "b:2"]

    file.write(b"- {targets: ['a:1', 'b:2']]\n", mtime_ns=3)  # a stray bracket
    update = watcher.poll()
    assert update.targets is None and update.error == "targets.yaml: not valid YAML at line 1"
    assert watcher.poll() is None  # the same broken file is reported once
    file.write(b"- {targets: [a:1, 'http://c:3']}\n", mtime_ns=4)  # broken differently
    assert watcher.poll().error.startswith("targets.yaml[0].targets[1]: expected host:port")
    assert [t.name for t in watcher.targets] == ["a:1", "b:2"]  # the last good list is kept

    file.write(None, mtime_ns=5)  # deleted (or renamed away mid-update)
    update = watcher.poll()
    assert update.targets is None and "No such file or directory" in update.error
    assert watcher.poll() is None
    file.write(b"- {targets: ['a:1', 'b:2']}\n", mtime_ns=6)  # back as it was
    assert names(watcher.poll()) == ["a:1", "b:2"] and watcher.error == ""

    file.write(b"- {targets: ['a:1', 'b:2']}\n", mtime_ns=7)  # touched, same content
    assert watcher.poll() is None


def test_a_same_size_rewrite_with_an_unchanged_mtime_is_found_by_the_periodic_reread():
    file = FakeFile(b"- {targets: ['a:1']}\n", mtime_ns=10)
    now = [0.0]
    watcher = watcher_on(file, now, reread_seconds=30.0)
    assert names(watcher.poll()) == ["a:1"]
    file.write(b"- {targets: ['b:1']}\n", mtime_ns=10)  # same size, same coarse mtime
    now[0] = 29.0
    assert watcher.poll() is None and file.reads == 1
    now[0] = 30.0
    assert names(watcher.poll()) == ["b:1"] and file.reads == 2


# -- the collector ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, str]]:
    """Two loopback servers (two host:port names): their base URLs."""
    with serve_app(faulty_app) as first, serve_app(faulty_app) as second:
        yield first, second


def group(*bases: str, path: str = "/ok") -> str:
    hosts = ", ".join(f"'{base.removeprefix('http://')}'" for base in bases)
    return f"- targets: [{hosts}]\n  labels: {{__metrics_path__: {path}, zone: a}}\n"


def value(collector: Collector, name: str, **labels: str) -> float | None:
    return collector.registry.get_sample_value(name, labels)


def test_the_collector_takes_file_changes_next_cycle_and_keeps_the_last_good_list(
    servers, tmp_path, caplog
):
    first, second = servers
    name1, name2 = first.removeprefix("http://"), second.removeprefix("http://")
    path = tmp_path / "targets.yaml"
    path.write_text(group(first))
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    # NOTE: reread_seconds=0 reads and hashes the file every cycle, whatever its mtime says.
    watcher = TargetsFileWatcher(path, reread_seconds=0)
    static = [Target("static", second + "/ok")]
    collector = Collector(static, store, Scraper(), targets_source=watcher)

    cycles(collector, 1)  # 1000: static + first
    assert [t.name for t in collector.targets] == ["static", name1]
    assert value(collector, cm.TARGETS_FILE_VALID) == 1
    assert value(collector, cm.TARGETS) == 2

    path.write_text(group(first, second))
    cycles(collector, 1)  # 1005: + second
    assert [t.name for t in collector.targets] == ["static", name1, name2]
    assert dict(collector.targets[2].labels) == {"zone": "a"}

    with caplog.at_level(logging.WARNING, logger="tailwatch.collector"):
        path.write_text(group(first, second) + "- targets: [oops\n")
        cycles(collector, 2)  # 1010, 1015: broken; the previous list is scraped
        path.write_text("")  # emptied (a non-atomic writer mid-write)
        cycles(collector, 1)  # 1020
    warnings = [r.getMessage() for r in caplog.records if "targets file not used" in r.message]
    assert warnings == [
        "targets file not used: targets.yaml: not valid YAML at line 4; "
        "still scraping the previous 3 target(s)",
        "targets file not used: targets.yaml: the file is empty; write [] for no targets; "
        "still scraping the previous 3 target(s)",
    ]
    assert value(collector, cm.TARGETS_FILE_ERRORS + "_total") == 2
    assert value(collector, cm.TARGETS_FILE_VALID) == 0
    assert collector.targets_file_error.startswith("targets.yaml: the file is empty")

    path.write_text(group(second))  # first removed
    cycles(collector, 1)  # 1025
    assert [t.name for t in collector.targets] == ["static", name2]
    assert value(collector, cm.TARGETS_FILE_VALID) == 1 and collector.targets_file_error == ""
    assert value(collector, cm.TARGET_UP, target=name1) is None  # its gauge is gone
    assert value(collector, cm.SAMPLES_INGESTED + "_total", target=name1) == 5  # counters stay

    assert [t for t, _, _ in store.scrapes("static")] == [1000.0 + 5 * k for k in range(6)]
    assert [t for t, _, _ in store.scrapes(name1)] == [1000.0 + 5 * k for k in range(5)]
    assert [t for t, _, _ in store.scrapes(name2)] == [1005.0 + 5 * k for k in range(5)]
    assert all(up for name in (name1, name2) for _, up, _ in store.scrapes(name))


def test_a_file_target_named_like_a_static_one_is_refused_and_the_list_kept(servers, tmp_path):
    first, second = servers
    path = tmp_path / "targets.yaml"
    path.write_text(group(first))
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    static = [Target(second.removeprefix("http://"), second + "/ok")]
    collector = Collector(
        static, store, Scraper(), targets_source=TargetsFileWatcher(path, reread_seconds=0)
    )
    cycles(collector, 1)
    path.write_text(group(first, second))  # second is also static
    cycles(collector, 2)
    assert [t.name for t in collector.targets] == [t.name for t in static] + [
        first.removeprefix("http://")
    ]
    assert value(collector, cm.TARGETS_FILE_ERRORS + "_total") == 1  # once, not per cycle
    assert "is also a static target" in collector.targets_file_error
    with pytest.raises(ValueError, match="is listed twice"):
        collector.update_targets([Target("x", first), Target("x", second)])


def test_a_missing_file_at_start_scrapes_the_static_targets_and_says_why(servers, tmp_path):
    first, _ = servers
    store = Store(f"sqlite:///{tmp_path / 'tw.db'}")
    watcher = TargetsFileWatcher(tmp_path / "later.yaml", reread_seconds=0)
    collector = Collector(
        [Target("static", first + "/ok")], store, Scraper(), targets_source=watcher
    )
    cycles(collector, 2)
    assert [t.name for t in collector.targets] == ["static"]
    assert "later.yaml: No such file or directory" in collector.targets_file_error
    assert value(collector, cm.TARGETS_FILE_ERRORS + "_total") == 1
    (tmp_path / "later.yaml").write_text(group(first))
    cycles(collector, 1)
    assert len(collector.targets) == 2 and collector.targets_file_error == ""
