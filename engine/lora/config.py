"""LoRA serving limits, with vLLM's knob names (``vllm/config/lora.py``). No torch.

``EngineConfig`` holds the knobs (``enable_lora``, ``max_loras``, ``max_cpu_loras``,
``max_lora_rank``, ``lora_load_seconds``) and validates them here once; ``LoRAConfig`` is
what the engine runs with: ``max_cpu_loras`` resolved (vLLM's default is ``max_loras``),
returned by ``EngineConfig.lora_config()``, never written back into the config.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError

#: The ranks vLLM accepts as ``--max-lora-rank`` (its ``MaxLoRARanks``); an adapter's own
#: rank may be anything up to the one chosen.
MAX_LORA_RANKS: tuple[int, ...] = (1, 8, 16, 32, 64, 128, 256, 320, 512)
#: NOTE: a cold load's storage latency beyond an hour is a typo, not a drill.
MAX_LORA_LOAD_SECONDS = 3600.0


def _positive_int(knob: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{knob}={value!r}: must be a positive integer")
    return value


@dataclass(frozen=True)
class LoRAConfig:
    """What a LoRA-enabled engine runs with.

    ``max_loras``: distinct adapters in one batch (the scheduler holds back a request whose
    adapter would be one too many). ``max_cpu_loras``: adapters kept loaded, least recently
    used evicted first. ``max_lora_rank``: the largest rank an adapter may have.
    ``load_seconds``: storage latency each cold load spends on the engine's clock, on top
    of reading the adapter.
    """

    max_loras: int = 1
    max_cpu_loras: int = 1
    max_lora_rank: int = 16
    load_seconds: float = 0.0

    def __post_init__(self) -> None:
        _positive_int("max_loras", self.max_loras)
        _positive_int("max_cpu_loras", self.max_cpu_loras)
        rank = self.max_lora_rank
        if isinstance(rank, bool) or not isinstance(rank, int) or rank not in MAX_LORA_RANKS:
            raise ConfigError(
                f"max_lora_rank={self.max_lora_rank!r}: must be one of "
                f"{', '.join(map(str, MAX_LORA_RANKS))} (vLLM's choices)"
            )
        if self.max_cpu_loras < self.max_loras:
            raise ConfigError(
                f"max_cpu_loras={self.max_cpu_loras}: must be >= max_loras ({self.max_loras}); "
                "every adapter of a batch must be loaded at once"
            )
        seconds = self.load_seconds
        if (
            isinstance(seconds, bool)
            or not isinstance(seconds, int | float)
            or not math.isfinite(seconds)
            or not 0 <= seconds <= MAX_LORA_LOAD_SECONDS
        ):
            raise ConfigError(
                f"lora_load_seconds={seconds!r}: must be between 0 and "
                f"{MAX_LORA_LOAD_SECONDS:g} seconds"
            )


def lora_config(
    *,
    enable_lora: Any,
    max_loras: Any,
    max_cpu_loras: Any,
    max_lora_rank: Any,
    lora_load_seconds: Any,
) -> LoRAConfig | None:
    """The validated ``LoRAConfig`` of these knobs (``None`` when LoRA is off); a
    ``ConfigError`` naming the knob otherwise. The knobs are checked even with LoRA off,
    so a bad value fails at start-up, not when LoRA is turned on."""
    if not isinstance(enable_lora, bool):
        raise ConfigError(f"enable_lora={enable_lora!r}: must be true or false")
    resolved_cpu = max_loras if max_cpu_loras is None else max_cpu_loras
    config = LoRAConfig(
        max_loras=max_loras,
        max_cpu_loras=resolved_cpu,
        max_lora_rank=max_lora_rank,
        load_seconds=lora_load_seconds,
    )
    return config if enable_lora else None
