"""The plans of the client-side kinds: a gateway in front of the engines whose added delay
steps up (the client-vs-server gap), and its benign twin, a gateway whose delay is the same
before and during (``kinds.py`` holds the table).

The delay is the virtual gateway's (``loadgen.virtual.gateway``): it adds to every first
token the clients see, never to the engines' own TTFT. A generated run's gateway is there
from the warm-up on, with a drawn overhead of a few milliseconds (TLS, routing), so the
baseline the rules compare with holds it.
"""

from __future__ import annotations

from loadgen.generate.base import Base
from loadgen.generate.capacity import step_seconds_with_prefill
from loadgen.generate.plan import Draw, Fragment, Plan

#: The added delay's floor (seconds): below it a gap is within a network's own jitter.
MIN_DELAY_SECONDS = 0.02
#: The drawn baseline overhead's range (seconds): a proxy's TLS and routing.
OVERHEAD_SECONDS = (0.002, 0.02)


def first_token_seconds(b: Base) -> float:
    """The engines' estimated first token at the baseline: one step that prefills the mean
    prompt beside the typical batch's decodes (no queueing)."""
    batch = max(1, round(b.load * b.max_num_seqs))
    context = b.prompt_tokens + b.output_tokens // 2
    return step_seconds_with_prefill(b.gpu, batch, context, b.prompt_tokens)


def _gateway(delay_seconds: float) -> Fragment:
    return {"gateway": {"delay_seconds": round(delay_seconds, 6)}}


def _details(d: Draw, overhead: float, added: float) -> dict:
    return {
        "overhead_ms": round(overhead * 1000, 3),
        "added_delay_ms": round(added * 1000, 3),
        "first_token_ms": round(first_token_seconds(d.base) * 1000, 3),
    }


def client_gap(d: Draw) -> Plan:
    """A gateway adds a drawn overhead (2-20 ms) to every first token; then its delay grows
    by ``magnitude`` times the engines' estimated first token (at least 20 ms): a saturated
    proxy, a misrouted region, auth added in front. The engines serve as before."""
    b = d.base
    overhead = d.rng.uniform(*OVERHEAD_SECONDS)
    added = max(MIN_DELAY_SECONDS, d.magnitude * first_token_seconds(b))

    def at_level(level: float) -> Fragment:
        return _gateway(overhead + level * added)

    return Plan(
        [b.chat("chat", b.rate())],
        b.engine(),
        at_level,
        _gateway(overhead),
        d.magnitude,
        1.0,
        _details(d, overhead, added),
        start=_gateway(overhead),
    )


def constant_gateway_overhead(d: Draw) -> Plan:
    """A gateway whose delay, ``magnitude`` times the engines' estimated first token (at
    least 20 ms), is there from the start and never changes: the clients' first tokens are
    slower than the engines' by the same amount before and during. No incident."""
    b = d.base
    delay = max(MIN_DELAY_SECONDS, d.magnitude * first_token_seconds(b))

    def at_level(level: float) -> Fragment:
        return _gateway(delay)

    return Plan(
        [b.chat("chat", b.rate())],
        b.engine(),
        at_level,
        _gateway(delay),
        d.magnitude,
        1.0,
        _details(d, delay, 0.0),
        start=_gateway(delay),
    )
