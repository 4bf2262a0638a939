"""The evaluator's schedule, as Prometheus's rule group keeps it (``rules/group.go``, ``run``).

Evaluation ``n`` is stamped ``start + n × interval``: the scheduled slot, not the time the
loop woke for it. Stamped with the wake-up time, when the evaluation that set ``pending``
woke a few ms late and the one at the boundary woke on time, ``now - active_at`` read 5.999 s
at a 6 s ``for:``, and the alert fired one interval late (15 s at production's interval); on the grid, ``for: 6s`` at
1 s fires exactly 6 s after the alert went pending. At each slot the loop:

- woken before the slot (a wait cut short, a clock that ran slow), waits the remainder: an
  evaluation is never stamped after the clock;
- woken less than one interval late (scheduling jitter), evaluates at the slot;
- woken ``n`` whole intervals late or more (the process stalled, an evaluation overran),
  skips ``n`` slots and evaluates at the latest slot not after the clock, logging the skip
  (Prometheus counts them in ``prometheus_rule_group_iterations_missed_total``); so every
  evaluation is stamped less than one interval before the clock, and after the previous one.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable
from typing import NamedTuple

from slo.window import format_utc

LOG = logging.getLogger(__name__)


class Tick(NamedTuple):
    """The slot to evaluate now: its index on the grid, its time (Unix seconds), and how many
    slots before it were skipped (0 when the loop kept to its schedule)."""

    index: int
    at_seconds: float
    num_missed: int


def slot_seconds(start_seconds: float, index: int, interval_seconds: float) -> float:
    """Slot ``index``'s time: ``start + index × interval``, computed from the index rather
    than summed, so no rounding error builds up over a long run."""
    return start_seconds + index * interval_seconds


def due_tick(
    start_seconds: float, next_index: int, now: float, interval_seconds: float
) -> Tick | None:
    """The tick to evaluate at clock ``now`` when slot ``next_index`` is the next one
    planned; ``None`` when that slot is still ahead of ``now`` (wait for it). A slot is due
    at its time exactly; ``now`` a whole number of intervals or more past it skips that many
    slots, and the tick is the latest slot not after ``now``."""
    planned = slot_seconds(start_seconds, next_index, interval_seconds)
    if now < planned:
        return None
    num_missed = math.floor((now - planned) / interval_seconds)
    # NOTE: the float division may round across a slot; checking the slots themselves
    # against ``now`` keeps the tick never after the clock and the next slot always after it
    if slot_seconds(start_seconds, next_index + num_missed, interval_seconds) > now:
        num_missed -= 1
    elif slot_seconds(start_seconds, next_index + num_missed + 1, interval_seconds) <= now:
        num_missed += 1
    index = next_index + num_missed
    return Tick(index, slot_seconds(start_seconds, index, interval_seconds), num_missed)


def run_ticks(
    evaluate: Callable[[float], object],
    stop: threading.Event,
    interval_seconds: float,
    clock: Callable[[], float],
    wait: Callable[[float], object] | None = None,
    start_seconds: float | None = None,
) -> int:
    """Call ``evaluate(at_seconds)`` at each slot ``start + n × interval`` (``start``
    defaults to ``clock()`` now; seconds) until ``stop`` is set; returns how many calls were
    made. ``wait(seconds)`` sleeps (default ``stop.wait``: setting ``stop`` ends the wait at
    once) and may come back early or late; see the module docstring for what happens then.
    An exception from ``evaluate`` is logged and the loop goes on to the next slot."""
    if not (
        isinstance(interval_seconds, int | float)
        and not isinstance(interval_seconds, bool)
        and 0 < interval_seconds < math.inf
    ):
        raise ValueError(f"interval_seconds={interval_seconds!r}: must be a positive number")
    wait = stop.wait if wait is None else wait
    start = clock() if start_seconds is None else start_seconds
    next_index = 0
    num_calls = 0
    while not stop.is_set():
        now = clock()
        tick = due_tick(start, next_index, now, interval_seconds)
        if tick is None:
            wait(slot_seconds(start, next_index, interval_seconds) - now)
            continue
        if tick.num_missed:
            LOG.warning(
                "alert evaluation ran %d whole interval(s) of %g s behind its schedule: "
                "skipped %d slot(s), evaluating at %s",
                tick.num_missed, interval_seconds, tick.num_missed, format_utc(tick.at_seconds),
            )  # fmt: skip
        try:
            evaluate(tick.at_seconds)
        except Exception:  # NOTE: a failed evaluation (the store unreachable) must not end the loop
            LOG.exception("alert evaluation at %s failed; going on", format_utc(tick.at_seconds))
        num_calls += 1
        next_index = tick.index + 1
    return num_calls
