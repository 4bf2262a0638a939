"""The backoff policy: full jitter under an exponential, capped ceiling."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import RetryPolicy, is_retryable_status


def test_ceilings_double_then_cap():
    policy = RetryPolicy(max_attempts=10, base_delay_seconds=0.5, max_delay_seconds=5.0)
    assert [policy.ceiling_seconds(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.ceiling_seconds(10**9) == 5.0  # no overflow for absurd retry numbers


def test_retryable_statuses():
    assert [
        c for c in (200, 301, 400, 404, 408, 429, 499, 500, 503, 599) if is_retryable_status(c)
    ] == [
        429,
        500,
        503,
        599,
    ]


@settings(max_examples=100, deadline=None)
@given(
    st.integers(min_value=1, max_value=100),
    st.floats(min_value=0, max_value=1e6),
    st.floats(min_value=0, max_value=1e6),
    st.integers(min_value=0, max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
)
def test_delay_never_exceeds_cap_whatever_random_returns(attempts, base, extra, retry, draw):
    policy = RetryPolicy(attempts, base, base + extra)
    delay = policy.delay_seconds(retry, lambda: draw)
    assert 0.0 <= delay <= policy.ceiling_seconds(retry) <= policy.max_delay_seconds
