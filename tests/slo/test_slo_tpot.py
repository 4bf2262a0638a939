"""The one TPOT formula and its edge cases (its callers: tests/test_tpot_callers.py)."""

from __future__ import annotations

import math

import pytest

import slo
from slo import tpot_seconds


@pytest.mark.parametrize(
    ("e2e", "ttft", "tokens", "expected"),
    [
        (3.4, 0.2, 5, 0.8),  # (3.4 - 0.2) / 4
        (1.2, 0.2, 2, 1.0),  # two tokens: one gap
        (50.0, 0.2, 1, 0.0),  # one token: no gap, 0 as vLLM's goodput
        (50.0, 0.2, 0, 0.0),  # none generated (e.g. failed at once)
        (None, None, 1, 0.0),  # no gap to time, so the times are not needed
        (None, 0.2, 5, None),
        (3.4, None, 5, None),
        (0.2, 0.2, 5, 0.0),
        (0.1, 0.3, 3, -0.1),  # e2e < ttft (clock skew): shown, not hidden
        (math.inf, 0.2, 3, math.inf),
        (math.nan, 0.2, 3, math.nan),
    ],
)
def test_edge_cases(e2e, ttft, tokens, expected) -> None:
    got = tpot_seconds(e2e, ttft, tokens)
    if expected is None:
        assert got is None
    elif math.isnan(expected):
        assert math.isnan(got)
    else:
        assert got == pytest.approx(expected)


@pytest.mark.parametrize("tokens", [-1, 2.0, True, None])
def test_token_count_must_be_a_non_negative_integer(tokens) -> None:
    with pytest.raises(slo.SLOError, match="num_output_tokens"):
        tpot_seconds(1.0, 0.5, tokens)
