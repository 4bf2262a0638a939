"""Structured outputs in the torch engine: one xgrammar matcher per structured request.

The engine (``LLMEngine``) drives it as vLLM's scheduler drives its
``StructuredOutputManager``:

1. ``check`` when a request is validated (the front end): does the constraint parse;
2. ``add`` when the request joins the engine: the compiled grammar from the cache (compiled
   on a miss, on the engine thread: see docs/engine.md) and a fresh ``GrammarMatcher``;
3. ``bitmask`` before each step: the allowed next tokens of the structured requests that
   sample this step (``fill_next_token_bitmask``), which the model runner applies to their
   logits only (``apply_token_bitmask_inplace``), so unstructured rows are untouched;
4. ``accept`` for each sampled token; a matcher that reaches its terminal state (the
   grammar complete and its stop token accepted) finishes the request with ``stop``;
5. ``forget`` when the request finishes or is aborted.

A preempted request keeps its matcher: its output tokens are kept and recomputed, never
sampled again, so the matcher's state stays true.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from engine.model.tokenizer import Tokenizer
from engine.sampling_params import SamplingParams
from engine.structured import grammar
from engine.structured.cache import (
    DEFAULT_GRAMMAR_CACHE_SIZE,
    GrammarCache,
    GrammarCacheStats,
    GrammarLookup,
)
from engine.structured.params import GrammarKey, StructuredOutputsParams

logger = logging.getLogger("tailwatch.engine")


@dataclass(frozen=True)
class GrammarBitmask:
    """The allowed next tokens of ``request_ids`` (one row each, in that order): xgrammar's
    packed int32 bitmask on the CPU, ``[len(request_ids), ceil(vocab_size / 32)]``."""

    request_ids: tuple[str, ...]
    bitmask: torch.Tensor


class StructuredOutputManager:
    def __init__(
        self,
        tokenizer: Tokenizer,
        vocab_size: int,
        cache_size: int = DEFAULT_GRAMMAR_CACHE_SIZE,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._tokenizer = tokenizer
        self.vocab_size = vocab_size
        self._compiler: grammar.GrammarCompiler | None = None
        self.cache: GrammarCache[Any] = GrammarCache(self._compile, cache_size, clock)
        self._matchers: dict[str, Any] = {}

    def _compile(self, key: GrammarKey) -> Any:
        if self._compiler is None:  # NOTE: the first structured request imports xgrammar
            self._compiler = grammar.GrammarCompiler(self._tokenizer, self.vocab_size)
        return self._compiler.compile(key)

    @property
    def num_requests(self) -> int:
        return len(self._matchers)

    def has(self, request_id: str) -> bool:
        return request_id in self._matchers

    def check(self, params: StructuredOutputsParams) -> None:
        grammar.check(params.key)

    def add(self, request_id: str, params: SamplingParams) -> GrammarLookup[Any]:
        assert params.structured_outputs is not None
        lookup = self.cache.get(params.structured_outputs.key)
        import xgrammar

        self._matchers[request_id] = xgrammar.GrammarMatcher(lookup.grammar)
        return lookup

    def bitmask(self, request_ids: Sequence[str]) -> GrammarBitmask | None:
        """The bitmask of those of ``request_ids`` that are structured (None: none is)."""
        matchers = [(r, self._matchers[r]) for r in request_ids if r in self._matchers]
        if not matchers:
            return None
        import xgrammar

        bitmask = xgrammar.allocate_token_bitmask(len(matchers), self.vocab_size)
        for row, (_, matcher) in enumerate(matchers):
            matcher.fill_next_token_bitmask(bitmask, row)
        return GrammarBitmask(tuple(r for r, _ in matchers), bitmask)

    def accept(self, request_id: str, token_id: int) -> bool:
        """Advance the request's matcher by one sampled token; True once it is terminated.
        A token the grammar refuses (it cannot be sampled through the mask) is logged, as
        vLLM logs it, and leaves the matcher where it was."""
        matcher = self._matchers.get(request_id)
        if matcher is None:
            return False
        if not matcher.accept_token(token_id):
            logger.error(
                "structured output: request %s sampled token %d, which its grammar refuses",
                request_id,
                token_id,
            )
        return bool(matcher.is_terminated())

    def forget(self, request_id: str) -> None:
        self._matchers.pop(request_id, None)

    def stats(self) -> GrammarCacheStats:
        return self.cache.stats()
