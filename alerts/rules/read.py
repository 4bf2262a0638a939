"""What the rule evaluation reads from a :class:`MetricsReader`, in the shapes PromQL's
aggregations give: the groups a family's series fall into (``by (model)``, ``by (target,
model)``), the latest gauge reading per series, a counter's increases by label value.

Everything goes through the reader's window calls with ``use_rollups=True`` (the default), so
whole minutes of a long window come from the store's roll-ups, not from raw snapshots.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple, TypeVar

from collectors import canonical as c
from collectors.store.protocols import MetricsReader

#: How far back an instant read looks for a gauge's last reading: Prometheus's default lookback
#: delta (5 minutes), after which a series is stale and absent from an instant vector.
LOOKBACK_SECONDS = 300.0
#: What a fleet rule groups by (``sum by (model)``); a per-replica rule adds ``target``.
FLEET_LABELS = (c.LABEL_MODEL,)
REPLICA_LABELS = (c.LABEL_TARGET, c.LABEL_MODEL)

T = TypeVar("T")


class Instance(NamedTuple):
    """One element of a rule expression's output vector: the labels that tell this instance
    from the others (on top of the rule's own), the expression's value, and whether the
    alert condition holds. A NaN value never holds."""

    labels: Mapping[str, str]
    value: float
    holds: bool


def groups(
    reader: MetricsReader,
    family: str,
    by: Iterable[str],
    labels: Mapping[str, str] | None = None,
) -> dict[tuple[tuple[str, str], ...], dict[str, str]]:
    """The label groups ``family``'s series (matching ``labels``) fall into, ``by`` those
    names: group key (sorted pairs) → the selector that reads that group. A series without a
    ``by`` label groups with the others that lack it (PromQL: absent reads as empty)."""
    names = tuple(by)
    out: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}
    for info in reader.series(family, labels):
        key = group_key(dict(info.labels), names)
        out.setdefault(key, {**(labels or {}), **dict(key)})
    return dict(sorted(out.items()))


def by_group(
    grouped: Mapping[tuple[tuple[str, str], ...], Mapping[str, str]],
    read: Callable[[dict[str, str] | None], Mapping[str, T]],
) -> dict[tuple[tuple[str, str], ...], T]:
    """Each group's value (of :func:`groups` by ``target`` and more) from one per-target read
    (``read(labels)``: a reader's ``…_by_target``) for each distinct rest of the groups'
    selectors, not one read per group: a fleet of 500 replicas of one model is one query. A
    group whose target the read did not answer has no value."""
    members: dict[tuple[tuple[str, str], ...], list[tuple[tuple[tuple[str, str], ...], str]]] = {}
    for key, selector in grouped.items():
        rest = tuple(sorted((k, v) for k, v in selector.items() if k != c.LABEL_TARGET))
        members.setdefault(rest, []).append((key, selector.get(c.LABEL_TARGET, "")))
    out: dict[tuple[tuple[str, str], ...], T] = {}
    for rest, items in members.items():
        values = read(dict(rest) or None)
        for key, target in items:
            if target in values:
                out[key] = values[target]
    return out


def group_key(labels: Mapping[str, str], by: Iterable[str]) -> tuple[tuple[str, str], ...]:
    """The :func:`groups` key of a series with ``labels``."""
    return tuple(sorted((n, labels[n]) for n in by if labels.get(n)))


def latest_readings(
    reader: MetricsReader, family: str, labels: Mapping[str, str] | None, now: float
) -> dict[tuple[tuple[str, str], ...], float]:
    """Each series' last reading within the lookback before ``now`` (an instant vector)."""
    out = {}
    for series_labels, samples in reader.samples(
        family, labels, now - LOOKBACK_SECONDS, now
    ).items():
        if samples:
            out[series_labels] = samples[-1].value
    return out


def increases_by_label(
    reader: MetricsReader,
    family: str,
    label: str,
    labels: Mapping[str, str] | None,
    start: float,
    end: float,
) -> dict[str, float]:
    """A counter's increase over ``[start, end]`` per value of ``label`` (summed over the
    other labels), as ``sum by (label) (increase(...))``; values without data are left out."""
    values = sorted({dict(i.labels).get(label, "") for i in reader.series(family, labels)})
    out = {}
    for value in values:
        if not value:
            continue
        increase = reader.counter_window(family, {**(labels or {}), label: value}, start, end)
        if increase is not None:
            out[value] = increase
    return out


def group_labels(key: tuple[tuple[str, str], ...]) -> dict[str, str]:
    return dict(key)
