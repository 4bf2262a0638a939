"""A model-free driver for scheduler tests: the 'model' is a pure function of the prefix."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

from engine.config import EngineConfig
from engine.kv_cache import KVCacheManager
from engine.request import Request, RequestStatus
from engine.sampling_params import SamplingParams
from engine.scheduler import Scheduler, SchedulerOutput


def next_token(prefix: Sequence[int]) -> int:
    """Deterministic in the whole prefix, so recomputation after preemption is checkable."""
    return (sum(prefix) * 31 + len(prefix)) % 251


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 0.001
        return self.now


_ids = itertools.count()


def make_request(
    prompt: Sequence[int], max_tokens: int = 4, priority: int = 0, salt: str | None = None
) -> Request:
    return Request(
        request_id=f"r{next(_ids)}",
        prompt_token_ids=list(prompt),
        sampling_params=SamplingParams(max_tokens=max_tokens, temperature=0.0),
        arrival_time=float(next(_ids)),
        priority=priority,
        cache_salt=salt,
    )


def make_scheduler(num_blocks: int = 64, **knobs) -> Scheduler:
    knobs.setdefault("max_model_len", min(512, num_blocks * knobs.get("block_size", 16)))
    config = EngineConfig(num_gpu_blocks=num_blocks, **knobs)
    kv = KVCacheManager(num_blocks, config.block_size, config.enable_prefix_caching)
    return Scheduler(config, kv, clock=FakeClock())


def step(
    scheduler: Scheduler,
    on_output: Callable[[SchedulerOutput], None] | None = None,
) -> SchedulerOutput:
    out = scheduler.schedule()
    if on_output is not None:
        on_output(out)
    sampled = []
    for item in out.scheduled:
        request = scheduler.requests[item.request_id]
        end = item.num_computed_tokens + item.num_new_tokens
        sampled.append(next_token(request.all_token_ids[:end]) if item.samples_token else None)
    updated = scheduler.update_from_output(out, sampled)
    done = [r.request_id for r in updated if r.num_output_tokens >= r.sampling_params.max_tokens]
    scheduler.finish_requests(done, RequestStatus.FINISHED_LENGTH)
    return out


def run_all(scheduler: Scheduler, max_steps: int = 10_000, on_output=None) -> int:
    for n in range(max_steps):
        if not scheduler.has_unfinished_requests():
            return n
        step(scheduler, on_output)
    raise AssertionError(f"requests still unfinished after {max_steps} steps")


def expected_output(prompt: Sequence[int], max_tokens: int) -> list[int]:
    tokens = list(prompt)
    out = []
    for _ in range(max_tokens):
        tok = next_token(tokens)
        out.append(tok)
        tokens.append(tok)
    return out
