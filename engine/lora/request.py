"""``LoRARequest``: the adapter a request runs with (vLLM's name and fields). No torch."""

from __future__ import annotations

from dataclasses import dataclass

from engine.lora.source import LoRASource


@dataclass(frozen=True)
class LoRARequest:
    """An adapter as the engine knows it: its name (what clients send as ``model``), an id
    unique to this load of it (a name unloaded and loaded again gets a new id, so a cached
    prefix or a loaded copy of the old weights is never reused), and where it comes from."""

    lora_name: str
    lora_int_id: int
    source: LoRASource

    @property
    def lora_path(self) -> str:
        """The source as text (vLLM's field): a directory, or ``random:…``."""
        return str(self.source)
