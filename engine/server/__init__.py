"""The engine's HTTP server: OpenAI API, probes, /metrics and the admin API (FastAPI).

``build_app`` wires an app over a running ``AsyncEngine``; ``build_engine_server``
builds the whole process (engine, metrics, tracing, app) from an ``EngineConfig``.
"""

from __future__ import annotations

from engine.server.app import build_app
from engine.server.launch import EngineServer, ServeOptions, build_engine_server

__all__ = ["EngineServer", "ServeOptions", "build_app", "build_engine_server"]
