"""``Adapters``: what a LoRA-enabled engine knows of its adapters, in one place.

The registry (names clients select, what ``/v1/models`` lists), the loaded copies
(``LoRAManager``: LRU, load latency) and, read from the scheduler's ``AdapterSlots``, which
adapters have requests running and waiting. ``LLMEngine`` holds one when LoRA is on and
calls ``prepare`` with each step's batch before it runs. No torch: the loader is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.lora.config import LoRAConfig
from engine.lora.manager import AdapterLoads, LoRAManager
from engine.lora.registry import LoRARegistry
from engine.lora.request import LoRARequest
from engine.lora.slots import AdapterSlots
from engine.lora.source import LoRASource


@dataclass(frozen=True)
class LoRAStats:
    """One moment of an engine's adapters (what the LoRA metrics read after a step)."""

    max_loras: int
    running: dict[str, int]  # adapter name → running requests
    waiting: dict[str, int]  # adapter name → waiting requests
    loaded: tuple[str, ...]  # names of the loaded adapters, least recently used first
    loads: dict[str, AdapterLoads]  # cumulative loads per adapter name


class Adapters:
    def __init__(
        self,
        config: LoRAConfig,
        slots: AdapterSlots,
        loader: Callable[[LoRARequest], Any],
        clock: Callable[[], float],
        spend: Callable[[float], None],
    ) -> None:
        self.config = config
        self.slots = slots
        self.registry = LoRARegistry()
        self.manager: LoRAManager[Any] = LoRAManager(config, loader, clock, spend)

    def add(
        self,
        name: str,
        source: LoRASource,
        reserved: Iterable[str] = (),
        *,
        replace: bool = False,
    ) -> LoRARequest:
        """Register and load an adapter (vLLM's ``add_lora``: loaded now, so a bad one is
        refused here and the first request does not wait for it). ``ConfigError`` naming
        what is wrong; nothing changes then. ``replace`` (vLLM's ``load_inplace``) serves
        this one under a name already served, in place of the old one."""
        lora_request = self.registry.new_request(
            name, source, reserved=frozenset(reserved), replace=replace
        )
        self.manager.load(lora_request)
        old = self.registry.get(name)
        self.registry.add(lora_request)
        if old is not None and not self.slots.in_flight(old):
            self.manager.unload(old.lora_int_id)
        return lora_request

    def remove(self, name: str) -> bool:
        """Stop serving ``name``; False if it is not served. Requests already admitted with
        it finish with it (its loaded copy is dropped now only if none is in flight; else
        it stays until least recently used, and is loaded again if evicted before they end)."""
        lora_request = self.registry.remove(name)
        if lora_request is None:
            return False
        if not self.slots.in_flight(lora_request):
            self.manager.unload(lora_request.lora_int_id)
        return True

    def resolve(self, name: str) -> LoRARequest | None:
        return self.registry.get(name)

    def __iter__(self) -> Iterator[LoRARequest]:
        return iter(self.registry)

    def prepare(self, lora_requests: Iterable[LoRARequest | None]) -> None:
        """Load every adapter of a step's batch that is not loaded (spending its load time)."""
        self.manager.prepare(r for r in lora_requests if r is not None)

    def stats(self) -> LoRAStats:
        return LoRAStats(
            max_loras=self.config.max_loras,
            running=self.slots.running,
            waiting=self.slots.waiting,
            loaded=tuple(self.manager.loaded_names),
            loads=self.manager.loads,
        )
