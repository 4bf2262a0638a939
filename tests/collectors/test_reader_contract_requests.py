"""The :class:`RequestReader` contract: the same cases on :class:`FakeRequestReader`, on SQLite
and on PostgreSQL (filters, order, ties, limit, idempotency, what is stored of odd values),
and a property over random records where the fake and SQLite answer every query the same."""

from __future__ import annotations

import math
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from collectors.request_records import RequestRecord, SpanEvent, SpanRecord
from collectors.store import Store, sqlite_url
from collectors.store.fake import FakeRequestReader
from collectors.store.protocols import RequestReader
from tests.collectors.test_reader_contract import READERS, open_reader


@pytest.fixture(params=READERS)
def requests_reader(
    request: pytest.FixtureRequest, tmp_path
) -> Iterator[FakeRequestReader | Store]:
    """An empty request reader that can be written: the fake, SQLite or PostgreSQL."""
    yield from open_reader(request.param, request, tmp_path, FakeRequestReader)


def test_every_reader_is_a_request_reader(requests_reader) -> None:
    assert isinstance(requests_reader, RequestReader)


T0 = 1_700_000_000.0


def _span(i: int, trace: int = 0xABC, start: float = T0) -> SpanRecord:
    return SpanRecord(
        trace_id=f"{trace:032X}",  # upper case: kept in lower case
        span_id=f"{0xA0 + i:016X}",
        parent_span_id=None if i == 0 else f"{0xA0:016X}",
        name=f"step {i}",
        kind=1,
        start=start + i,
        end=start + i + 0.5,
        attributes={"n": i, "stops": ("\n", "END"), "x": math.inf},
        events=(SpanEvent("scheduled", start + i + 0.01, {"k": [1, 2]}),),
        status_code=0,
        status_message="",
        resource={"service.name": "engine"},
        scope="tailwatch.engine",
    )


def _request(i: int, arrival: float, **fields) -> RequestRecord:
    base = dict(
        request_id=f"req-{i}",
        trace_id=f"{i:032x}",
        span_id=f"{i:016x}",
        service="engine",
        tenant="acme",
        model="tiny",
        replica="r1",
        arrival=arrival,
        queue_seconds=0.01,
        ttft_seconds=0.2,
        prefill_seconds=0.1,
        decode_seconds=0.5,
        tpot_seconds=0.01,
        e2e_seconds=0.7,
        input_tokens=10,
        output_tokens=50,
        cached_tokens=0,
        preemptions=0,
        finish_reason="stop",
        is_error=False,
    )
    return RequestRecord(**{**base, **fields})


def _ids(records: list[RequestRecord]) -> list[str]:
    """The last hex digit of each record's span id: which of the records below it is."""
    return [r.span_id[-1] for r in records]


def test_request_records_filters_order_limit(requests_reader) -> None:
    records = [
        _request(1, T0 + 20),
        _request(2, T0 + 10, tenant="zeta", finish_reason="length"),
        _request(3, T0 + 10, model="big", replica="r2"),  # same arrival: after 2, as written
        _request(4, T0 + 30, tenant=None, ttft_seconds=math.nan, e2e_seconds=math.inf),
        _request(5, T0 + 5, trace_id="AB" * 16, request_id="req-1"),  # a second req-1, earlier
    ]
    assert requests_reader.write_requests(records) == 5
    assert requests_reader.write_requests(records[:2]) == 0
    ids = [r.span_id for r in requests_reader.requests(0, math.inf)]
    assert ids == [f"{i:016x}" for i in (5, 2, 3, 1, 4)]
    assert _ids(requests_reader.requests(T0 + 10, T0 + 20)) == ["2", "3", "1"]
    assert _ids(requests_reader.requests(0, math.inf, limit=2)) == ["5", "2"]
    assert _ids(requests_reader.requests(0, math.inf, tenant="acme")) == ["5", "3", "1"]
    assert _ids(requests_reader.requests(0, math.inf, model="big", replica="r2")) == ["3"]
    assert _ids(requests_reader.requests(0, math.inf, finish_reason="length")) == ["2"]
    assert requests_reader.requests(0, math.inf, replica="r9") == []
    earliest = requests_reader.request("req-1")
    assert earliest.trace_id == "ab" * 16 and earliest.arrival == T0 + 5
    assert requests_reader.request("nope") is None
    odd = requests_reader.request("req-4")
    assert (odd.ttft_seconds, odd.e2e_seconds, odd.tenant) == (None, None, None)
    assert requests_reader.request("req-2") == records[1]
    with pytest.raises(ValueError, match="limit=0"):
        requests_reader.requests(0, 1, limit=0)


def test_spans_by_trace_in_start_order_stored_once(requests_reader) -> None:
    spans = [_span(2), _span(0), _span(1), _span(0, trace=0xDEF)]
    assert requests_reader.write_spans(spans) == 4
    assert requests_reader.write_spans([spans[0], _span(3)]) == 1
    got = requests_reader.trace(f"{0xABC:032x}")
    assert [s.span_id for s in got] == [f"{0xA0 + i:016x}" for i in range(4)]
    first = got[0]
    assert (first.trace_id, first.parent_span_id) == (f"{0xABC:032x}", None)
    assert got[1].parent_span_id == f"{0xA0:016x}"
    assert first.attributes == {"n": 0, "stops": ["\n", "END"], "x": math.inf}  # as JSON reads
    assert first.events == (SpanEvent("scheduled", T0 + 0.01, {"k": [1, 2]}),)
    assert requests_reader.trace(f"{0xDEF:032X}")[0].start == T0
    assert requests_reader.trace("f" * 32) == []


# -- property -------------------------------------------------------------------------------

_names = st.one_of(st.none(), st.sampled_from(["acme", "zeta", "Zeta", "", "é"]))


@st.composite
def _records(draw: st.DrawFn) -> list[RequestRecord]:
    count = draw(st.integers(0, 25))
    records = []
    for i in range(count):
        key = draw(st.integers(0, count))  # repeated keys: a retried export
        records.append(
            _request(
                key,
                T0 + draw(st.integers(0, 20)),  # ties in arrival
                request_id=f"req-{draw(st.integers(0, 5))}",
                tenant=draw(_names),
                model=draw(_names),
                replica=draw(_names),
                finish_reason=draw(_names),
                ttft_seconds=draw(st.sampled_from([0.1, math.nan, math.inf, None])),
                output_tokens=i,
            )
        )
    return records


@settings(max_examples=30, deadline=None)
@given(
    batches=st.lists(_records(), min_size=1, max_size=3),
    start=st.integers(-2, 22).map(lambda s: T0 + s),
    width=st.integers(-2, 25),
    filters=st.fixed_dictionaries(
        {}, optional={k: _names for k in ("tenant", "model", "replica", "finish_reason")}
    ),
    limit=st.integers(1, 30),
    request_id=st.integers(0, 6).map(lambda i: f"req-{i}"),
)
def test_fake_and_sqlite_agree_on_random_records(
    batches, start, width, filters, limit, request_id
) -> None:
    fake = FakeRequestReader()
    with tempfile.TemporaryDirectory() as directory:
        store = Store(sqlite_url(Path(directory) / "requests.db"))
        try:
            for batch in batches:
                assert store.write_requests(batch) == fake.write_requests(batch)
            query = dict(filters, limit=limit)
            want = fake.requests(start, start + width, **query)
            assert store.requests(start, start + width, **query) == want
            assert store.requests(-math.inf, math.inf) == fake.requests(-math.inf, math.inf)
            assert store.request(request_id) == fake.request(request_id)
        finally:
            store.close()
