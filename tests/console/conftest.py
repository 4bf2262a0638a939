"""The console tests' store: seeded once per session by a real short run
(:mod:`tests.console.seeded_store`), shared by the AppTest and browser tests."""

from __future__ import annotations

import os

import pytest

from tests.console.seeded_store import Seeded, seed

os.environ.setdefault("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def seeded(tmp_path_factory) -> Seeded:
    import torch

    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return seed(tmp_path_factory.mktemp("console"))
    finally:
        torch.set_num_threads(previous)
