"""``TAILWATCH_DEMO_CYCLE_SECONDS``: the demo cycle's phase seconds (the fresh-clone test's
knob). Unset or blank keeps the defaults; anything but three seconds in range is one error
line naming the variable and the value, before anything starts."""

from __future__ import annotations

import math
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tailwatch.up_demo import (
    BASELINE_SECONDS,
    CYCLE_ENV,
    MAX_PHASE_SECONDS,
    PERTURBATION_SECONDS,
    RECOVERY_SECONDS,
    cycle_durations,
)

DEFAULTS = (BASELINE_SECONDS, PERTURBATION_SECONDS, RECOVERY_SECONDS)
IN_RANGE = st.floats(min_value=0.001, max_value=MAX_PHASE_SECONDS)


@pytest.mark.parametrize("raw", [None, "", "  "])
def test_unset_or_blank_keeps_the_defaults(raw) -> None:
    assert cycle_durations({} if raw is None else {CYCLE_ENV: raw}) == DEFAULTS


@settings(max_examples=50)
@given(st.tuples(IN_RANGE, IN_RANGE, IN_RANGE))
def test_three_seconds_in_range_are_read_back(values) -> None:
    raw = ",".join(repr(v) for v in values)
    assert cycle_durations({CYCLE_ENV: raw}) == values


def _out_of_range(value: float) -> bool:
    return not (math.isfinite(value) and 0 < value <= MAX_PHASE_SECONDS)


@settings(max_examples=50)
@given(
    st.one_of(
        st.text(max_size=40).filter(lambda t: t.strip()),
        st.floats(allow_nan=True, allow_infinity=True)
        .filter(_out_of_range)
        .map(lambda v: f"8,{v!r},8"),
        st.lists(IN_RANGE, max_size=6)
        .filter(lambda v: len(v) != 3)
        .map(lambda v: ",".join(map(repr, v)) or ","),
    )
)
def test_anything_else_is_an_error_naming_the_variable_and_value(raw: str) -> None:
    try:
        values = cycle_durations({CYCLE_ENV: raw})
    except ValueError as error:
        assert str(error).startswith(f"{CYCLE_ENV}={raw!r}: expected")
    else:  # arbitrary text may happen to be three good numbers ("1,2,3")
        assert len(values) == 3 and not any(_out_of_range(v) for v in values)


def test_tailwatch_up_refuses_a_bad_cycle_before_starting_anything(tmp_path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "tailwatch.cli", "up", "--demo"],
        cwd=tmp_path, env={**os.environ, CYCLE_ENV: "8,0,8"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"error: {CYCLE_ENV}='8,0,8': expected baseline,perturbation,recovery seconds, each "
        f"above 0 and at most {MAX_PHASE_SECONDS:.0f}, e.g. 8,20,8"
    ]
    assert not (tmp_path / ".tailwatch").exists()
