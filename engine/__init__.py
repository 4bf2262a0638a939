"""The bundled inference engine: ``LLM`` and ``SamplingParams`` for offline use,
``LLMEngine`` and ``EngineConfig`` for serving.

Names are imported lazily so that the pure-Python parts (``engine.kv_cache``,
``engine.scheduler``) can be used and tested without importing torch.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "LLM": "engine.llm",
    "LLMEngine": "engine.llm_engine",
    "EngineConfig": "engine.config",
    "SamplingParams": "engine.sampling_params",
    "RequestOutput": "engine.outputs",
    "CompletionOutput": "engine.outputs",
    "RequestTimings": "engine.outputs",
    "EngineError": "engine.errors",
    "ConfigError": "engine.errors",
    "RequestError": "engine.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'engine' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
