"""``slo.quantile_batch.histogram_quantiles`` is ``slo.histogram_quantile`` row by row, bit for
bit (values, intervals and flags), and ``slo.histogram.histograms_from_rows`` is the
``ClassicHistogram`` constructor, errors included."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from slo import ClassicHistogram, SLOError, histogram_quantile
from slo.buckets import Bucket
from slo.histogram import histograms_from_rows
from slo.quantile_batch import histogram_quantiles

_BOUND_CHOICES = (-2.0, -0.5, 0.0, 1e-300, 0.1, 0.25, 1.0, 3.0, 7.5, 1e300)


@st.composite
def _layout(draw) -> tuple[float, ...]:
    finite = sorted(draw(st.sets(st.sampled_from(_BOUND_CHOICES), max_size=6)))
    return (*finite, math.inf)


@st.composite
def _row(draw, width: int) -> list[float]:
    """Cumulative counts as scrapes and differences make them: mostly rising, sometimes
    flat, falling, off by float noise, zero or huge."""
    kind = draw(st.sampled_from(["counts", "zeros", "huge", "floats"]))
    if kind == "zeros":
        return [0.0] * width
    if kind == "huge":
        return [2.0**53 + 2 * i for i in range(width)]
    if kind == "floats":
        return draw(st.lists(st.floats(0, 1e308), min_size=width, max_size=width))
    out, current = [], 0.0
    for _ in range(width):
        move = draw(st.sampled_from(["up", "up", "flat", "down", "noise", "tiny"]))
        if move == "up":
            current += draw(st.integers(1, 5)) * draw(st.sampled_from([1.0, 0.1, 0.5]))
        elif move == "down":
            current = max(0.0, current - draw(st.integers(1, 3)))
        elif move == "noise":
            current *= draw(st.sampled_from([1 + 1e-14, 1 - 1e-14, 1 + 1e-11]))
        elif move == "tiny":
            current += 5e-324
        out.append(current)
    return out


def _same(got, want) -> bool:  # type: ignore[no-untyped-def]
    return repr(tuple(got)) == repr(tuple(want)) and all(
        type(g) is type(w) for g, w in zip(got, want, strict=True)
    )


@settings(max_examples=150, deadline=None)
@given(
    data=st.data(),
    layout=_layout(),
    qs=st.lists(
        st.one_of(
            st.sampled_from([0.0, 0.5, 0.9, 0.99, 1.0, -0.1, 1.1, math.nan]),
            st.floats(0, 1),
        ),
        min_size=1,
        max_size=4,
    ),
    tolerance=st.sampled_from([0.0, 1e-12, 1e-3]),
)
def test_batch_quantiles_equal_the_scalar_function(data, layout, qs, tolerance) -> None:
    rows = data.draw(st.lists(_row(len(layout)), min_size=1, max_size=6))
    got = histogram_quantiles(layout, rows, qs, tolerance)
    assert len(got) == len(rows)
    for row, results in zip(rows, got, strict=True):
        buckets = [Bucket(b, c) for b, c in zip(layout, row, strict=True)]
        for q, result in zip(qs, results, strict=True):
            want = histogram_quantile(q, buckets, small_delta_tolerance=tolerance)
            assert _same(result, want), (layout, row, q, tolerance, result, want)


def test_batch_quantiles_of_nothing_and_of_one_bucket() -> None:
    assert histogram_quantiles((1.0, math.inf), [], (0.5,), 1e-12) == []
    (only,) = histogram_quantiles((math.inf,), [[3.0]], (0.5,), 1e-12)
    assert _same(only[0], histogram_quantile(0.5, [Bucket(math.inf, 3.0)]))


def test_histograms_from_rows_are_the_constructors() -> None:
    bounds = (0.1, 1.0, math.inf)
    rows = [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [5.0, 1.0, 7.0]]
    sums = [0.5, None, 9.0]
    built = histograms_from_rows(bounds, rows, sums)
    assert built == [ClassicHistogram(bounds, tuple(r), s) for r, s in zip(rows, sums, strict=True)]
    assert histograms_from_rows(bounds, [], []) == []


@pytest.mark.parametrize(
    ("rows", "words"),
    [
        ([[1.0, 2.0, 3.0], [1.0, -1.0, 3.0]], r"le=1.0 has count -1.0"),
        ([[1.0, 2.0, 3.0], [1.0, math.nan, 3.0]], r"le=1.0 has count nan"),
        ([[1.0, 2.0, 3.0], [1.0, 2.0, math.inf]], r"le=inf has count inf"),
        ([[1.0, 2.0]], r"3 upper bounds but 2 counts"),
    ],
)
def test_histograms_from_rows_raise_the_constructors_error(rows, words) -> None:
    with pytest.raises(SLOError, match=words):
        histograms_from_rows((0.1, 1.0, math.inf), rows, [None] * len(rows))


def test_histograms_from_rows_check_the_layout() -> None:
    with pytest.raises(SLOError, match="highest upper bound must be"):
        histograms_from_rows((0.1, 1.0), [[1.0, 2.0]], [None])
