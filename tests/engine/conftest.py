from __future__ import annotations

from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from engine.llm_engine import LLMEngine
    from engine.outputs import RequestOutput


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # NOTE: the models here are tiny; a second thread only adds contention on shared CI
    # cores (a preemption scenario took 0.7 s on one thread and 5.3 s on two).
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)


def run_to_completion(engine: LLMEngine, max_steps: int = 1000) -> dict[str, list[RequestOutput]]:
    """Step ``engine`` until no request is unfinished; every output, by request id, in order.
    Fails after ``max_steps`` steps (a generous bound: the engine would be stuck)."""
    outputs: dict[str, list[RequestOutput]] = {}
    for _ in range(max_steps):
        if not engine.has_unfinished_requests():
            return outputs
        for out in engine.step():
            outputs.setdefault(out.request_id, []).append(out)
    raise AssertionError("engine did not finish")
