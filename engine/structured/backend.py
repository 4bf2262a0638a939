"""What the engine asks of structured outputs: ``StructuredOutputBackend``.

Two implementations: the torch engine's xgrammar matchers (``manager.StructuredOutputManager``)
and the simulator's priced stand-in (``engine/sim/structured.py``), which compiles nothing,
masks nothing and ends each structured output at the length it drew.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from engine.sampling_params import SamplingParams
from engine.structured.cache import GrammarCacheStats, GrammarLookup
from engine.structured.params import StructuredOutputsParams


class StructuredOutputBackend(Protocol):
    @property
    def num_requests(self) -> int:
        """Structured requests in the engine now."""
        ...

    def has(self, request_id: str) -> bool: ...

    def check(self, params: StructuredOutputsParams) -> None:
        """``RequestError`` if the constraint cannot be served (validation, any thread)."""
        ...

    def add(self, request_id: str, params: SamplingParams) -> GrammarLookup[Any]:
        """The request's grammar (compiled or cached) and its state; ``RequestError`` if
        its grammar does not compile (nothing kept then)."""
        ...

    def bitmask(self, request_ids: Sequence[str]) -> Any:
        """The allowed next tokens of the structured ones of ``request_ids`` (a
        ``GrammarBitmask``), or None: none of them is, or this backend masks nothing."""
        ...

    def accept(self, request_id: str, token_id: int) -> bool:
        """Advance by one sampled token; True once the request's output is complete."""
        ...

    def forget(self, request_id: str) -> None: ...

    def stats(self) -> GrammarCacheStats: ...
