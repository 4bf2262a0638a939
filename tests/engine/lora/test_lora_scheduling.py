"""LoRA in the scheduler and the engine: max_loras per step, waiting without blocking the
base model, the loaded set's LRU, cold-load time on the engine's clock, the prefix cache's
adapter key."""

from __future__ import annotations

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.lora.source import parse_lora_source
from engine.sampling_params import SamplingParams
from engine.scheduler import SchedulerOutput
from engine.sim.runner import VirtualClock

PARAMS = SamplingParams(max_tokens=4, temperature=0.0, ignore_eos=True)


def _engine(clock=None, **knobs) -> LLMEngine:
    config = {
        "model": "tiny",
        "max_model_len": 64,
        "num_gpu_blocks": 64,
        "block_size": 4,
        "enable_lora": True,
        **knobs,
    }
    return (
        LLMEngine(EngineConfig(**config), clock=clock)
        if clock
        else LLMEngine(EngineConfig(**config))
    )


def _record_schedules(engine: LLMEngine) -> list[SchedulerOutput]:
    seen: list[SchedulerOutput] = []
    schedule = engine.scheduler.schedule

    def recording() -> SchedulerOutput:
        output = schedule()
        seen.append(output)
        return output

    engine.scheduler.schedule = recording  # type: ignore[method-assign]
    return seen


def _adapters(engine: LLMEngine, count: int, rank: int = 8):
    return [
        engine.add_lora(f"a{i}", parse_lora_source(f"random:rank={rank},seed={i}"))
        for i in range(count)
    ]


def test_no_step_runs_more_than_max_loras_adapters_and_nothing_is_dropped():
    engine = _engine(max_loras=2, max_cpu_loras=3)
    adapters = _adapters(engine, 3)
    steps = _record_schedules(engine)
    ids = []
    for i in range(9):
        lora = None if i % 4 == 3 else adapters[i % 3]
        ids.append(engine.add_request(f"prompt number {i}", PARAMS, lora_request=lora))
    finished = set()
    while engine.has_unfinished_requests():
        finished |= {o.request_id for o in engine.step() if o.finished}
    assert finished == set(ids)  # every request ran to the end
    for output in steps:
        distinct = {i.lora_request for i in output.scheduled if i.lora_request is not None}
        assert len(distinct) <= 2
    # the third adapter had to wait: some step ran two adapters while a2 was waiting
    first_a2 = next(
        n for n, o in enumerate(steps) if any(i.lora_request == adapters[2] for i in o.scheduled)
    )
    assert first_a2 > 0


def test_a_request_whose_adapter_cannot_join_waits_while_the_base_model_runs():
    engine = _engine(max_loras=1)
    a0, a1 = _adapters(engine, 2)
    first = engine.add_request(
        "adapter zero", SamplingParams(max_tokens=6, ignore_eos=True), lora_request=a0
    )
    blocked = engine.add_request("adapter one", PARAMS, lora_request=a1)
    base = engine.add_request("the base model", PARAMS)
    engine.step()
    running = {r.request_id for r in engine.scheduler.running}
    assert running == {first, base}  # behind the blocked one, the base request was admitted
    assert [r.request_id for r in engine.scheduler.waiting] == [blocked]  # kept its place
    stats = engine.lora.stats()
    assert stats.running == {"a0": 1} and stats.waiting == {"a1": 1}
    while engine.has_unfinished_requests():
        engine.step()
    assert engine.lora.stats().running == {} and engine.lora.stats().waiting == {}


def test_loaded_adapters_are_bounded_by_max_cpu_loras_least_recently_used_first():
    engine = _engine(max_loras=1, max_cpu_loras=2)
    a0, a1, _ = _adapters(engine, 3)
    assert engine.lora.stats().loaded == ("a1", "a2")  # a0 was evicted loading a2
    for lora in (a0, a1):
        engine.add_request("use it", PARAMS, lora_request=lora)
        while engine.has_unfinished_requests():
            engine.step()
    stats = engine.lora.stats()
    # a0 came back evicting a1 (the least recently used, not a2), then a1 came back
    # evicting a2
    assert stats.loaded == ("a0", "a1")
    assert {n: s.num_loads for n, s in stats.loads.items()} == {"a0": 2, "a1": 2, "a2": 1}


def test_a_cold_load_spends_lora_load_seconds_on_the_engines_clock_before_its_requests_run():
    clock = VirtualClock()
    engine = _engine(clock=clock, max_loras=1, max_cpu_loras=1, lora_load_seconds=2.5)
    a0, _ = _adapters(engine, 2)  # loading each spent 2.5 s; a0 is evicted by a1
    assert clock.now == 5.0
    request_id = engine.add_request("cold", PARAMS, lora_request=a0)
    outputs = []
    while engine.has_unfinished_requests():
        outputs.extend(o for o in engine.step() if o.request_id == request_id)
    timings = outputs[-1].timings
    assert timings.first_token_time - timings.arrival_time >= 2.5  # the load came first
    assert clock.now >= 7.5
    loads = engine.lora.stats().loads
    assert loads["a0"].num_loads == 2 and loads["a0"].load_seconds >= 5.0


def test_the_same_prompt_under_two_adapters_shares_no_prefix_blocks():
    engine = _engine(max_loras=2)
    a0, a1 = _adapters(engine, 2)
    prompt = "a shared system prompt: several blocks of four"

    def hits(lora) -> int:
        request_id = engine.add_request(prompt, PARAMS, lora_request=lora)
        while engine.has_unfinished_requests():
            outs = [o for o in engine.step() if o.request_id == request_id and o.finished]
            if outs:
                return outs[0].num_cached_tokens
        raise AssertionError("unfinished")

    assert hits(a0) == 0
    assert hits(a1) == 0  # another adapter: nothing shared
    assert hits(None) == 0  # the base model shares nothing with either
    assert hits(a0) > 0  # the same adapter again: its blocks are hit
    assert hits(None) > 0
