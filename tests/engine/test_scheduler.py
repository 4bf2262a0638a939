from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.request import RequestStatus
from tests.engine.sim import expected_output, make_request, make_scheduler, run_all, step


def test_long_prompt_is_chunked_while_decodes_keep_going():
    s = make_scheduler(num_blocks=64, max_num_batched_tokens=32, max_num_seqs=8)
    short = make_request([1, 2, 3], max_tokens=20)
    s.add_request(short)
    step(s)  # short prefilled, now decoding
    long = make_request(list(range(100)), max_tokens=2)
    s.add_request(long)
    chunks = []
    while long.num_computed_tokens < long.num_prompt_tokens:
        out = step(s)
        by_id = {i.request_id: i for i in out.scheduled}
        assert out.num_scheduled_tokens <= 32
        # the decode is scheduled first, every step, one token
        assert out.scheduled[0].request_id == short.request_id
        assert by_id[short.request_id].num_new_tokens == 1
        chunks.append(by_id[long.request_id].num_new_tokens)
    assert chunks == [31, 31, 31, 7]
    run_all(s)
    assert short.output_token_ids == expected_output([1, 2, 3], 20)
    assert long.output_token_ids == expected_output(list(range(100)), 2)


def test_without_chunking_a_prompt_waits_for_a_whole_budget():
    s = make_scheduler(
        num_blocks=64,
        max_num_seqs=8,
        max_num_batched_tokens=128,
        max_model_len=128,
        enable_chunked_prefill=False,
    )
    a, b = make_request(list(range(100)), 1), make_request(list(range(50, 90)), 1)
    s.add_request(a)
    s.add_request(b)
    out = step(s)
    assert [i.request_id for i in out.scheduled] == [a.request_id]
    assert out.scheduled[0].num_new_tokens == 100


def test_preemption_when_blocks_run_out_and_outputs_are_unchanged():
    prompts = [[i + 1] * 20 for i in range(4)]
    s = make_scheduler(num_blocks=10, block_size=4, max_model_len=40, enable_prefix_caching=False)
    requests = [make_request(p, max_tokens=16) for p in prompts]
    for r in requests:
        s.add_request(r)
    preempting_steps = []

    def on_output(out):
        if out.preempted_request_ids:
            preempting_steps.append(out)

    run_all(s, on_output=on_output)
    assert s.num_preemptions_total > 0
    assert sum(r.num_preemptions for r in requests) == s.num_preemptions_total
    for out in preempting_steps:
        # no admissions in a step that preempted: nothing new except resumptions of
        # requests that were already running before
        assert not any(i.is_new for i in out.scheduled)
    for r, p in zip(requests, prompts, strict=True):
        assert r.output_token_ids == expected_output(p, 16)
        assert r.status is RequestStatus.FINISHED_LENGTH
    assert s.kv_cache.num_free_blocks == 10


def test_fcfs_preempts_the_last_admitted_and_requeues_it_at_the_front():
    s = make_scheduler(num_blocks=6, block_size=4, max_model_len=24, enable_prefix_caching=False)
    first, second = make_request([1] * 8, 12), make_request([2] * 8, 12)
    late = make_request([3] * 4, 2)
    s.add_request(first)
    s.add_request(second)
    step(s)
    s.add_request(late)
    while not s.num_preemptions_total:
        step(s)
    assert second.num_preemptions == 1 and first.num_preemptions == 0
    assert s.waiting.peek() is second


def test_priority_policy_preempts_lowest_priority_and_admits_highest_first():
    s = make_scheduler(
        num_blocks=6,
        block_size=4,
        max_model_len=24,
        enable_prefix_caching=False,
        scheduling_policy="priority",
    )
    low = make_request([1] * 8, 12, priority=5)
    high = make_request([2] * 8, 12, priority=0)
    s.add_request(low)
    s.add_request(high)
    out = step(s)
    assert [i.request_id for i in out.scheduled] == [high.request_id, low.request_id]
    while not s.num_preemptions_total:
        step(s)
    assert low.num_preemptions == 1 and high.num_preemptions == 0
    run_all(s)
    assert low.output_token_ids == expected_output([1] * 8, 12)


def test_max_num_seqs_caps_running():
    s = make_scheduler(num_blocks=64, max_num_seqs=2, max_num_batched_tokens=64)
    for i in range(5):
        s.add_request(make_request([i + 1] * 3, 5))
    out = step(s)
    assert len(out.scheduled) == 2
    assert s.stats().num_running == 2 and s.stats().num_waiting == 3


