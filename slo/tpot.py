"""Time per output token, the one formula every layer uses (goodput, benchmarks, traces).

``TPOT = (e2e - TTFT) / (output_tokens - 1)``: the decode time spread over the tokens after
the first, exactly as ``vllm bench serve`` computes it (``vllm/benchmarks/serve.py``, 0.33).
A request with at most one output token has no gap between tokens; vLLM "regards tpot as 0
for goodput" there, and so do we, whether or not its times were recorded.
"""

from __future__ import annotations

from typing import overload

from slo.errors import SLOError


@overload
def tpot_seconds(e2e_seconds: float, ttft_seconds: float, num_output_tokens: int) -> float: ...


@overload
def tpot_seconds(
    e2e_seconds: float | None, ttft_seconds: float | None, num_output_tokens: int
) -> float | None: ...


def tpot_seconds(
    e2e_seconds: float | None, ttft_seconds: float | None, num_output_tokens: int
) -> float | None:
    """``(e2e - ttft) / (num_output_tokens - 1)`` in seconds.

    0 when at most one token was generated (no inter-token gap, times not needed); ``None``
    when two or more were and either time is unknown. The times are taken as measured: a
    decode time below zero (``e2e < ttft``, clock skew between two sources) gives a negative
    TPOT rather than being hidden, and NaN stays NaN. Raises :class:`SLOError` for a negative
    or non-integer token count.
    """
    if isinstance(num_output_tokens, bool) or not isinstance(num_output_tokens, int):
        raise SLOError(f"num_output_tokens must be an integer, got {num_output_tokens!r}")
    if num_output_tokens < 0:
        raise SLOError(f"num_output_tokens must be >= 0, got {num_output_tokens}")
    if num_output_tokens <= 1:
        return 0.0
    if e2e_seconds is None or ttft_seconds is None:
        return None
    return (e2e_seconds - ttft_seconds) / (num_output_tokens - 1)
