"""Multi-LoRA serving (vLLM's): one engine, its base model and many adapters in one batch.

One concept per module; the pure ones import no torch:

- ``config``: the knobs' ``LoRAConfig`` (``max_loras``, ``max_cpu_loras``, ``max_lora_rank``,
  ``load_seconds``), validated once;
- ``source``: where an adapter comes from (a PEFT directory, ``random:rank=R``) and
  ``--lora-modules``' ``name=path``;
- ``request``: ``LoRARequest``, the adapter a request runs with;
- ``registry``: the served adapters by name;
- ``slots``: running and waiting requests per adapter, and the ``max_loras`` rule;
- ``manager``: the loaded adapters (LRU) and their loads' cost;
- ``adapters`` and ``setup``: the three above as one engine's ``Adapters``;
- ``shapes``: rank, scaling and targets, read from ``adapter_config.json``;
- ``weights`` and ``batch`` (torch): the packed weights and a step's deltas;
- ``metrics``: ``vllm:lora_requests_info`` and the ``tailwatch:lora_*`` series.
"""

from __future__ import annotations

from engine.lora.config import LoRAConfig
from engine.lora.request import LoRARequest
from engine.lora.source import PeftDirectory, RandomAdapter, parse_lora_module, parse_lora_source

__all__ = [
    "LoRAConfig",
    "LoRARequest",
    "PeftDirectory",
    "RandomAdapter",
    "parse_lora_module",
    "parse_lora_source",
]
