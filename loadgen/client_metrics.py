"""The first token as a client sees it, as a Prometheus family a collector scrapes.

A gateway (or the load generator) in front of the engines counts its requests' first tokens
in ``tailwatch:client_time_to_first_token_seconds`` (vLLM's TTFT buckets, by
``model_name``), which the collector maps onto ``client_ttft_seconds``
(``collectors/dialect_rules.py``). Its tail against the engines' own TTFT is the gap a
saturated proxy, a misrouted region or TLS/auth in front adds (``Cause.CLIENT_GAP``).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest

from engine.metric_names import BUCKETS

#: The family's name on the wire (``_bucket``, ``_sum``, ``_count`` follow it).
CLIENT_TTFT_NAME = "tailwatch:client_time_to_first_token_seconds"
MODEL_LABEL = "model_name"


class ClientMetrics:
    """A registry of the clients' first tokens, rendered as Prometheus text."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._ttft = Histogram(
            CLIENT_TTFT_NAME,
            "Time to first token as the client saw it (seconds), gateway and network included.",
            [MODEL_LABEL],
            buckets=BUCKETS["time_to_first_token"],
            registry=self.registry,
        )

    def observe_ttft(self, model: str, ttft_seconds: float) -> None:
        """Count one request's first token, ``ttft_seconds`` after the client sent it."""
        self._ttft.labels(model).observe(ttft_seconds)

    def render(self) -> tuple[str, str]:
        """``GET /metrics``: the body (Prometheus text 0.0.4) and its content type."""
        return generate_latest(self.registry).decode("utf-8"), CONTENT_TYPE_PLAIN_0_0_4
