"""A virtual gateway in front of the virtual replicas: it adds a delay to every first token
and exports the first tokens its clients see (``loadgen.client_metrics``).

The delay stands for what sits between users and engines: a proxy, a router, the network,
TLS or auth. A scenario's phase sets it (``gateway: {delay_seconds: ...}``); a constant
delay over the whole run is overhead the baseline already holds (no incident), a step in it
is the client-vs-server gap. The engines never see it: their TTFT is measured from the
moment a request reaches them, so a client's TTFT is the engine's plus the delay.

NOTE: the delay is added on the way back (to the first token the client sees), not to the
arrival the engine sees: with a constant delay the two give the engine the same load shifted
in time, and keeping arrivals fixed keeps every other drill's schedule as it was.
"""

from __future__ import annotations

from loadgen.client_metrics import ClientMetrics

#: The scrape target the gateway's ``/metrics`` is stored under.
GATEWAY_TARGET = "gateway"


class VirtualGateway:
    """The gateway's delay (a knob) and the first tokens its clients saw."""

    def __init__(self, delay_seconds: float = 0.0) -> None:
        self.delay_seconds = delay_seconds
        self.target = GATEWAY_TARGET
        self.metrics = ClientMetrics()

    def set_delay(self, delay_seconds: float) -> None:
        if delay_seconds < 0:
            raise ValueError(f"a gateway delay must be >= 0 s, got {delay_seconds}")
        self.delay_seconds = delay_seconds

    def observe(self, model: str, engine_ttft_seconds: float) -> float:
        """The client's TTFT for a first token the engine gave ``engine_ttft_seconds`` after
        the request reached it; counted in the gateway's family."""
        ttft = engine_ttft_seconds + self.delay_seconds
        self.metrics.observe_ttft(model, ttft)
        return ttft

    def exposition(self) -> tuple[str, str]:
        return self.metrics.render()
