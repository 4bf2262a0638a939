from __future__ import annotations

import pytest


@pytest.fixture(autouse=True, scope="session")
def _one_torch_thread():
    # NOTE: the models here are tiny; a second thread only adds contention on shared CI
    # cores (a preemption scenario took 0.7 s on one thread and 5.3 s on two).
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(previous)
