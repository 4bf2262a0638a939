"""Scheduler invariants under random workloads: block accounting, the limits in force
every step, prefill chunks that were computed, and outputs equal to the model's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import SchedulerLimits
from engine.request import Request, RequestStatus
from engine.scheduler import Scheduler, SchedulerOutput
from tests.engine.sim import expected_output, make_request, make_scheduler, step

BLOCK_SIZE = 4
MAX_MODEL_LEN = 52


def _check_accounting(scheduler: Scheduler) -> None:
    kv = scheduler.kv_cache
    pool = kv.pool
    used = sum(1 for b in pool.blocks if b.ref_cnt > 0)
    assert all(b.ref_cnt >= 0 for b in pool.blocks)
    assert used + pool.num_free_blocks == pool.num_blocks
    # every reference is held by exactly one live request's block table
    refs: dict[int, int] = {}
    for request_id in scheduler.requests:
        for block_id in kv.get_block_ids(request_id):
            refs[block_id] = refs.get(block_id, 0) + 1
    assert {b.block_id: b.ref_cnt for b in pool.blocks if b.ref_cnt} == refs


def _check_limits(scheduler: Scheduler, out: SchedulerOutput, limits: SchedulerLimits) -> None:
    """The step kept to the limits in force when it was scheduled."""
    assert out.num_scheduled_tokens <= limits.max_num_batched_tokens
    assert len(out.scheduled) <= max(limits.max_num_seqs, len(scheduler.running))
    if any(item.is_new for item in out.scheduled):
        # NOTE: lowering max_num_seqs preempts nothing, so only an admitting step must
        # leave at most max_num_seqs running.
        assert len(scheduler.running) <= limits.max_num_seqs
    num_cut_short = 0
    for item in out.scheduled:
        request = scheduler.requests[item.request_id]
        assert item.num_new_tokens >= 1
        if item.num_computed_tokens + item.num_new_tokens < request.num_tokens:
            num_cut_short += 1
            # without chunking a step computes all a request has left, never a part
            assert limits.enable_chunked_prefill
    # NOTE: a request is cut short only when it takes the rest of the budget, so at most
    # one is part-way through its prompt after any step.
    assert num_cut_short <= 1


def _check_prefill_chunks(request: Request) -> None:
    """Recorded chunks are contiguous between preemptions, and none is from a step that
    preempted the request (a chunk unscheduled by that preemption was never computed)."""
    assert not {at for at, _, _ in request.prefill_chunks} & set(request.preempted_times)
    position = None
    preemptions = iter(request.preempted_times)
    next_preemption = next(preemptions, None)
    for at, first, num_tokens in request.prefill_chunks:
        while next_preemption is not None and next_preemption <= at:
            position, next_preemption = None, next(preemptions, None)
        if position is None:  # the first chunk of an admission: after any prefix hit
            assert first % BLOCK_SIZE == 0
        else:
            assert first == position, request.prefill_chunks
        assert num_tokens >= 1
        position = first + num_tokens
    assert position is None or position <= request.num_tokens


# prompts start with one of three shared prefixes often enough for prefix hits to happen
_PREFIXES = ([], [1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 9, 9, 9, 9, 9])
prompts = st.builds(
    lambda prefix, tail: [*prefix, *tail] or [0],
    st.sampled_from(_PREFIXES),
    st.lists(st.integers(0, 3), max_size=30),
)
workload = st.lists(
    st.tuples(
        prompts,
        st.integers(1, 12),  # max_tokens
        st.integers(0, 2),  # priority
        st.booleans(),  # abort this one part-way
    ),
    min_size=1,
    max_size=12,
)


@st.composite
def live_limits(draw) -> SchedulerLimits:
    """Valid limits for a knob change part-way (chunked prefill off needs a whole budget)."""
    chunked = draw(st.booleans())
    max_num_seqs = draw(st.integers(1, 4))
    low = max_num_seqs if chunked else MAX_MODEL_LEN
    return SchedulerLimits(
        max_num_seqs=max_num_seqs,
        max_num_batched_tokens=draw(st.integers(low, 60)),
        max_model_len=MAX_MODEL_LEN,
        enable_chunked_prefill=chunked,
    )


@settings(max_examples=60, deadline=None)
@given(
    workload=workload,
    policy=st.sampled_from(["fcfs", "priority"]),
    caching=st.booleans(),
    chunked=st.booleans(),
    change=st.none() | live_limits(),
)
def test_scheduler_invariants_under_random_workloads(workload, policy, caching, chunked, change):
    scheduler = make_scheduler(
        num_blocks=14,
        block_size=BLOCK_SIZE,
        max_model_len=MAX_MODEL_LEN,
        max_num_seqs=4,
        max_num_batched_tokens=MAX_MODEL_LEN if not chunked else 16,
        scheduling_policy=policy,
        enable_prefix_caching=caching,
        enable_chunked_prefill=chunked,
    )
    # a side record of the tokens each block was filled with, to check that a prefix
    # hit always means equal tokens
    block_tokens: dict[int, tuple[int, ...]] = {}

    def on_output(out):
        for item in out.scheduled:
            request = scheduler.requests[item.request_id]
            ids = scheduler.kv_cache.get_block_ids(item.request_id)
            if item.is_new and item.num_computed_tokens:
                for i in range(item.num_computed_tokens // BLOCK_SIZE):  # taken from the cache
                    start = i * BLOCK_SIZE
                    tokens = tuple(request.all_token_ids[start : start + BLOCK_SIZE])
                    assert block_tokens[ids[i]] == tokens
            end = item.num_computed_tokens + item.num_new_tokens
            for i in range(item.num_computed_tokens // BLOCK_SIZE, end // BLOCK_SIZE):
                start = i * BLOCK_SIZE
                block_tokens[ids[i]] = tuple(request.all_token_ids[start : start + BLOCK_SIZE])
        _check_limits(scheduler, out, scheduler.limits)

    requests = []
    for prompt, max_tokens, priority, _ in workload:
        request = make_request(prompt, max_tokens=max_tokens, priority=priority)
        requests.append(request)
        scheduler.add_request(request)
    to_abort = [r.request_id for r, w in zip(requests, workload, strict=True) if w[3]]
    for n in range(2000):
        if not scheduler.has_unfinished_requests():
            break
        step(scheduler, on_output)
        _check_accounting(scheduler)
        if n == 2 and change is not None:
            scheduler.set_limits(change)
        if n == 3:
            scheduler.finish_requests(to_abort, RequestStatus.FINISHED_ABORTED)
            _check_accounting(scheduler)
    else:
        raise AssertionError("workload did not finish")
    pool = scheduler.kv_cache.pool
    assert pool.num_free_blocks == pool.num_blocks
    assert all(b.ref_cnt == 0 for b in pool.blocks)
    for request, (prompt, max_tokens, _, _) in zip(requests, workload, strict=True):
        # the model is a pure function of the prefix: chunking, prefix hits and
        # preemptions must not change a single token
        expected = expected_output(prompt, max_tokens)
        if request.status is RequestStatus.FINISHED_LENGTH:
            assert request.output_token_ids == expected
        else:
            assert request.status is RequestStatus.FINISHED_ABORTED
            assert request.output_token_ids == expected[: request.num_output_tokens]
        _check_prefill_chunks(request)
