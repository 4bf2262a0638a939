"""The evaluator's schedule: evaluation times on a fixed grid, as Prometheus's rule group
stamps them (``rules/group.go``, ``run``).

Evaluation ``n`` is stamped ``start + n × interval``: the scheduled slot, not the time the
loop woke for it. Stamped with the wake-up time, when the evaluation that set ``pending``
woke a few ms late and the one at the boundary woke on time, ``now - active_at`` read 5.999 s
at a 6 s ``for:``, and the alert fired one interval late (15 s at production's interval); on
the grid, ``for: 6s`` at 1 s fires exactly 6 s after the alert went pending. The loop:

- woken before its slot (a wait cut short, a clock that ran slow), waits the remainder: an
  evaluation is never stamped after the clock;
- woken less than one interval late (scheduling jitter), evaluates at the slot;
- woken ``n`` whole intervals late or more (the process was stalled while it waited), skips
  ``n`` slots and evaluates at the latest slot not after the clock;
- after an evaluation that overran into the next slots, skips every slot that began while it
  ran and waits for the next one (as the scrape loops do), so an overloaded evaluator keeps
  some idle time rather than running back to back beside the collector.

So every evaluation is stamped less than one interval before the clock and after the one
before it. Skips are logged when the loop falls behind and when it is back on schedule
(Prometheus counts them in ``prometheus_rule_group_iterations_missed_total``).
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


def next_after(
    start_seconds: float, index: int, now: float, interval_seconds: float
) -> tuple[int, int]:
    """Where the loop goes after the evaluation of slot ``index`` ended at clock ``now``:
    the next slot's index and how many slots it skipped. The slot after ``index`` (0
    skipped) unless it began before ``now``; then the first slot not before ``now``, the
    slots between skipped."""
    following = index + 1
    late = now - slot_seconds(start_seconds, following, interval_seconds)
    if late <= 0:
        return following, 0
    num_skipped = math.ceil(late / interval_seconds)
    # NOTE: as in due_tick, the slots themselves decide, not the rounded division
    if slot_seconds(start_seconds, following + num_skipped, interval_seconds) < now:
        num_skipped += 1
    elif slot_seconds(start_seconds, following + num_skipped - 1, interval_seconds) >= now:
        num_skipped -= 1
    return following + num_skipped, num_skipped


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
    once) and may come back early or late, and an evaluation may overrun: see the module
    docstring for the slots skipped then. An exception from ``evaluate`` is logged and the
    loop goes on."""
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
    num_behind = 0  # slots skipped since the loop last kept to its schedule
    while not stop.is_set():
        now = clock()
        tick = due_tick(start, next_index, now, interval_seconds)
        if tick is None:
            wait(slot_seconds(start, next_index, interval_seconds) - now)
            continue
        try:
            evaluate(tick.at_seconds)
        except Exception:  # NOTE: a failed evaluation (the store unreachable) must not end the loop
            LOG.exception("alert evaluation at %s failed; going on", format_utc(tick.at_seconds))
        num_calls += 1
        next_index, num_overran = next_after(start, tick.index, clock(), interval_seconds)
        num_behind = _report(num_behind, tick.num_missed + num_overran, interval_seconds)
    return num_calls


def _report(num_behind: int, num_skipped: int, interval_seconds: float) -> int:
    """Log the start and the end of a run of skipped slots (not each skip: an overloaded
    evaluator would log every cycle); the slots skipped in the run so far."""
    if num_skipped and not num_behind:
        LOG.warning(
            "alert evaluation fell behind its %g s schedule (an evaluation overran, or the "
            "process stalled): skipped %d slot(s)",
            interval_seconds, num_skipped,
        )  # fmt: skip
    elif not num_skipped and num_behind:
        LOG.info("alert evaluation is back on its schedule, %d slot(s) skipped", num_behind)
    return num_behind + num_skipped if num_skipped else 0
