"""What every route needs, built once per app and kept on ``app.state.context``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from starlette.requests import HTTPConnection

if TYPE_CHECKING:
    from engine.async_engine import AsyncEngine
    from engine.metrics import EngineMetrics
    from engine.tracing import RequestTracer


@dataclass(frozen=True)
class ServerContext:
    async_engine: AsyncEngine
    served_model_name: str
    metrics: EngineMetrics
    tracer: RequestTracer
    admin_token: str | None
    # epoch seconds the app was built; /v1/models reports it as the model's `created`
    created: int

    @property
    def max_model_len(self) -> int:
        return self.async_engine.engine.config.max_model_len


def server_context(connection: HTTPConnection) -> ServerContext:
    return connection.app.state.context
