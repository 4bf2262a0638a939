"""Change events grouped for a reader: one group per set of changes made together.

A deploy (or a drill) patches the same knobs on every replica at once, and the detector
records each (replica, knob) pair as its own event: two knobs on three replicas are six
:class:`~collectors.store.change_records.ChangeEvent` values, which read as six lines.
:func:`group_changes` folds them into what happened — "max_num_seqs 32 → 4,
step_delay_seconds changed on replica-0, -1, -2 at 04:11:32 UTC" — one group per distinct set
of changes made on a target at about the same time; the traffic mix's shifts of one moment
are one group ("traffic mix: tenant batch 0% → 21% of requests, …"), and so are the targets
added, removed or restarted together ("replica-3, -4 added at …"). Each group is one line of
the evidence table and one hypothesis of triage (:mod:`alerts.triage.change_hypotheses`).

Pure; the order of the events never matters.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from alerts.views.display import clock
from collectors.store.change_records import ChangeEvent, ChangeKind, describe_change

#: Changes first seen this close to the first of a run count as one change time.
#: NOTE: a change made on every replica at once is first seen by each replica's next scrape,
#: so the replicas' times differ by up to a scrape interval (15 s by default).
SAME_TIME_SECONDS = 15.0
#: Where a replica name's shared stem may end: ``replica-0, -1`` (never inside ``12``).
_SEPARATORS = "-_.:/@"


@dataclass(frozen=True)
class ChangeGroup:
    """The same changes (``events``' descriptions, ``what``) made on each of ``targets``
    (``replica-2`` before ``replica-10``; none for the fleet's traffic) between
    ``first_seconds`` and ``last_seconds``."""

    kind: ChangeKind
    what: tuple[str, ...]
    targets: tuple[str, ...]
    first_seconds: float
    last_seconds: float
    events: tuple[ChangeEvent, ...]

    @property
    def num_changes(self) -> int:
        return len(self.events)

    @property
    def subjects(self) -> tuple[str, ...]:
        """What changed, by name (knobs, labels, tenants), without the values."""
        return tuple(sorted({e.subject for e in self.events}))

    def when(self) -> str:
        """``at 04:11:32 UTC`` or ``between 04:11:32 and 04:11:40 UTC``."""
        first, last = clock(self.first_seconds), clock(self.last_seconds)
        if first == last:
            return f"at {first}"
        return f"between {first.removesuffix(' UTC')} and {last}"

    def describe(self) -> str:
        """What happened, where and when (see the module docstring)."""
        what = ", ".join(self.what)
        if self.kind is ChangeKind.TRAFFIC:
            return f"traffic mix: {what} {self.when()}"
        where = short_targets(self.targets)
        if self.kind is ChangeKind.TARGET:
            return f"{where} {what} {self.when()}"
        return f"{what} changed on {where} {self.when()}"


def natural(name: str) -> tuple[tuple[int, int | str], ...]:
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


def _runs(events: Sequence[ChangeEvent]) -> list[list[ChangeEvent]]:
    """Events in runs that start at most :data:`SAME_TIME_SECONDS` apart from their first,
    oldest first."""
    runs: list[list[ChangeEvent]] = []
    for event in sorted(events, key=_order):
        if runs and event.at_seconds - runs[-1][0].at_seconds <= SAME_TIME_SECONDS:
            runs[-1].append(event)
        else:
            runs.append([event])
    return runs


def _order(event: ChangeEvent) -> tuple:
    """Events in a fixed order: by identity, then values (a hand-made input may hold one
    identity twice, which a store never returns)."""
    return (*event.key, event.before, event.after)


def _kind_order(kind: ChangeKind) -> int:
    return list(ChangeKind).index(kind)


def group_changes(events: Iterable[ChangeEvent]) -> tuple[ChangeGroup, ...]:
    """``events`` grouped: within each run of changes first seen at about the same time, and
    each kind, the targets that changed the same set of things form one group. Oldest
    first; then by kind, what changed and the targets."""
    groups: list[ChangeGroup] = []
    for run in _runs(list(events)):
        by_target: dict[tuple[ChangeKind, str], list[ChangeEvent]] = {}
        for event in run:
            by_target.setdefault((event.kind, event.target), []).append(event)
        by_what: dict[tuple[ChangeKind, tuple[str, ...]], list[str]] = {}
        ordered = sorted(by_target.items(), key=lambda i: (_kind_order(i[0][0]), natural(i[0][1])))
        for (kind, target), mine in ordered:
            what = tuple(sorted({describe_change(e) for e in mine}))
            by_what.setdefault((kind, what), []).append(target)
        for (kind, what), targets in by_what.items():
            members = tuple(e for t in targets for e in by_target[(kind, t)])
            times = [e.at_seconds for e in members]
            groups.append(
                ChangeGroup(
                    kind,
                    what,
                    tuple(t for t in targets if t),
                    min(times),
                    max(times),
                    tuple(sorted(members, key=_order)),
                )
            )
    return tuple(
        sorted(
            groups,
            key=lambda g: (
                g.first_seconds,
                _kind_order(g.kind),
                g.what,
                tuple(map(natural, g.targets)),
            ),
        )
    )
