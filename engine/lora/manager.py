"""``LoRAManager``: the loaded adapters (least recently used evicted first) and their loads.

No torch: what a load produces is the runner's business (``loader``: torch weights for the
model runner, the adapter's shape for the simulator). The engine asks ``prepare`` for the
adapters of each step before the step runs; one that is not loaded is loaded then, and its
load costs what reading it costs plus ``LoRAConfig.load_seconds`` of storage latency,
spent through ``spend`` (a sleep, or a virtual clock's advance) — so a cold adapter delays
the whole step it joins, as vLLM's worker loads adapters inside ``execute_model``.

At most ``max_cpu_loras`` adapters stay loaded. The step's own adapters (at most
``max_loras``, which is <= ``max_cpu_loras``) are never evicted for one another.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Generic, TypeVar

from engine.lora.config import LoRAConfig
from engine.lora.request import LoRARequest

Payload = TypeVar("Payload")


@dataclass(frozen=True)
class AdapterLoads:
    """One adapter's cumulative loads: how many, and seconds on the engine's clock."""

    num_loads: int
    load_seconds: float


class LoRAManager(Generic[Payload]):
    def __init__(
        self,
        config: LoRAConfig,
        loader: Callable[[LoRARequest], Payload],
        clock: Callable[[], float],
        spend: Callable[[float], None],
    ) -> None:
        self.config = config
        self._loader = loader
        self._clock = clock
        self._spend = spend
        self._loaded: OrderedDict[int, Payload] = OrderedDict()  # least recent first
        self._names: dict[int, str] = {}
        self._loads: dict[str, AdapterLoads] = {}

    # -- lookups ---------------------------------------------------------------------------

    def get(self, lora_int_id: int) -> Payload:
        """A loaded adapter's payload; ``KeyError`` if ``prepare`` did not load it."""
        return self._loaded[lora_int_id]

    def is_loaded(self, lora_int_id: int) -> bool:
        return lora_int_id in self._loaded

    @property
    def loaded_names(self) -> list[str]:
        """The loaded adapters' names, least recently used first."""
        return [self._names[i] for i in self._loaded]

    @property
    def loads(self) -> dict[str, AdapterLoads]:
        """Cumulative loads per adapter name (a copy)."""
        return dict(self._loads)

    # -- loading ---------------------------------------------------------------------------

    def load(self, lora_request: LoRARequest, pinned: Iterable[int] = ()) -> Payload:
        """Load ``lora_request`` now (or mark it used if loaded), evicting the least recently
        used adapters not in ``pinned`` past ``max_cpu_loras``. The loader's errors
        (a bad adapter) propagate and nothing changes."""
        lora_id = lora_request.lora_int_id
        payload = self._loaded.get(lora_id)
        if payload is not None:
            self._loaded.move_to_end(lora_id)
            return payload
        started = self._clock()
        payload = self._loader(lora_request)
        if self.config.load_seconds:
            self._spend(self.config.load_seconds)
        elapsed = self._clock() - started
        self._evict_for_one_more(set(pinned))
        self._loaded[lora_id] = payload
        self._names[lora_id] = lora_request.lora_name
        before = self._loads.get(lora_request.lora_name, AdapterLoads(0, 0.0))
        self._loads[lora_request.lora_name] = AdapterLoads(
            before.num_loads + 1, before.load_seconds + max(0.0, elapsed)
        )
        return payload

    def prepare(self, lora_requests: Iterable[LoRARequest]) -> None:
        """Make every adapter of a step loaded, the step's own adapters pinned."""
        wanted = {r.lora_int_id: r for r in lora_requests}
        for lora_request in wanted.values():
            self.load(lora_request, pinned=wanted)

    def unload(self, lora_int_id: int) -> bool:
        """Drop an adapter's loaded copy (a request still running with it loads it again)."""
        self._names.pop(lora_int_id, None)
        return self._loaded.pop(lora_int_id, None) is not None

    def _evict_for_one_more(self, pinned: set[int]) -> None:
        for lora_id in list(self._loaded):
            if len(self._loaded) < self.config.max_cpu_loras:
                return
            if lora_id not in pinned:
                del self._loaded[lora_id]
                del self._names[lora_id]
