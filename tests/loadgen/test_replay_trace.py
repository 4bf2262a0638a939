"""Replay traces from request records: arrival offsets and lengths as recorded, prefix
groups from ``cached_tokens``, unreplayable records counted, windows read past the limit."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from collectors.request_records import RequestRecord
from collectors.store.fake_requests import FakeRequestReader
from loadgen.errors import WorkloadError
from loadgen.replay import load_trace
from loadgen.replay_trace import NO_OUTPUT, NO_PROMPT, build_trace, read_window
from slo.window import format_utc

T0 = 1_767_225_600.0
LETTERS = set(range(ord("a"), ord("z") + 1))


def record(i: int, arrival: float, **fields) -> RequestRecord:
    values = {
        "request_id": f"cmpl-{i}",
        "trace_id": f"{i + 1:032x}",
        "span_id": f"{i + 1:016x}",
        "service": "tailwatch-engine",
        "tenant": None,
        "model": "tiny",
        "replica": None,
        "arrival": arrival,
        "queue_seconds": 0.001,
        "ttft_seconds": 0.05,
        "prefill_seconds": None,
        "decode_seconds": None,
        "tpot_seconds": None,
        "e2e_seconds": 0.3,
        "input_tokens": 64,
        "output_tokens": 16,
        "cached_tokens": 0,
        "preemptions": 0,
        "finish_reason": "length",
        "is_error": False,
    }
    values.update(fields)
    return RequestRecord(**values)


COUNTS = st.one_of(st.none(), st.integers(-3, 3), st.integers(1, 700), st.just(2**31 - 1))
RECORDS = st.lists(
    st.tuples(
        st.floats(0, 3600, allow_nan=False),
        st.one_of(st.none(), st.integers(-3, 0), st.integers(1, 300)),  # input_tokens
        st.one_of(st.none(), st.integers(-3, 0), st.integers(1, 4096)),  # output_tokens
        st.one_of(st.none(), st.integers(-5, 0), st.sampled_from([16, 32, 128]), COUNTS),
        st.one_of(st.none(), st.text(max_size=8)),
        st.booleans(),
    ),
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.integers(0, 2**32))
def test_trace_reproduces_every_replayable_record(rows, seed):
    records = [
        record(
            i,
            T0 + at,
            input_tokens=prompt,
            output_tokens=output,
            cached_tokens=cached,
            tenant=tenant,
            is_error=error,
        )
        for i, (at, prompt, output, cached, tenant, error) in enumerate(rows)
    ]
    trace = build_trace(records, T0, T0 + 3600, seed=seed)
    # nothing silently dropped: replayed + unreplayable = every record
    assert len(trace.requests) + sum(trace.unreplayable.values()) == len(records)
    assert set(trace.unreplayable) <= {NO_PROMPT, NO_OUTPUT}
    kept = sorted(
        (r for r in records if (r.input_tokens or 0) >= 1 and (r.output_tokens or 0) >= 1),
        key=lambda r: r.arrival,
    )
    assert [r.record for r in trace.requests] == kept
    first = kept[0].arrival if kept else None
    for request in trace.requests:
        rec = request.record
        assert len(request.prompt_token_ids) == rec.input_tokens
        assert set(request.prompt_token_ids) <= LETTERS
        assert request.max_tokens == rec.output_tokens
        assert request.tenant == rec.tenant
        assert math.isclose(request.offset_seconds, rec.arrival - first, abs_tol=1e-9)
    offsets = [r.offset_seconds for r in trace.requests]
    assert offsets == sorted(offsets)
    # a prefix hit of c tokens starts with the group's prefix, shared with its group
    groups: dict[int, list] = {}
    for request in trace.requests:
        if request.prefix_group is not None:
            groups.setdefault(request.prefix_group, []).append(request)
    assert len(groups) == trace.num_prefix_groups
    for members in groups.values():
        hits = [m for m in members if (m.record.cached_tokens or 0) > 0]
        assert hits, "a group exists only for a recorded hit"
        length = min(hits[0].record.cached_tokens, hits[0].record.input_tokens - 1)
        head = hits[0].prompt_token_ids[:length]
        assert all(m.prompt_token_ids[:length] == head for m in members)
        seeders = [m for m in members if not m.record.cached_tokens]
        assert len(seeders) <= 1
        if seeders:  # the seeder arrives before the first hit and is longer than the prefix
            assert seeders[0].index < hits[0].index
            assert len(seeders[0].prompt_token_ids) > length
    assert trace.num_unseeded_groups == sum(
        not any(not m.record.cached_tokens for m in g) for g in groups.values()
    )
    assert build_trace(records, T0, T0 + 3600, seed=seed) == trace  # reproducible
    description = trace.describe()
    assert description["num_replayed"] == len(trace.requests)
    assert description["num_records"] == len(records)


def test_prefix_groups_follow_cached_tokens():
    records = [
        record(0, T0, tenant="a", input_tokens=200, cached_tokens=0),  # the seeder
        record(1, T0 + 1, tenant="b", input_tokens=200, cached_tokens=0),  # other tenant
        record(2, T0 + 2, tenant="a", input_tokens=150, cached_tokens=128),
        record(3, T0 + 3, tenant="a", input_tokens=300, cached_tokens=128),
        record(4, T0 + 4, tenant="b", input_tokens=40, cached_tokens=32),  # seeded by cmpl-1
        record(5, T0 + 5, tenant="a", input_tokens=64, cached_tokens=0),
        record(6, T0 + 6, tenant="c", input_tokens=64, cached_tokens=32),  # cached before
    ]
    trace = build_trace(records, T0, T0 + 10)
    by_id = {r.record.request_id: r for r in trace.requests}
    seeder, hit1, hit2 = by_id["cmpl-0"], by_id["cmpl-2"], by_id["cmpl-3"]
    assert seeder.prefix_group == hit1.prefix_group == hit2.prefix_group == 0
    assert (
        seeder.prompt_token_ids[:128] == hit1.prompt_token_ids[:128] == hit2.prompt_token_ids[:128]
    )
    assert hit1.prompt_token_ids[128:144] != hit2.prompt_token_ids[128:144]
    assert by_id["cmpl-5"].prefix_group is None
    assert by_id["cmpl-5"].prompt_token_ids[:16] != seeder.prompt_token_ids[:16]
    # tenant b's 32-token hit is seeded by its earlier miss, not by tenant a's requests
    assert by_id["cmpl-1"].prefix_group == by_id["cmpl-4"].prefix_group == 1
    assert by_id["cmpl-1"].prompt_token_ids[:32] == by_id["cmpl-4"].prompt_token_ids[:32]
    assert by_id["cmpl-1"].prompt_token_ids[:16] != seeder.prompt_token_ids[:16]
    assert by_id["cmpl-6"].prefix_group == 2
    assert (trace.num_prefix_groups, trace.num_unseeded_groups) == (3, 1)


def test_unreplayable_records_are_counted_and_named():
    records = [
        record(0, T0, input_tokens=None),
        record(1, T0 + 1, input_tokens=0),
        record(2, T0 + 2, output_tokens=None),
        record(3, T0 + 3, output_tokens=0, is_error=True, finish_reason="abort"),
        record(4, T0 + 4),
    ]
    trace = build_trace(records, T0, T0 + 10)
    assert trace.unreplayable == {NO_PROMPT: 2, NO_OUTPUT: 2}
    assert [r.record.request_id for r in trace.requests] == ["cmpl-4"]
    with pytest.raises(WorkloadError, match="none of its 4 request records can be replayed"):
        load_trace(FakeRequestReader(records[:4]), T0, T0 + 10)


def test_empty_window_and_bad_windows_are_refused():
    reader = FakeRequestReader([record(0, T0 + 100)])
    with pytest.raises(WorkloadError, match="no request records between"):
        load_trace(reader, T0, T0 + 10)
    with pytest.raises(WorkloadError, match="no request records of tenant 'x'"):
        load_trace(reader, T0, T0 + 1000, tenant="x")
    with pytest.raises(WorkloadError, match="must be after"):
        load_trace(reader, T0 + 10, T0)
    with pytest.raises(WorkloadError, match="outside") as refused:
        build_trace([record(0, T0 + 100)], T0, T0 + 10)
    # NOTE: the times are written as UTC, never as raw Unix seconds
    assert format_utc(T0 + 100) in str(refused.value)
    assert f"{T0 + 100}" not in str(refused.value) and f"{T0 + 100:.0f}" not in str(refused.value)


class CountingReader(FakeRequestReader):
    def __init__(self, records):
        super().__init__(records)
        self.calls = 0

    def requests(self, start, end, **kwargs):
        self.calls += 1
        return super().requests(start, end, **kwargs)


def test_read_window_pages_past_the_limit_and_through_ties():
    # 7 records at one instant, then 10 spread out: pages of 3 must read all 17 once each
    records = [record(i, T0 + 1) for i in range(7)] + [record(7 + i, T0 + 2 + i) for i in range(10)]
    reader = CountingReader(records)
    got = read_window(reader, T0, T0 + 100, page_size=3)
    assert [r.request_id for r in got] == [r.request_id for r in records]
    assert reader.calls > 3
    assert read_window(FakeRequestReader(records), T0, T0 + 100) == got
