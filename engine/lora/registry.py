"""The adapters an engine serves, by name: what ``/v1/models`` lists and requests select.

No torch. Adding checks the name only; loading the weights (and refusing a bad adapter) is
``LoRAManager``'s, which the engine calls first, so a bad adapter is never registered.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from engine.errors import ConfigError
from engine.lora.request import LoRARequest
from engine.lora.source import LoRASource, check_lora_name


class LoRARegistry:
    def __init__(self) -> None:
        self._by_name: dict[str, LoRARequest] = {}
        self._ids = itertools.count(1)  # NOTE: vLLM's ids start at 1 (0 is "no adapter")

    def new_request(
        self,
        name: str,
        source: LoRASource,
        *,
        reserved: frozenset[str],
        replace: bool = False,
    ) -> LoRARequest:
        """A ``LoRARequest`` (with a new id) for a name not yet served, or with ``replace``
        for one that may be; ``ConfigError`` when the name is taken (by an adapter, unless
        ``replace``, or by a base model name in ``reserved``)."""
        check_lora_name(name)
        if name in reserved or (name in self._by_name and not replace):
            raise ConfigError(
                f"lora_name={name!r}: the adapter {name!r} has already been loaded (or names "
                "the base model); unload it first or pick another name"
            )
        return LoRARequest(name, next(self._ids), source)

    def add(self, lora_request: LoRARequest) -> None:
        self._by_name[lora_request.lora_name] = lora_request

    def remove(self, name: str) -> LoRARequest | None:
        return self._by_name.pop(name, None)

    def get(self, name: str) -> LoRARequest | None:
        return self._by_name.get(name)

    def __iter__(self) -> Iterator[LoRARequest]:
        return iter(list(self._by_name.values()))

    def __len__(self) -> int:
        return len(self._by_name)
