"""``build_adapters``: the ``Adapters`` of an engine, with the loader its runner needs.

The torch engine loads an adapter's weights onto the model's device; the simulator reads
only its shape (rank and targets), which is all its step cost needs. Either way a cold load
spends ``LoRAConfig.load_seconds`` on the engine's clock: a sleep on a real clock, an
advance of a ``VirtualClock``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.lora.adapters import Adapters
from engine.lora.config import LoRAConfig
from engine.lora.request import LoRARequest
from engine.lora.shapes import adapter_shape
from engine.lora.slots import AdapterSlots
from engine.model.config import ModelConfig

if TYPE_CHECKING:
    from engine.model.llama import LlamaForCausalLM


def build_adapters(
    config: LoRAConfig,
    slots: AdapterSlots,
    clock: Callable[[], float],
    model_config: ModelConfig,
    *,
    model: LlamaForCausalLM | None = None,
    advance: Callable[[float], None] | None = None,
) -> Adapters:
    """Adapters for the torch ``model`` or, with ``model`` None, for a simulated one whose
    runner spends time with ``advance``."""
    loader: Callable[[LoRARequest], Any]
    if model is None:

        def loader(r: LoRARequest) -> Any:
            return adapter_shape(r.source, config.max_lora_rank)

        spend = advance or time.sleep
    else:
        from engine.lora.weights import load_lora_weights
        from engine.sim.runner import VirtualClock

        param = next(model.parameters())

        def loader(r: LoRARequest) -> Any:
            return load_lora_weights(
                r.source, model_config, config.max_lora_rank, param.device, param.dtype
            )

        spend = clock.advance if isinstance(clock, VirtualClock) else time.sleep
    return Adapters(config, slots, loader, clock, spend)
