"""Compiled grammars, cached by constraint in a bounded LRU, with hits, misses and compile time.

The first request with a schema pays its compile; the next ones with the same schema (same
canonical text and whitespace option) reuse it. Each lookup says whether it hit and how long
its compile took, which the request carries to its span and the metrics
(``tailwatch:structured_output_*``). The compile function is given, so the simulator caches
its simulated compiles with the same class and counts them the same way.

NOTE: a lock guards the table, not the compile: a compile runs outside it, so two threads
that miss the same key at once both compile (both counted as misses), and neither blocks
lookups of other keys meanwhile.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, NamedTuple, TypeVar

from engine.errors import ConfigError
from engine.structured.params import GrammarKey

Grammar = TypeVar("Grammar")
# NOTE: vLLM keeps compiled grammars in xgrammar's cache, bounded by bytes; a count is what a
# reader can reason about here (a compiled JSON grammar of a 128k vocabulary is ~1 MiB).
DEFAULT_GRAMMAR_CACHE_SIZE = 256


class GrammarLookup(NamedTuple, Generic[Grammar]):
    """A cache lookup: the grammar, whether it was cached, and the compile's seconds (0 on a
    hit)."""

    grammar: Grammar
    cache_hit: bool
    compile_seconds: float


@dataclass(frozen=True)
class GrammarCacheStats:
    """Cumulative lookups since the cache was made."""

    num_hits: int
    num_misses: int
    num_cached: int


class GrammarCache(Generic[Grammar]):
    def __init__(
        self,
        compile_grammar: Callable[[GrammarKey], Grammar],
        max_size: int = DEFAULT_GRAMMAR_CACHE_SIZE,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if isinstance(max_size, bool) or not isinstance(max_size, int) or max_size < 1:
            raise ConfigError(f"grammar cache max_size={max_size!r}: must be a positive integer")
        self._compile = compile_grammar
        self.max_size = max_size
        self._clock = clock
        self._grammars: OrderedDict[GrammarKey, Grammar] = OrderedDict()
        self._lock = threading.Lock()
        self._num_hits = 0
        self._num_misses = 0

    def get(self, key: GrammarKey) -> GrammarLookup[Grammar]:
        """The compiled grammar of ``key``, compiling it on a miss (the least recently used
        entry leaves when full). A compile error propagates and caches nothing, but the
        lookup still counts as a miss: the compile was paid."""
        with self._lock:
            grammar = self._grammars.get(key)
            if grammar is not None:
                self._grammars.move_to_end(key)
                self._num_hits += 1
                return GrammarLookup(grammar, True, 0.0)
            self._num_misses += 1
        started = self._clock()
        grammar = self._compile(key)
        seconds = self._clock() - started
        with self._lock:
            self._grammars[key] = grammar
            self._grammars.move_to_end(key)
            while len(self._grammars) > self.max_size:
                self._grammars.popitem(last=False)
        return GrammarLookup(grammar, False, seconds)

    def __contains__(self, key: Any) -> bool:
        with self._lock:
            return key in self._grammars

    def stats(self) -> GrammarCacheStats:
        with self._lock:
            return GrammarCacheStats(self._num_hits, self._num_misses, len(self._grammars))