def test_abort_frees_blocks_at_once_running_or_waiting():
    s = make_scheduler(num_blocks=64, max_num_seqs=1)
    running, waiting = make_request([1] * 40, 50), make_request([2] * 5, 5)
    s.add_request(running)
    s.add_request(waiting)
    step(s)
    assert s.kv_cache.num_free_blocks < 64
    s.finish_requests([running.request_id, waiting.request_id], RequestStatus.FINISHED_ABORTED)
    assert s.kv_cache.num_free_blocks == 64
    assert not s.has_unfinished_requests()
    assert running.status.finish_reason == "abort"
    out = s.schedule()
    assert set(out.finished_request_ids) == {running.request_id, waiting.request_id}


def test_duplicate_request_id_is_refused():
    s = make_scheduler()
    r = make_request([1])
    s.add_request(r)
    with pytest.raises(ValueError, match="already in the engine"):
        s.add_request(r)


@pytest.mark.parametrize(
    ("knobs", "match"),
    [
        ({"block_size": 0}, "block_size=0"),
        ({"max_num_seqs": -1}, "max_num_seqs=-1"),
        (
            {"num_gpu_blocks": 4, "max_model_len": 100},
            r"max_model_len=100: the KV pool holds only 64",
        ),
        (
            {"enable_chunked_prefill": False, "max_num_batched_tokens": 512},
            "max_num_batched_tokens=512",
        ),
        ({"max_num_batched_tokens": 8, "max_num_seqs": 16}, "must be >= max_num_seqs"),
        ({"scheduling_policy": "lifo"}, "scheduling_policy='lifo'"),
        ({"gpu_memory_utilization": 1.5}, "gpu_memory_utilization=1.5"),
        ({"num_gpu_blocks": 4, "kv_cache_memory_bytes": 10}, "not both"),
    ],
)
def test_invalid_configs_name_the_knob_and_value(knobs, match):
    with pytest.raises(ConfigError, match=match):
        EngineConfig(**knobs)


def test_an_unknown_policy_is_refused_by_the_queue_factory_naming_the_allowed_ones():
    from engine.config import SchedulingPolicy
    from engine.request_queue import FCFSQueue, PriorityQueue, make_queue

    assert isinstance(make_queue("fcfs"), FCFSQueue)
    assert isinstance(make_queue(SchedulingPolicy.PRIORITY), PriorityQueue)
    for bad in ("lifo", "", "FCFS", None, 1):
        with pytest.raises(
            ConfigError, match=r"scheduling_policy=.*: must be one of fcfs, priority"
        ):
            make_queue(bad)
    for policy in SchedulingPolicy:  # every policy has a queue
        assert make_queue(policy) is not None


def test_a_policy_given_as_a_string_is_the_enum_in_the_config():
    from engine.config import SchedulingPolicy

    config = EngineConfig(scheduling_policy="priority")
    assert config.scheduling_policy is SchedulingPolicy.PRIORITY
    assert config.to_dict()["scheduling_policy"] == "priority"
    assert str(config.scheduling_policy) == "priority"  # as metric labels render it


def test_limits_are_replaced_whole_and_a_bad_value_cannot_be_built():
    from engine.config import SchedulerLimits

    s = make_scheduler(num_blocks=64, max_num_seqs=4, max_num_batched_tokens=64)
    assert (
        s.limits
        == EngineConfig(
            num_gpu_blocks=64, max_model_len=512, max_num_seqs=4, max_num_batched_tokens=64
        ).scheduler_limits()
    )
    new = SchedulerLimits(
        max_num_seqs=1, max_num_batched_tokens=8, max_model_len=512, enable_chunked_prefill=True
    )
    s.set_limits(new)
    assert s.limits is new
    for i in range(3):
        s.add_request(make_request([i + 1] * 20, 2))
    out = step(s)
    assert [i.num_new_tokens for i in out.scheduled] == [8]
    with pytest.raises(ConfigError, match="max_num_batched_tokens=2: must be >= max_num_seqs"):
        SchedulerLimits(
            max_num_seqs=4, max_num_batched_tokens=2, max_model_len=512, enable_chunked_prefill=True
        )
    with pytest.raises(ConfigError, match="enable_chunked_prefill=1: must be true or false"):
        SchedulerLimits(
            max_num_seqs=1, max_num_batched_tokens=8, max_model_len=8, enable_chunked_prefill=1
        )
    with pytest.raises(TypeError, match="must be a SchedulerLimits"):
        s.set_limits({"max_num_seqs": 2})
    assert s.limits is new


@settings(max_examples=100, deadline=None)
@given(value=st.text(max_size=12) | st.integers() | st.none() | st.lists(st.text(max_size=4)))
def test_any_policy_value_is_a_policy_or_a_config_error_naming_it(value):
    from engine.config import SCHEDULING_POLICIES, SchedulingPolicy

    if value in SCHEDULING_POLICIES:
        assert SchedulingPolicy.parse(value) == value
        assert EngineConfig(scheduling_policy=value).scheduling_policy == value
    else:
        with pytest.raises(ConfigError) as error:
            EngineConfig(scheduling_policy=value)
        assert str(error.value).startswith(f"scheduling_policy={value!r}: must be one of")
