"""The change detector on the push-down reader: a history backfilled into Prometheus and fed
scrape by scrape to the fake through the collector's parser and dialect table gives the same
change events on both, cycle by cycle (a live knob with its before and after, a restart, a
target removed and one added; vLLM's live LoRA gauge changes nothing)."""

from __future__ import annotations

import time

import pytest

from collectors.changes import ChangeDetector, DetectorOptions, describe_change
from collectors.prometheus import PrometheusReader
from collectors.store.fake_changes import MemoryChanges
from tests.collectors.metrics_servers import Point, backfilled_prometheus, scraped_fake

#: Inside the reader's 7-day series lookback, hour-aligned, wholly in the past.
T = float((int(time.time()) // 3600 - 30) * 3600)
TYPES = {
    "vllm:num_requests_running": "gauge",
    "vllm:generation_tokens": "counter",
    "tailwatch:engine_info": "gauge",
    "vllm:cache_config_info": "gauge",
    "vllm:lora_requests_info": "gauge",
    "tailwatch:knob_changes": "counter",
}


def _history() -> list[Point]:
    """Scrapes every 60 s for 20 minutes: ``a`` lowers max_num_seqs at 300 s, ``b`` restarts
    at 480 s (a new instance id, its counter from zero), ``c`` is last scraped at 600 s and
    ``d`` first at 720 s; ``a``'s LoRA gauge names other adapters at every scrape."""
    points: list[Point] = []
    for k in range(20):
        t = 60.0 * k
        for target in ("a", "b", "c", "d"):
            if (target == "c" and t > 600) or (target == "d" and t < 720):
                continue
            at = T + t

            def add(name: str, value: float, target: str = target, at: float = at, **labels):
                points.append(Point(name, (("instance", target), *labels.items()), value, at))

            add("up", 1.0)
            add("vllm:num_requests_running", 1.0, model_name="m", engine="0")
            restarted = target == "b" and t >= 480
            tokens = 100.0 * (k - 8 if restarted else k)
            add("vllm:generation_tokens_total", tokens, model_name="m", engine="0")
            instance = "b-2" if restarted else f"{target}-1"
            add("tailwatch:engine_info", 1.0, model_name="m", engine="0", instance_id=instance)
            seqs = "4" if target == "a" and t >= 300 else "32"
            add("vllm:cache_config_info", 1.0, engine="0", max_num_seqs=seqs, block_size="16")
            if target == "a":
                add("tailwatch:knob_changes_total", 0.0 if t < 300 else 1.0, engine="0",
                    knob="max_num_seqs")  # fmt: skip
                add("vllm:lora_requests_info", at, running_lora_adapters=f"x{k % 3}")
    return points


@pytest.fixture(scope="module")
def readers(tmp_path_factory):
    points = _history()
    directory = tmp_path_factory.mktemp("prometheus-changes")
    with (
        backfilled_prometheus(directory, points, TYPES) as server,
        PrometheusReader(server.url) as reader,
    ):
        yield scraped_fake(points, TYPES), reader


def _cycles(reader) -> list[tuple]:
    options = DetectorOptions(margin_seconds=240.0)
    detector = ChangeDetector(reader, MemoryChanges(), options=options)
    found = []
    for now in range(240, 1201, 120):
        found += [
            (e.at_seconds - T, e.target, e.kind.value, describe_change(e), e.before, e.after)
            for e in detector.detect(T + now)
        ]
    return found


def test_the_detector_finds_the_same_changes_on_prometheus_and_the_store(readers) -> None:
    fake, server = readers
    on_fake = _cycles(fake)
    assert [(t, target, kind, what) for t, target, kind, what, _, _ in on_fake] == [
        (300.0, "a", "knob", "max_num_seqs 32 → 4"),
        (480.0, "b", "target", "restarted"),
        (720.0, "d", "target", "added"),
        # known once the others were scraped three times without it (780 s): the next cycle
        (600.0, "c", "target", "removed"),
    ]
    assert on_fake[1][4:] == ("b-1", "b-2")
    assert _cycles(server) == on_fake


def test_the_raw_families_are_the_unmapped_names_on_both(readers) -> None:
    fake, server = readers
    assert "raw:vllm:cache_config_info" in fake.raw_family_names()
    # NOTE: Prometheus's own up is a metric there; the store keeps it as the scrapes
    assert server.raw_family_names() == sorted([*fake.raw_family_names(), "raw:up"])
