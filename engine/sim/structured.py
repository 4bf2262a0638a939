"""Structured outputs in the simulator: compiles priced and cached, outputs ended by a draw.

The same ``GrammarCache`` as the torch engine's, so hits, misses and compile times count the
same way, but a "compile" only spends ``structured_output_compile_seconds`` (the engine's
clock: a ``VirtualClock`` moves, a served simulation sleeps). No mask is made (the runner
prices one per structured row and step) and no token is checked: a request completes its
"grammar" at its ``max_tokens``-th token (ending with ``stop``), unless its draw falls in
``structured_output_truncation_share``, and then it runs out of ``max_tokens`` (``length``).
See ``engine/sim/features.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from engine.errors import RequestError
from engine.sampling_params import SamplingParams
from engine.sim.features import SimFeatures, request_draw
from engine.structured.cache import GrammarCache, GrammarCacheStats, GrammarLookup
from engine.structured.params import GrammarKey, StructuredOutputsParams


class SimStructuredOutputs:
    """A ``StructuredOutputBackend`` that runs no grammar (see the module docstring)."""

    def __init__(
        self,
        features: SimFeatures,
        advance: Callable[[float], None],
        clock: Callable[[], float],
        seed: int = 0,
    ) -> None:
        self.features = features
        self._advance = advance
        self.seed = seed
        self.cache: GrammarCache[GrammarKey] = GrammarCache(self._compile, clock=clock)
        # request id -> its output length when its grammar completes (None: never)
        self._lengths: dict[str, int | None] = {}
        self._num_tokens: dict[str, int] = {}

    def _compile(self, key: GrammarKey) -> GrammarKey:
        self._advance(self.features.knobs.structured_output_compile_seconds)
        return key

    @property
    def num_requests(self) -> int:
        return len(self._lengths)

    def has(self, request_id: str) -> bool:
        return request_id in self._lengths

    def check(self, params: StructuredOutputsParams) -> None:
        return  # NOTE: the shape was checked by StructuredOutputsParams; nothing compiles

    def add(self, request_id: str, params: SamplingParams) -> GrammarLookup[Any]:
        if params.structured_outputs is None:
            raise RequestError(f"request {request_id!r} has no structured_outputs")
        lookup = self.cache.get(params.structured_outputs.key)
        share = self.features.knobs.structured_output_truncation_share
        truncated = request_draw(self.seed, request_id, "truncated") < share
        self._lengths[request_id] = None if truncated else params.max_tokens
        self._num_tokens[request_id] = 0
        return lookup

    def bitmask(self, request_ids: Sequence[str]) -> None:
        return None

    def accept(self, request_id: str, token_id: int) -> bool:
        if request_id not in self._lengths:
            return False
        count = self._num_tokens[request_id] = self._num_tokens[request_id] + 1
        length = self._lengths[request_id]
        return length is not None and count >= length

    def forget(self, request_id: str) -> None:
        self._lengths.pop(request_id, None)
        self._num_tokens.pop(request_id, None)

    def stats(self) -> GrammarCacheStats:
        return self.cache.stats()
