"""The lab store contract: ``FakeLab`` and the SQL store (SQLite, and PostgreSQL when
``TAILWATCH_TEST_PG_URL`` is set) give back the same runs and points, refuse the same input,
and raise ``LabRunNotFound`` for a run they do not hold. Random runs and points (JSON
scalars, Unicode, extreme floats, NaN and infinities in knobs and summaries) round-trip
exactly through each."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.store import RetentionPolicy, Store
from collectors.store.fake_lab import FakeLab
from collectors.store.lab_records import (
    LabPoint,
    LabRun,
    LabRunKind,
    LabRunNotFound,
    LabRunStatus,
)
from collectors.store.protocols import LabReader, LabStore
from tests.collectors.test_reader_contract import open_reader

LABS = ("fake", "sqlite", "postgresql")


@pytest.fixture(params=LABS)
def lab(request: pytest.FixtureRequest, tmp_path) -> Iterator[FakeLab | Store]:
    yield from open_reader(request.param, request, tmp_path, FakeLab)


def canonical(record: LabRun | LabPoint, *drop: str) -> str:
    """A record as JSON text (NaN as NaN, -0.0 kept, ints apart from floats), less ``drop``."""
    data = {k: v for k, v in dataclasses.asdict(record).items() if k not in drop}
    return json.dumps(data, sort_keys=True, allow_nan=True)


SWEEP = LabRun(
    kind=LabRunKind.SWEEP,
    name="mnbt 512 vs 4096 — ü",
    created_at=1_700_000_000.25,
    target="sim:llama-3.1-8b@h100",
    simulated=True,
    knobs={"max_model_len": 8192, "enable_prefix_caching": True},
    workload={"prompt_tokens": [4000, 256], "duration_seconds": 60.0, "slo": {"ttft": 500}},
    sweep_knob="max_num_batched_tokens",
    knob_values=(512, 4096),
    rates=(5, 10.5),
    num_repeats=2,
    num_planned_points=8,
)
REPLAY = LabRun(
    kind=LabRunKind.REPLAY,
    name="window",
    created_at=1_700_000_100.0,
    target="tiny",
    simulated=False,
    knobs={},
    workload={"records": 120},
    window=(1_699_990_000.0, 1_699_993_600.0),
)
SUMMARY = {
    "slo_attainment": 0.95,
    "request_goodput": 9.5,
    "request_throughput": 10.0,
    "ttft_ms": {"p50": 40.0, "p95": 120.5, "p99": math.nan},
    "itl_ms": {"p95": math.inf, "p99": -math.inf},
    "num_requests": 600,
}


def test_runs_and_points_read_back_as_written(lab: FakeLab | Store) -> None:
    assert isinstance(lab, LabStore) and isinstance(lab, LabReader)
    sweep_id = lab.create_lab_run(SWEEP)
    replay_id = lab.create_lab_run(REPLAY)
    assert (sweep_id, replay_id) == (1, 2)
    samples = {"ttft_ms": [1.5, 2.0, 1e308], "itl_ms": [], "e2e_ms": [5e-324]}
    first = LabPoint(sweep_id, 512, 5.0, 0, SUMMARY, samples, measured_at=1_700_000_010.0)
    second = LabPoint(sweep_id, 512, 5.0, 1, {"slo_attainment": 1}, {}, 1_700_000_020.0)
    lab.add_lab_point(first)
    lab.add_lab_point(second)
    lab.finish_lab_run(sweep_id, LabRunStatus.INTERRUPTED, error="Ctrl-C after 2 of 8 points")

    stored = lab.lab_run(sweep_id)
    assert stored is not None and stored.finished_at is not None
    expected = dataclasses.replace(
        SWEEP,
        id=sweep_id,
        rates=(5.0, 10.5),
        status=LabRunStatus.INTERRUPTED,
        error="Ctrl-C after 2 of 8 points",
        finished_at=stored.finished_at,
    )
    assert canonical(stored) == canonical(expected)
    assert isinstance(stored.kind, LabRunKind) and isinstance(stored.status, LabRunStatus)
    assert stored.knob_values == (512, 4096) and isinstance(stored.knob_values, tuple)
    assert [canonical(p) for p in lab.lab_points(sweep_id)] == [canonical(first), canonical(second)]
    point = lab.lab_points(sweep_id)[0]
    assert math.isnan(point.summary["ttft_ms"]["p99"])
    assert point.summary["itl_ms"] == {"p95": math.inf, "p99": -math.inf}
    assert point.samples["e2e_ms"] == [5e-324]
    assert lab.lab_points(replay_id) == []
    replay = lab.lab_run(replay_id)
    assert replay is not None and replay.window == REPLAY.window
    assert replay.status is LabRunStatus.RUNNING and replay.finished_at is None


def test_runs_are_listed_newest_first_by_kind_and_limit(lab: FakeLab | Store) -> None:
    ids = [
        lab.create_lab_run(dataclasses.replace(SWEEP, created_at=t, name=str(i)))
        for i, t in enumerate([10.0, 30.0, 20.0, 30.0])
    ]
    replay_id = lab.create_lab_run(dataclasses.replace(REPLAY, created_at=25.0))
    # a tie on created_at: the later id first
    assert [r.id for r in lab.lab_runs()] == [ids[3], ids[1], replay_id, ids[2], ids[0]]
    assert [r.id for r in lab.lab_runs(LabRunKind.SWEEP, limit=2)] == [ids[3], ids[1]]
    assert [r.id for r in lab.lab_runs("replay")] == [replay_id]
    assert lab.lab_runs(limit=0) == []


def test_a_missing_run_is_lab_run_not_found(lab: FakeLab | Store) -> None:
    with pytest.raises(LabRunNotFound, match="lab run 7 does not exist"):
        lab.add_lab_point(LabPoint(7, None, 1.0, 0, {}))
    with pytest.raises(LabRunNotFound, match="lab run 7 does not exist"):
        lab.finish_lab_run(7, LabRunStatus.FAILED, "boom")
    assert lab.lab_run(7) is None
    assert lab.lab_points(7) == []


BAD_RUNS = [
    ({"created_at": math.nan}, "created_at"),
    ({"created_at": math.inf}, "created_at"),
    ({"kind": "bench"}, "kind='bench': not one of sweep, replay"),
    ({"name": "a\x00b"}, "name=.*NUL"),
    ({"target": "\udc80"}, "target=.*lone surrogate"),
    ({"knobs": {"x": object()}}, "knobs: not JSON"),
    ({"knob_values": ([512],)}, "knob_values: .* is not a JSON scalar"),
    ({"rates": (math.nan,)}, "rates"),
    ({"rates": (-1.0,)}, "rates: -1.0 req/s is negative"),
    ({"num_repeats": 0}, "num_repeats=0"),
    ({"num_planned_points": True}, "num_planned_points=True"),
    ({"window": (10.0, 5.0)}, "window=.*start is after end"),
    ({"simulated": "yes"}, "simulated='yes'"),
]


@pytest.mark.parametrize(("change", "message"), BAD_RUNS)
def test_a_run_the_store_cannot_keep_is_refused(lab, change: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        lab.create_lab_run(dataclasses.replace(SWEEP, **change))
    assert lab.lab_runs() == []


BAD_POINTS = [
    ({"rate": math.inf}, "rate"),
    ({"measured_at": math.nan}, "measured_at"),
    ({"repeat": -1}, "repeat=-1"),
    ({"knob_value": {"a": 1}}, "knob_value: .* is not a JSON scalar"),
    ({"summary": {"x": {1, 2}}}, "summary: not JSON"),
    ({"samples": {"ttft_ms": ["1.5"]}}, r"samples\['ttft_ms'\]: '1.5' is not a number"),
    ({"samples": {"ttft_ms": 1.5}}, r"samples\['ttft_ms'\]: must be a list"),
    ({"samples": {3: [1.0]}}, "samples key 3"),
]


@pytest.mark.parametrize(("change", "message"), BAD_POINTS)
def test_a_point_the_store_cannot_keep_is_refused(lab, change: dict, message: str) -> None:
    run_id = lab.create_lab_run(SWEEP)
    good = LabPoint(run_id, 512, 5.0, 0, {"slo_attainment": 1.0}, {"ttft_ms": [1.0]}, 1.0)
    with pytest.raises(ValueError, match=message):
        lab.add_lab_point(dataclasses.replace(good, **change))
    with pytest.raises(ValueError, match=r"error=.*NUL"):
        lab.finish_lab_run(run_id, LabRunStatus.FAILED, "a\x00")
    assert lab.lab_points(run_id) == []
    assert lab.lab_run(run_id).status is LabRunStatus.RUNNING


def test_store_retention_leaves_lab_results_alone(tmp_path) -> None:
    from collectors.store import sqlite_url

    store = Store(sqlite_url(tmp_path / "tw.db"))
    try:
        run_id = store.create_lab_run(dataclasses.replace(SWEEP, created_at=0.0))
        store.add_lab_point(LabPoint(run_id, 512, 5.0, 0, SUMMARY, {}, measured_at=0.0))
        policy = RetentionPolicy(**dict.fromkeys(
            ("raw_retention_seconds", "rollup_retention_seconds", "span_retention_seconds",
             "alert_retention_seconds"), 600.0))  # fmt: skip
        store.maintain(10 * 365 * 86400.0, policy)
        assert [r.id for r in store.lab_runs()] == [run_id]
        assert len(store.lab_points(run_id)) == 1
    finally:
        store.close()


# -- random runs and points through every store ----------------------------------------------

finite = st.floats(allow_nan=False, allow_infinity=False)
any_float = st.floats(allow_nan=True, allow_infinity=True)
texts = st.text(st.characters(blacklist_characters="\x00"), max_size=12)
scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63) | any_float | st.text(max_size=8)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
runs = st.builds(
    LabRun,
    kind=st.sampled_from(LabRunKind),
    name=texts,
    created_at=finite,
    target=texts,
    simulated=st.booleans(),
    knobs=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    workload=st.dictionaries(st.text(max_size=8), json_values, max_size=4),
    sweep_knob=st.none() | texts,
    knob_values=st.lists(scalars, max_size=4).map(tuple),
    rates=st.lists(st.floats(min_value=0, allow_infinity=False), max_size=4).map(tuple),
    num_repeats=st.integers(1, 10),
    num_planned_points=st.integers(0, 10_000),
)
points = st.lists(
    st.tuples(
        scalars,
        st.floats(min_value=0, allow_infinity=False),
        st.integers(0, 100),
        st.dictionaries(st.text(max_size=8), json_values, max_size=5),
        st.dictionaries(st.text(max_size=8), st.lists(any_float, max_size=5), max_size=3),
        finite,
    ),
    max_size=4,
)


@pytest.fixture(params=LABS[1:])
def sql_lab(request: pytest.FixtureRequest, tmp_path) -> Iterator[Store]:
    yield from open_reader(request.param, request, tmp_path, FakeLab)


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(run=runs, rows=points, status=st.sampled_from(LabRunStatus), error=st.none() | texts)
def test_random_runs_and_points_read_back_the_same_from_sql_and_the_fake(
    sql_lab: Store, run: LabRun, rows: list, status: LabRunStatus, error: str | None
) -> None:
    # NOTE: one SQL store across examples (runs accumulate; each example reads its own id)
    fake = FakeLab()
    labs = (fake, sql_lab)
    ids = [lab.create_lab_run(run) for lab in labs]
    for values in rows:
        for lab, run_id in zip(labs, ids, strict=True):
            lab.add_lab_point(LabPoint(run_id, *values))
    for lab, run_id in zip(labs, ids, strict=True):
        lab.finish_lab_run(run_id, status, error)
    from_fake, from_sql = fake.lab_run(ids[0]), sql_lab.lab_run(ids[1])
    # JSON-native input reads back as given (rates as floats), from both
    expected = dataclasses.replace(run, rates=tuple(float(r) for r in run.rates))
    drop = ("id", "finished_at", "status", "error")
    assert canonical(from_sql, *drop) == canonical(from_fake, *drop) == canonical(expected, *drop)
    assert (from_sql.status, from_sql.error) == (from_fake.status, from_fake.error)
    assert (from_sql.status, from_sql.error) == (status, error)
    sql_points = [canonical(p, "run_id") for p in sql_lab.lab_points(ids[1])]
    assert sql_points == [canonical(p, "run_id") for p in fake.lab_points(ids[0])]
    assert sql_points == [canonical(LabPoint(0, *v), "run_id") for v in rows]
