"""Triage's knob-change evidence on the push-down reader (issue 24): the bundled engine's
``tailwatch:knob_changes_total`` is no canonical family, so the store keeps it raw
(``raw:tailwatch:knob_changes_total``). A history of it, backfilled into Prometheus 2.42 and fed
scrape by scrape to the fake through the collector's parser and dialect table, must give the
same raw series, samples and knob changes on both."""

from __future__ import annotations

import time

import pytest

from alerts.triage import KNOB_CHANGES_FAMILY, knob_changes
from collectors import canonical as c
from collectors.prometheus import PrometheusReader
from tests.collectors.metrics_servers import Point, backfilled_prometheus, scraped_fake

#: Inside the reader's 7-day series lookback, hour-aligned, wholly in the past.
T = float((int(time.time()) // 3600 - 30) * 3600)
INCIDENT = (T + 600.0, T + 900.0)
TYPES = {"tailwatch:knob_changes": "counter", "tailwatch:queue_depth": "gauge"}
KNOB = "tailwatch:knob_changes_total"


def _history() -> list[Point]:
    """Scrapes every 60 s of two targets: ``a`` changes ``max_num_seqs`` before and inside the
    incident (with a restart's reset), ``b`` changes ``max_num_batched_tokens`` only before it
    and first shows ``max_num_seqs`` inside it (a labelled counter appears at its first
    change); ``c`` changes nothing. A gauge the dialect table does not map rides along."""
    points: list[Point] = []

    def knob(target: str, name: str, t: float, value: float) -> None:
        labels = (("instance", target), ("knob", name))
        points.append(Point(KNOB, labels, value, T + t))

    for k in range(20):
        t = 60.0 * k
        for target in ("a", "b", "c"):
            points.append(Point("up", (("instance", target),), 1.0, T + t))
            depth = (("instance", target), ("model_name", "m"))
            points.append(Point("tailwatch:queue_depth", depth, float(k % 5), T + t))
        # a: 1 change at 120 s, 2 inside the incident, then a reset at 840 s and 1 more
        knob(
            "a", "max_num_seqs", t, 0.0 if t < 120 else 1.0 if t < 660 else 3.0 if t < 840 else 1.0
        )
        knob("b", "max_num_batched_tokens", t, 0.0 if t < 300 else 1.0)
        if t >= 720:
            knob("b", "max_num_seqs", t, 2.0)
        knob("c", "max_num_seqs", t, 0.0)
    return points


@pytest.fixture(scope="module")
def readers(tmp_path_factory):
    points = _history()
    directory = tmp_path_factory.mktemp("prometheus-knobs")
    with (
        backfilled_prometheus(directory, points, TYPES) as server,
        PrometheusReader(server.url) as reader,
    ):
        yield scraped_fake(points, TYPES), reader


def test_knob_changes_on_prometheus_equal_the_stores(readers) -> None:
    fake, server = readers
    start, end = INCIDENT
    on_fake = knob_changes(fake, start, end)
    assert {(k.target, k.knob) for k in on_fake} == {("a", "max_num_seqs"), ("b", "max_num_seqs")}
    assert knob_changes(server, start, end) == on_fake
    before = (T + 60.0, T + 400.0)
    assert knob_changes(server, *before) == knob_changes(fake, *before)
    assert {k.knob for k in knob_changes(fake, *before)} == {
        "max_num_seqs",
        "max_num_batched_tokens",
    }


@pytest.mark.parametrize(
    ("family", "labels"),
    [
        (KNOB_CHANGES_FAMILY, None),
        (KNOB_CHANGES_FAMILY, {"target": "a"}),
        (KNOB_CHANGES_FAMILY, {"knob": "max_num_seqs"}),
        (KNOB_CHANGES_FAMILY, {"target": "b", "knob": "max_num_seqs"}),
        (KNOB_CHANGES_FAMILY, {"target": "nowhere"}),
        # NOTE: raw labels are kept as exposed: the model label is not renamed
        (c.RAW_PREFIX + "tailwatch:queue_depth", {"model_name": "m", "target": "c"}),
        (c.RAW_PREFIX + "tailwatch:queue_depth", {"model": "m"}),
        (c.RAW_PREFIX + "tailwatch:nothing_total", None),
        (c.RAW_PREFIX + "tailwatch:knob_changes", None),
    ],
)
def test_raw_series_and_samples_on_prometheus_equal_the_stores(readers, family, labels) -> None:
    fake, server = readers
    expected = sorted(fake.series(family, labels), key=lambda s: s.labels)
    assert sorted(server.series(family, labels), key=lambda s: s.labels) == expected
    for start, end in ((0.0, T + 3600.0), (T + 300.0, T + 660.0), (T + 2000.0, T + 3000.0)):
        assert server.samples(family, labels, start, end) == fake.samples(
            family, labels, start, end
        )
    if family == KNOB_CHANGES_FAMILY and labels is None:
        assert len(expected) == 4
