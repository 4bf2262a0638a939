"""The hooks the engine thread calls (metrics, tracing): :class:`EngineObserver`.

A protocol of its own, below the front end's parts: ``EngineLoop`` calls ``on_step`` and
``on_knob_changes``, ``Admission`` calls ``on_rejected``, and failure containment
(``engine/step_failures.py``) calls ``on_step`` for a failed batch; none of them has to
import another to name it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from engine.llm_engine import KnobChange, LLMEngine
from engine.outputs import RequestOutput
from engine.request_stream import RequestHandle

__all__ = ["EngineObserver"]


class EngineObserver(Protocol):
    """Hooks called from the engine thread (metrics, tracing)."""

    def on_step(
        self,
        engine: LLMEngine,
        outputs: Sequence[RequestOutput],
        handles: Mapping[str, RequestHandle],
    ) -> None: ...

    def on_knob_changes(self, changes: Sequence[KnobChange]) -> None: ...

    def on_rejected(self, reason: str, tenant: str | None) -> None: ...
