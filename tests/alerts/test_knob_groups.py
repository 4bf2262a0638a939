"""Knob changes grouped for a reader: a drill's two knobs patched on three replicas are one
line ("max_num_seqs, step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC"), not
six, in the evidence, the CLI's recommendation and the console's verdict and annotations."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from alerts import MemoryAlertState
from alerts.triage import (
    KnobChange,
    group_knob_changes,
    render_text,
    short_targets,
    triage,
)
from alerts.triage.evidence import EvidenceKey
from collectors.canonical import RawSample
from collectors.store.fake import FakeMetricsReader
from collectors.store.records import ScrapeRecord
from tests.alerts import triage_cases as tc

AT = 1796530292.0  # 2026-12-05 04:11:32 UTC
REPLICAS = ("replica-0", "replica-1", "replica-2")
KNOBS = ("step_delay_seconds", "max_num_seqs")


def drill_changes(at: float = AT) -> tuple[KnobChange, ...]:
    """Two knobs patched on three replicas, each first seen by its own scrape."""
    return tuple(
        KnobChange(target, knob, 1.0, at + 0.1 * i)
        for i, target in enumerate(REPLICAS)
        for knob in KNOBS
    )


def test_a_drill_on_three_replicas_is_one_group() -> None:
    (group,) = group_knob_changes(drill_changes())
    assert group.describe() == (
        "max_num_seqs, step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC"
    )
    assert group.num_changes == 6.0


def test_distinct_times_and_knob_sets_are_separate_lines() -> None:
    later = AT + 120.0
    changes = (
        *drill_changes(),
        KnobChange("replica-1", "max_num_seqs", 1.0, later),
        KnobChange("replica-0", "block_size", 2.0, later + 1.0),
        KnobChange("replica-2", "max_num_seqs", 1.0, None),
    )
    assert [g.describe() for g in group_knob_changes(changes)] == [
        "max_num_seqs, step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC",
        "max_num_seqs changed on replica-1 at 04:13:32 UTC",
        "block_size changed on replica-0 at 04:13:33 UTC",
        "max_num_seqs changed on replica-2",
    ]


def test_a_group_spread_over_seconds_says_between() -> None:
    changes = [KnobChange(t, "max_num_seqs", 1.0, AT + 5.0 * i) for i, t in enumerate(REPLICAS)]
    (group,) = group_knob_changes(changes)
    assert group.when() == "between 04:11:32 and 04:11:42 UTC"


@pytest.mark.parametrize(
    ("targets", "text"),
    [
        (["replica-0", "replica-1", "replica-2"], "replica-0, -1, -2"),
        (["127.0.0.1:8000", "127.0.0.1:8001"], "127.0.0.1:8000, :8001"),
        (["r0", "r1"], "r0, r1"),
        (["a", "b"], "a, b"),
        (["replica-1", "replica-10"], "replica-1, -10"),
        (["only"], "only"),
        (["x-", "x-1"], "x-, x-1"),
    ],
)
def test_short_targets_writes_the_shared_stem_once(targets, text) -> None:
    assert short_targets(targets) == text


def test_replicas_are_in_natural_order() -> None:
    changes = [KnobChange(f"replica-{i}", "max_num_seqs", 1.0, AT) for i in (10, 2, 1)]
    (group,) = group_knob_changes(changes)
    assert group.targets == ("replica-1", "replica-2", "replica-10")


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["r-0", "r-1", "r-2", "x"]),
            st.sampled_from(["a", "b", "c"]),
            st.one_of(st.none(), st.floats(0, 100)),
        ),
        unique_by=lambda t: (t[0], t[1]),
    ),
    st.randoms(),
)
def test_every_change_is_in_exactly_one_group_whatever_the_order(items, rnd) -> None:
    changes = [KnobChange(t, k, 1.0, None if at is None else AT + at) for t, k, at in items]
    groups = group_knob_changes(changes)
    shuffled = list(changes)
    rnd.shuffle(shuffled)
    assert group_knob_changes(shuffled) == groups
    pairs = [(t, k) for g in groups for t in g.targets for k in g.knobs]
    assert sorted(pairs) == sorted((c.target, c.knob) for c in changes)
    assert sum(g.num_changes for g in groups) == len(changes)


def test_the_evidence_and_the_recommendation_show_one_line_per_group() -> None:
    report = triage(replace(tc.overload(), knob_changes=drill_changes()))
    (row,) = [r for r in report.evidence if r.key is EvidenceKey.KNOB_CHANGE]
    assert (row.what, row.scope, row.incident, row.note) == (
        "knob change: max_num_seqs, step_delay_seconds",
        "replica-0, -1, -2",
        6.0,
        "first seen at 04:11:32 UTC",
    )
    text = render_text(report, width=200)
    lines = [line for line in text.splitlines() if "recent change" in line]
    assert lines == [
        "  recent change: max_num_seqs, step_delay_seconds changed on replica-0, -1, -2 at "
        "04:11:32 UTC — consider reverting it first"
    ]


def test_the_charts_annotate_one_mark_per_group() -> None:
    from console.incidents.frames import KNOB_CHANGE, annotation_frame

    reader = FakeMetricsReader()
    for i, target in enumerate(REPLICAS):
        for t, value in ((AT - 10.0, None), (AT + 0.1 * i, 1.0)):
            raw = tuple(
                RawSample(
                    "tailwatch:knob_changes_total",
                    (("knob", knob), ("target", target)),
                    value,
                    "counter",
                )
                for knob in KNOBS
                if value is not None
            )
            reader.write_scrape(ScrapeRecord(target, t, (), (), raw))
    frame = annotation_frame(MemoryAlertState(), reader, AT - 60.0, AT + 60.0)
    marks = frame[frame["state"] == KNOB_CHANGE]
    assert list(marks["alert"]) == ["max_num_seqs, step_delay_seconds on replica-0, -1, -2"]
