"""Live knob changes grouped for a reader: one line per set of knobs changed together.

A drill (or an operator) patches the same knobs on every replica at once, and the collector
sees each (replica, knob) pair as its own counter series: two knobs on three replicas are six
:class:`~alerts.triage.data.KnobChange` values, which read as six "recent change" lines.
:func:`group_knob_changes` folds them into what happened — "max_num_seqs,
step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC" — one group per distinct
set of knobs changed on a replica at about the same time.

Pure; the order of the changes never matters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from alerts.triage.data import KnobChange
from alerts.views.display import clock

#: Changes first seen this close to the first of a run count as one change time.
#: NOTE: a change made on every replica at once is first seen by each replica's next scrape,
#: so the replicas' times differ by up to a scrape interval (15 s by default).
SAME_TIME_SECONDS = 15.0
#: Where a replica name's shared stem may end: ``replica-0, -1`` (never inside ``12``).
_SEPARATORS = "-_.:/@"


@dataclass(frozen=True)
class KnobChangeGroup:
    """The same ``knobs`` changed on each of ``targets`` (``replica-2`` before
    ``replica-10``) between ``first_seconds`` and ``last_seconds`` (the scrapes that first saw
    them; ``None``: not known); ``num_changes`` counts every change, all targets and knobs
    together."""

    knobs: tuple[str, ...]
    targets: tuple[str, ...]
    first_seconds: float | None
    last_seconds: float | None
    num_changes: float

    def when(self) -> str:
        """``at 04:11:32 UTC``, ``between 04:11:32 and 04:11:40 UTC``, or empty (unknown)."""
        if self.first_seconds is None or self.last_seconds is None:
            return ""
        first, last = clock(self.first_seconds), clock(self.last_seconds)
        if first == last:
            return f"at {first}"
        return f"between {first.removesuffix(' UTC')} and {last}"

    def describe(self) -> str:
        """``max_num_seqs, step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC``."""
        when = self.when()
        text = f"{', '.join(self.knobs)} changed on {short_targets(self.targets)}"
        return f"{text} {when}" if when else text


def _natural(name: str) -> tuple[tuple[int, int | str], ...]:
    """A sort key that puts ``replica-2`` before ``replica-10``."""
    return tuple((0, int(p)) if p.isdigit() else (1, p) for p in re.split(r"(\d+)", name))


def short_targets(targets: Sequence[str]) -> str:
    """Replica names with their shared stem written once: ``replica-0, -1, -2``;
    ``127.0.0.1:8000, :8001``. Names that share no stem ending at a separator
    (``-_.:/@``) are listed whole."""
    names = list(dict.fromkeys(targets))
    if len(names) < 2:
        return ", ".join(names)
    first, last = min(names), max(names)  # NOTE: what these share, every name between shares
    pairs = enumerate(zip(first, last, strict=False))  # NOTE: up to the shorter one's end
    size = next((i for i, (a, b) in pairs if a != b), min(len(first), len(last)))
    prefix = first[:size]
    cut = max(prefix.rfind(sep) for sep in _SEPARATORS)
    if cut <= 0 or any(len(name) <= cut + 1 for name in names):
        return ", ".join(names)
    return ", ".join([names[0], *(name[cut:] for name in names[1:])])


def _runs(changes: Sequence[KnobChange]) -> list[list[KnobChange]]:
    """Timed changes in runs that start at most :data:`SAME_TIME_SECONDS` apart from their
    first, oldest first; the untimed ones as one run of their own, last."""
    timed = sorted(
        (c for c in changes if c.at_seconds is not None),
        key=lambda c: (c.at_seconds, c.target, c.knob),
    )
    runs: list[list[KnobChange]] = []
    for change in timed:
        if runs and change.at_seconds - runs[-1][0].at_seconds <= SAME_TIME_SECONDS:  # type: ignore[operator]
            runs[-1].append(change)
        else:
            runs.append([change])
    untimed = sorted((c for c in changes if c.at_seconds is None), key=lambda c: (c.target, c.knob))
    return [*runs, untimed] if untimed else runs


def _bound(times: Iterable[float | None], pick) -> float | None:  # type: ignore[no-untyped-def]
    known = [t for t in times if t is not None]
    return pick(known) if known else None


def group_knob_changes(changes: Iterable[KnobChange]) -> tuple[KnobChangeGroup, ...]:
    """``changes`` grouped: within each run of changes first seen at about the same time,
    the replicas that changed the same set of knobs form one group. Oldest first; then by
    knobs and targets."""
    groups: list[KnobChangeGroup] = []
    for run in _runs(list(changes)):
        by_target: dict[str, list[KnobChange]] = {}
        for change in run:
            by_target.setdefault(change.target, []).append(change)
        by_knobs: dict[tuple[str, ...], list[str]] = {}
        for target, mine in sorted(by_target.items(), key=lambda item: _natural(item[0])):
            knobs = tuple(sorted({c.knob for c in mine}))
            by_knobs.setdefault(knobs, []).append(target)
        for knobs, targets in by_knobs.items():
            members = [c for t in targets for c in by_target[t]]
            groups.append(
                KnobChangeGroup(
                    knobs,
                    tuple(targets),
                    _bound((c.at_seconds for c in members), min),
                    _bound((c.at_seconds for c in members), max),
                    sum(c.num_changes for c in members),
                )
            )
    untimed = float("inf")
    return tuple(
        sorted(
            groups,
            key=lambda g: (
                untimed if g.first_seconds is None else g.first_seconds,
                g.knobs,
                g.targets,
            ),
        )
    )
