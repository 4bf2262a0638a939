"""Which adapters are running and waiting, and whether one more may run. No torch.

The scheduler keeps one ``AdapterSlots`` and tells it every move of a LoRA request
(added, admitted, preempted, finished), so the counts cost O(1) a move, never a scan.
``max_loras`` bounds the distinct adapters among the *running* requests, not only the
scheduled ones: a running request that got no budget this step still runs next step,
so bounding the running set is what keeps every step within ``max_loras``.
"""

from __future__ import annotations

from collections import Counter

from engine.lora.request import LoRARequest


class AdapterSlots:
    """Counts by adapter id (one load of an adapter: a name reloaded in place is another
    adapter until the old one's requests are done); reported by name."""

    def __init__(self, max_loras: int) -> None:
        self.max_loras = max_loras
        self._running: Counter[LoRARequest] = Counter()
        self._waiting: Counter[LoRARequest] = Counter()

    def can_run(self, lora_request: LoRARequest | None) -> bool:
        """Whether a request of this adapter may start running now (the base model always
        may)."""
        if lora_request is None:
            return True
        return lora_request in self._running or len(self._running) < self.max_loras

    def added(self, lora_request: LoRARequest | None) -> None:
        if lora_request is not None:
            self._waiting[lora_request] += 1

    def started(self, lora_request: LoRARequest | None) -> None:
        """Waiting → running (an admission or a resumption)."""
        if lora_request is not None:
            _take(self._waiting, lora_request)
            self._running[lora_request] += 1

    def preempted(self, lora_request: LoRARequest | None) -> None:
        """Running → waiting."""
        if lora_request is not None:
            _take(self._running, lora_request)
            self._waiting[lora_request] += 1

    def finished(self, lora_request: LoRARequest | None, was_running: bool) -> None:
        if lora_request is not None:
            _take(self._running if was_running else self._waiting, lora_request)

    def in_flight(self, lora_request: LoRARequest) -> bool:
        """Whether any request of this adapter is running or waiting."""
        return lora_request in self._running or lora_request in self._waiting

    @property
    def running(self) -> dict[str, int]:
        """Running requests per adapter name."""
        return _by_name(self._running)

    @property
    def waiting(self) -> dict[str, int]:
        """Waiting requests per adapter name."""
        return _by_name(self._waiting)


def _by_name(counts: Counter[LoRARequest]) -> dict[str, int]:
    names: dict[str, int] = {}
    for lora_request, count in counts.items():
        names[lora_request.lora_name] = names.get(lora_request.lora_name, 0) + count
    return names


def _take(counts: Counter[LoRARequest], lora_request: LoRARequest) -> None:
    left = counts[lora_request] - 1
    if left > 0:
        counts[lora_request] = left
    else:
        del counts[lora_request]
