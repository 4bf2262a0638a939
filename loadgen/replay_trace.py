"""A production window's request records as an open-loop trace (``tailwatch replay``).

Each stored :class:`~collectors.request_records.RequestRecord` becomes one request of the
trace: it arrives at the record's offset from the first replayed arrival, with the
record's prompt length, and its output forced to the record's length (``max_tokens`` with
``ignore_eos``, as the load generator always sends). Its tenant goes along.

What the records cannot give back, and what the trace does instead:

- **Prompt text.** Records carry lengths, not text: prompts are synthesized (lowercase
  letters, valid token ids in any vocabulary) of the recorded lengths, seeded, so a replay
  is reproducible.
- **Shared prefixes.** Records carry only how many prompt tokens hit the prefix cache
  (``cached_tokens``; vLLM's spans do not carry even that). Records of one tenant with
  the same ``cached_tokens`` > 0 form one prefix group: they share a synthesized prefix
  of that length. Production computed that prefix once before the first hit; the trace
  gives it to the latest earlier cache-missing record of the tenant that is long enough
  (its *seeder*, which still misses, as it did). A group with no such record in the
  window (its prefix was cached before the window began) is counted as unseeded: its
  first request pays a prefill that production did not.
- **Records that cannot be replayed** (no prompt length, no output, fewer than one token
  of either) are counted by reason, never silently left out.
"""

from __future__ import annotations

import random
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from collectors.request_records import RequestRecord
from collectors.store.protocols import RequestReader
from loadgen.errors import WorkloadError
from loadgen.workload import ScheduledRequest
from slo.window import format_utc

_LETTERS = tuple(range(ord("a"), ord("z") + 1))
#: Records read from the store per page (the protocol's default limit).
PAGE_SIZE = 10_000
NO_PROMPT = "no prompt length"
NO_OUTPUT = "no output length"
REPLAY_STREAM = "replay"


@dataclass(frozen=True)
class TraceRequest:
    """One request of the trace: ``offset_seconds`` after the trace's first arrival."""

    index: int
    offset_seconds: float
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    tenant: str | None
    prefix_group: int | None  # the group whose prefix the prompt starts with, if any
    recorded_cached_tokens: int | None  # what production's prefix cache served
    record: RequestRecord  # the production record it replays


@dataclass(frozen=True)
class ReplayTrace:
    """A window's replayable requests in arrival order, and what could not be replayed."""

    window_start: float  # epoch seconds
    window_end: float
    requests: tuple[TraceRequest, ...]
    num_records: int  # every record the window held (with the tenant filter, if any)
    unreplayable: Mapping[str, int] = field(default_factory=dict)  # reason → count
    num_prefix_groups: int = 0
    num_unseeded_groups: int = 0
    tenant: str | None = None
    seed: int = 0

    @property
    def window_seconds(self) -> float:
        return self.window_end - self.window_start

    def schedule(self, speed: float = 1.0) -> list[ScheduledRequest]:
        """The trace for :func:`loadgen.runner.run_schedule`, arrivals ``speed`` x faster."""
        return [
            ScheduledRequest(
                r.index,
                r.offset_seconds / speed,
                r.prompt_token_ids,
                r.max_tokens,
                r.tenant,
                None,
                r.prefix_group,
                REPLAY_STREAM,
            )
            for r in self.requests
        ]

    def describe(self) -> dict[str, Any]:
        """The trace as a lab run's ``workload`` (JSON)."""
        prompts = [len(r.prompt_token_ids) for r in self.requests]
        outputs = [r.max_tokens for r in self.requests]
        tenants = Counter(r.tenant or "" for r in self.requests)
        return {
            "source": "production window",
            "window": [self.window_start, self.window_end],
            "tenant": self.tenant,
            "num_records": self.num_records,
            "num_replayed": len(self.requests),
            "unreplayable": dict(self.unreplayable),
            "duration_seconds": self.requests[-1].offset_seconds if self.requests else 0.0,
            "prompt_tokens": _lengths(prompts),
            "output_tokens": _lengths(outputs),
            "tenants": dict(sorted(tenants.items())),
            "num_prefix_groups": self.num_prefix_groups,
            "num_unseeded_prefix_groups": self.num_unseeded_groups,
            "num_prefix_requests": sum(r.prefix_group is not None for r in self.requests),
            "seed": self.seed,
        }


def _lengths(values: Sequence[int]) -> dict[str, float | int | None]:
    if not values:
        return {"min": None, "mean": None, "max": None, "total": 0}
    return {
        "min": min(values),
        "mean": sum(values) / len(values),
        "max": max(values),
        "total": sum(values),
    }


