"""The change detector over the reader protocol: every label change of any ``*_info`` gauge,
live knobs (with before and after from the info gauge that carries them), restarts however
they show, targets added and removed (never for a stalled collector or a target that is down),
and traffic-mix shifts; found once whether cycles overlap or the detector restarts."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors import canonical as c
from collectors.canonical import CanonicalSample, Kind, RawSample
from collectors.changes import (
    ChangeDetector,
    ChangeEvent,
    ChangeKind,
    DetectorOptions,
    MixDimension,
    MixOptions,
    MixTracker,
    describe_change,
)
from collectors.changes.detect import label_changes, target_set_changes
from collectors.request_records import RequestRecord
from collectors.store import ScrapeRecord
from collectors.store.fake import FakeMetricsReader, FakeRequestReader
from collectors.store.fake_changes import MemoryChanges
from slo import Sample

T0 = 1_800_000_000.0
STEP = 15.0
KNOBS = {"max_num_seqs": "32", "max_num_batched_tokens": "2048"}


@dataclass
class Replica:
    """What one target exposes, changed by the tests between scrapes."""

    target: str
    knobs: dict[str, str] = field(default_factory=lambda: dict(KNOBS))
    knob_counts: dict[str, float] = field(default_factory=dict)
    instance_id: str = "id-1"
    tokens: float = 0.0
    start_time: float = T0 - 3600.0
    model_info: dict[str, str] = field(default_factory=lambda: {"quantization": "none"})
    running_loras: str = ""
    is_up: bool = True

    def record(self, t: float) -> ScrapeRecord:
        if not self.is_up:
            return ScrapeRecord(self.target, t, is_up=False, error="connection refused")
        lab = c.labels_key({"target": self.target, "model": "m"})
        self.tokens += 100.0
        samples = (
            CanonicalSample(c.REQUESTS_RUNNING, lab, 1.0, Kind.GAUGE),
            CanonicalSample(c.GENERATION_TOKENS_TOTAL, lab, self.tokens, Kind.COUNTER),
            CanonicalSample(
                c.ENGINE_INFO,
                c.labels_key(
                    {"target": self.target, "model": "m", "instance_id": self.instance_id}
                ),
                1.0,
                Kind.GAUGE,
            ),
        )
        engine = {"target": self.target, "engine": "0"}
        raw = [
            RawSample("vllm:cache_config_info", c.labels_key({**engine, **self.knobs}), 1.0, "gauge"),
            RawSample("tailwatch:model_info", c.labels_key({**engine, **self.model_info}), 1.0, "gauge"),
            RawSample(
                "vllm:lora_requests_info",
                c.labels_key({"target": self.target, "running_lora_adapters": self.running_loras}),
                t,
                "gauge",
            ),
            RawSample("process_start_time_seconds", c.labels_key({"target": self.target}),
                      self.start_time, "gauge"),
        ]  # fmt: skip
        raw += [
            RawSample(
                "tailwatch:knob_changes_total", c.labels_key({**engine, "knob": k}), n, "counter"
            )
            for k, n in self.knob_counts.items()
        ]
        return ScrapeRecord(self.target, t, samples, raw=tuple(raw))

    def set_knob(self, knob: str, value: str | None) -> None:
        """A live change: counted, and the info gauge relabelled when it carries the knob."""
        self.knob_counts[knob] = self.knob_counts.get(knob, 0.0) + 1.0
        if value is not None:
            self.knobs[knob] = value

    def restart(self, instance_id: str, at: float) -> None:
        self.instance_id, self.tokens, self.start_time = instance_id, 0.0, at


class Fleet:
    """Replicas scraped into ``metrics`` (default: a fake reader) every :data:`STEP`."""

    def __init__(self, *names: str, metrics=None) -> None:  # type: ignore[no-untyped-def]
        self.replicas = {n: Replica(n) for n in names}
        self.metrics = FakeMetricsReader() if metrics is None else metrics
        self.t = T0

    def scrape(self, rounds: int = 1, only: tuple[str, ...] | None = None) -> float:
        for _ in range(rounds):
            self.t += STEP
            chosen = [r for n, r in self.replicas.items() if only is None or n in only]
            self.metrics.write_scrapes([r.record(self.t) for r in chosen])
        return self.t


def _detector(fleet: Fleet, **options) -> tuple[ChangeDetector, MemoryChanges]:
    sink = MemoryChanges()
    detector = ChangeDetector(
        fleet.metrics, sink, options=DetectorOptions(margin_seconds=300.0, **options)
    )
    return detector, sink


def _seen(events: list[ChangeEvent]) -> list[tuple[str, str, str]]:
    return [(e.target, e.kind.value, describe_change(e)) for e in events]


def test_a_live_knob_is_one_event_with_the_info_gauges_before_and_after() -> None:
    fleet = Fleet("replica-0", "replica-1")
    fleet.scrape(4)
    detector, sink = _detector(fleet)
    assert detector.detect(fleet.t) == []  # the first cycle: nothing changed in its margin
    for name in ("replica-0", "replica-1"):
        fleet.replicas[name].set_knob("max_num_seqs", "4")
    fleet.replicas["replica-1"].set_knob("step_delay_seconds", None)  # a fault: no info label
    at = fleet.scrape()
    fleet.scrape(2)
    found = detector.detect(fleet.t)
    assert _seen(found) == [
        ("replica-0", "knob", "max_num_seqs 32 → 4"),
        ("replica-1", "knob", "max_num_seqs 32 → 4"),
        ("replica-1", "knob", "step_delay_seconds"),
    ]
    assert {e.at_seconds for e in found} == {at}
    assert sink.change_events(-math.inf, math.inf) == found


def test_any_label_of_any_info_gauge_is_a_config_change_but_live_lora_state_is_not() -> None:
    fleet = Fleet("replica-0")
    fleet.scrape(4)
    detector, _ = _detector(fleet)
    detector.detect(fleet.t)
    r = fleet.replicas["replica-0"]
    r.model_info = {"quantization": "int8", "lora": "max_loras=4"}  # a deploy: no knob counted
    r.knobs["max_num_batched_tokens"] = "512"
    for adapters in ("a", "a,b", ""):
        r.running_loras = adapters
        fleet.scrape()
    assert _seen(detector.detect(fleet.t)) == [
        ("replica-0", "config", "lora (tailwatch:model_info) (none) → max_loras=4"),
        ("replica-0", "config", "quantization (tailwatch:model_info) none → int8"),
        ("replica-0", "config", "max_num_batched_tokens (vllm:cache_config_info) 2048 → 512"),
    ]


def test_a_restart_is_one_event_whatever_shows_it() -> None:
    fleet = Fleet("replica-0", "replica-1")
    fleet.scrape(4)
    detector, _ = _detector(fleet)
    detector.detect(fleet.t)
    fleet.replicas["replica-0"].restart("id-2", fleet.t + 1.0)  # new id, start time, reset
    fleet.replicas["replica-1"].tokens = 0.0  # an engine with nothing but its counters
    at = fleet.scrape()
    fleet.scrape()
    found = detector.detect(fleet.t)
    assert [(e.target, e.subject, e.before, e.after, e.at_seconds) for e in found] == [
        ("replica-0", "restarted", "id-1", "id-2", at),
        ("replica-1", "restarted", "", "", at),
    ]
    assert found[0].source == (
        "generation_tokens_total reset, instance id, process_start_time_seconds"
    )


def test_targets_added_and_removed_but_not_a_stall_or_a_target_that_is_down() -> None:
    fleet = Fleet("replica-0", "replica-1", "replica-2")
    fleet.scrape(4)
    detector, _ = _detector(fleet)
    detector.detect(fleet.t)
    fleet.t += 10 * STEP  # the collector stalls: nobody is scraped
    fleet.replicas["replica-2"].is_up = False  # down, still scraped
    last = fleet.scrape(only=("replica-0", "replica-1", "replica-2"))
    fleet.scrape(2, only=("replica-0", "replica-2"))  # replica-1 is not scraped twice: late
    assert detector.detect(fleet.t) == []
    fleet.scrape(1, only=("replica-0", "replica-2"))  # the third round without it
    assert _seen(detector.detect(fleet.t)) == [("replica-1", "target", "removed")]
    assert detector.changes_between(T0, fleet.t)[-1].at_seconds == last
    fleet.replicas["replica-3"] = Replica("replica-3")
    added = fleet.scrape(only=("replica-0", "replica-2", "replica-3"))
    assert [(e.target, e.subject, e.at_seconds) for e in detector.detect(fleet.t)] == [
        ("replica-3", "added", added)
    ]


def test_overlapping_cycles_and_a_restarted_detector_store_each_change_once() -> None:
    fleet = Fleet("replica-0")
    fleet.scrape(4)
    fleet.replicas["replica-0"].set_knob("max_num_seqs", "8")
    fleet.scrape(3)
    detector, sink = _detector(fleet)
    first = detector.detect(fleet.t)  # the first cycle looks a margin back
    again, sink_again = _detector(fleet)
    again.sink = sink
    assert again.detect(fleet.t) == first and len(first) == 1
    assert sink.change_events(-math.inf, math.inf) == first
    assert detector.detect(fleet.t) == []  # nothing new since its last cycle
    assert sink_again.change_events(-math.inf, math.inf) == []


def test_label_changes_pair_each_new_series_with_the_old_one_most_like_it() -> None:
    def series(**labels: str) -> tuple:
        return c.labels_key({"target": "a", **labels})

    readings = {
        series(engine="0", k="1"): [Sample(1.0, 1.0), Sample(2.0, 1.0)],
        series(engine="1", k="1"): [Sample(t, 1.0) for t in (1.0, 2.0, 3.0, 4.0)],
        series(engine="0", k="2"): [Sample(3.0, 1.0), Sample(4.0, 1.0)],
        series(engine="2", k="9"): [Sample(4.0, 1.0)],  # a new series beside the others
    }
    changes = label_changes(readings, 0.0, 10.0)
    assert [(x.at_seconds, x.label, x.before, x.after) for x in changes] == [(3.0, "k", "1", "2")]
    assert label_changes(readings, 3.0, 10.0) == []  # the change is not in (3, 10]


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(["a", "b", "c"]),
        st.lists(st.floats(0, 1000, allow_nan=False), max_size=12),
        max_size=3,
    ),
    st.floats(0, 1000, allow_nan=False),
    st.floats(0, 500, allow_nan=False),
    st.integers(1, 4),
)
def test_target_changes_are_the_same_however_the_range_is_cut(scrapes, cut, width, rounds):
    """Detecting over (s, m] then (m, e] finds what (s, e] finds: cycles may be cut anywhere."""
    start, end = -1.0, 1000.0 + width
    whole = target_set_changes(scrapes, start, end, rounds, -1.0)
    parts = target_set_changes(scrapes, start, cut, rounds, -1.0) + target_set_changes(
        scrapes, cut, end, rounds, -1.0
    )
    key = lambda p: (p.at_seconds, p.target, p.added)  # noqa: E731
    assert sorted(parts, key=key) == sorted(whole, key=key)


def test_a_mix_shift_is_placed_where_it_began_and_recorded_once() -> None:
    tracker = MixTracker(MixDimension.TENANT, MixOptions(window_seconds=60.0, steps=6))
    found = []
    for i in range(30):
        counts = {"chat": 10.0} if i < 12 else {"chat": 8.0, "batch": 2.0}
        found += tracker.add_step(T0 + 10.0 * i, counts)
    assert [(e.at_seconds, e.subject, e.before, e.after) for e in found] == [
        (T0 + 120.0, "batch", "0.000", "0.200"),
        (T0 + 120.0, "chat", "1.000", "0.800"),
    ]


def _request(i: int, tenant: str) -> RequestRecord:
    return RequestRecord(
        f"r{i}", f"{i:032x}", f"{i:016x}", "engine", tenant, "m", "replica-0", T0 + i,
        *([None] * 11), False,
    )  # fmt: skip


def test_the_mix_is_read_from_request_records() -> None:
    fleet = Fleet("replica-0")
    requests = FakeRequestReader()
    fleet.scrape(2)
    mix = MixOptions(window_seconds=60.0, min_requests=10)
    options = DetectorOptions(margin_seconds=60.0, mix=mix)
    detector = ChangeDetector(fleet.metrics, MemoryChanges(), requests, options=options)
    records = [_request(i, "batch" if i >= 120 and i % 4 == 0 else "chat") for i in range(240)]
    requests.write_requests(records)
    found = [
        e
        for now in range(60, 241, 15)
        for e in detector.detect(T0 + now)
        if e.kind is ChangeKind.TRAFFIC
    ]
    assert ("tenant", "batch", "0.000") in {(e.source, e.subject, e.before) for e in found}
    (batch,) = [e for e in found if e.subject == "batch"]
    # the first batch request arrived at 120 s: in the step (110, 120] the shift is placed in
    assert batch.at_seconds == T0 + 110.0 and 0.2 <= float(batch.after) <= 0.25


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"margin_seconds": 0}, "margin_seconds=0"),
        ({"margin_seconds": math.inf}, "margin_seconds=inf"),
        ({"absent_rounds": 0}, "absent_rounds=0"),
        ({"record_limit": 1.5}, "record_limit=1.5"),
    ],
)
def test_bad_options_name_the_field(options, message) -> None:
    with pytest.raises(ValueError, match=message):
        DetectorOptions(**options)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"window_seconds": -1.0}, "window_seconds=-1.0"),
        ({"steps": 1}, "steps=1"),
        ({"min_shift": 0.0}, "min_shift=0.0"),
        ({"min_requests": 0}, "min_requests=0"),
    ],
)
def test_bad_mix_options_name_the_field(options, message) -> None:
    with pytest.raises(ValueError, match=message):
        MixOptions(**options)
