from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True)
def _few_torch_threads():
    # NOTE: the models here are tiny; more threads only add contention on shared CI cores.
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(min(2, os.cpu_count() or 1))
    yield
    torch.set_num_threads(previous)