def read_window(
    reader: RequestReader,
    start: float,
    end: float,
    *,
    tenant: str | None = None,
    page_size: int = PAGE_SIZE,
) -> list[RequestRecord]:
    """Every record that arrived in ``start <= arrival <= end``, oldest first, paging past
    the reader's ``limit``. NOTE: a page resumes at the last arrival it saw (records that
    tie on it come again and are skipped by id); a page of one arrival only is read again
    twice as large, so ties never stall the read."""
    records: list[RequestRecord] = []
    seen: set[tuple[str, str]] = set()
    cursor, limit = start, page_size
    while True:
        page = reader.requests(cursor, end, tenant=tenant, limit=limit)
        fresh = [r for r in page if (r.trace_id, r.span_id) not in seen]
        seen.update((r.trace_id, r.span_id) for r in fresh)
        records.extend(fresh)
        if len(page) < limit:
            break
        if page[-1].arrival == cursor:
            limit *= 2  # the page held one instant: read it whole
        else:
            cursor, limit = page[-1].arrival, page_size
    records.sort(key=lambda r: r.arrival)  # NOTE: stable: ties keep the store's order
    return records


def unreplayable_reason(record: RequestRecord) -> str | None:
    """Why ``record`` cannot be replayed, or None when it can."""
    if record.input_tokens is None or record.input_tokens < 1:
        return NO_PROMPT
    if record.output_tokens is None or record.output_tokens < 1:
        return NO_OUTPUT
    return None


def build_trace(
    records: Iterable[RequestRecord],
    window_start: float,
    window_end: float,
    *,
    tenant: str | None = None,
    seed: int = 0,
) -> ReplayTrace:
    """The trace of ``records`` (any order; those outside the window are refused)."""
    if not window_end > window_start:
        raise WorkloadError("window", f"end {window_end!r} must be after start {window_start!r}")
    ordered = sorted(records, key=lambda r: r.arrival)
    outside = [r for r in ordered if not window_start <= r.arrival <= window_end]
    if outside:
        raise WorkloadError(
            "window",
            f"record {outside[0].request_id!r} arrived at {format_utc(outside[0].arrival)}, "
            f"outside it ({format_utc(window_start)} to {format_utc(window_end)})",
        )
    unreplayable: Counter[str] = Counter()
    kept: list[RequestRecord] = []
    for record in ordered:
        reason = unreplayable_reason(record)
        if reason is None:
            kept.append(record)
        else:
            unreplayable[reason] += 1
    prefixes = _prefix_plan(kept)
    rng = random.Random(seed)
    first = kept[0].arrival if kept else window_start
    requests = []
    for index, record in enumerate(kept):
        assert record.input_tokens is not None and record.output_tokens is not None
        group, head = prefixes.heads.get(index, (None, ()))
        tail = rng.choices(_LETTERS, k=record.input_tokens - len(head))
        requests.append(
            TraceRequest(
                index=index,
                offset_seconds=record.arrival - first,
                prompt_token_ids=(*head, *tail),
                max_tokens=record.output_tokens,
                tenant=record.tenant,
                prefix_group=group,
                recorded_cached_tokens=record.cached_tokens,
                record=record,
            )
        )
    return ReplayTrace(
        window_start=window_start,
        window_end=window_end,
        requests=tuple(requests),
        num_records=len(ordered),
        unreplayable=dict(unreplayable),
        num_prefix_groups=prefixes.num_groups,
        num_unseeded_groups=prefixes.num_unseeded,
        tenant=tenant,
        seed=seed,
    )


@dataclass
class _PrefixPlan:
    heads: dict[int, tuple[int, tuple[int, ...]]]  # request index → (group, prefix tokens)
    num_groups: int = 0
    num_unseeded: int = 0


def _prefix_plan(records: Sequence[RequestRecord]) -> _PrefixPlan:
    """Which requests start with which group's prefix (see the module docstring)."""
    groups: dict[tuple[str, int], int] = {}
    plan = _PrefixPlan(heads={})
    for index, record in enumerate(records):
        assert record.input_tokens is not None
        # NOTE: a full hit still computes the last prompt token, so at most input - 1.
        cached = min(record.cached_tokens or 0, record.input_tokens - 1)
        if cached < 1:
            continue
        key = (record.tenant or "", cached)
        if key not in groups:
            groups[key] = len(groups)
            if not _seed_group(records, index, key, groups[key], plan):
                plan.num_unseeded += 1
        plan.heads[index] = (groups[key], _prefix_tokens(key))
    plan.num_groups = len(groups)
    return plan


def _seed_group(
    records: Sequence[RequestRecord],
    first_hit: int,
    key: tuple[str, int],
    group: int,
    plan: _PrefixPlan,
) -> bool:
    """Give the group's prefix to the latest earlier miss of its tenant long enough to hold
    it (and one token after); False when there is none."""
    tenant, length = key
    for index in range(first_hit - 1, -1, -1):
        record = records[index]
        if (
            index not in plan.heads
            and not record.cached_tokens
            and (record.tenant or "") == tenant
            and (record.input_tokens or 0) > length
        ):
            plan.heads[index] = (group, _prefix_tokens(key))
            return True
    return False


def _prefix_tokens(key: tuple[str, int]) -> tuple[int, ...]:
    tenant, length = key
    rng = random.Random(zlib.crc32(f"replay-prefix/{tenant}/{length}".encode()))
    return tuple(rng.choices(_LETTERS, k=length))
