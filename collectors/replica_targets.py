"""Which scrape target served a traced request: the join of request records and metrics.

A request record's ``replica`` is the engine's ``service.instance.id`` (its spans' resource);
a metric series' key is the collector's ``target`` (whatever the scrape configuration calls
it). The bundled engine puts the same instance id on ``/metrics`` as
``tailwatch:engine_info{instance_id="…"} 1``, stored as the canonical gauge ``engine_info``
per target, so the join needs no configuration: read that family's series and pair each
``instance_id`` with the ``target`` that scraped it.

An engine that exports no instance id (vLLM) leaves ``replica`` as ``server.address[:port]``;
such a record joins a target only where the target is named by that same ``host:port`` (the
default name of a target), which :meth:`ReplicaTargets.target` also tries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from collectors import canonical as c
from collectors.store.protocols import MetricsReader
from collectors.store.records import SeriesInfo


@dataclass(frozen=True)
class ReplicaTargets:
    """Instance id → the targets whose scrapes showed it (more than one: the same engine is
    scraped under two names, e.g. two collector configurations; then no single answer)."""

    targets_by_replica: Mapping[str, frozenset[str]]
    known_targets: frozenset[str] = field(default=frozenset())

    def target(self, replica: str | None) -> str | None:
        """The one target that scraped ``replica``'s engine, or None (unknown or ambiguous).
        A replica id that is itself a known target's name (``host:port``) is that target."""
        if replica is None:
            return None
        targets = self.targets_by_replica.get(replica)
        if targets is not None:
            return next(iter(targets)) if len(targets) == 1 else None
        return replica if replica in self.known_targets else None

    def unique(self) -> dict[str, str]:
        """Instance id → its one target, for the ids seen on exactly one (what triage's
        ``gather`` joins request records with)."""
        return {r: next(iter(ts)) for r, ts in self.targets_by_replica.items() if len(ts) == 1}

    def ambiguous(self) -> dict[str, frozenset[str]]:
        """Instance ids seen on more than one target."""
        return {r: ts for r, ts in self.targets_by_replica.items() if len(ts) > 1}


def replica_targets_from_series(series: Iterable[SeriesInfo]) -> ReplicaTargets:
    """The join from stored ``engine_info`` series (pure: plain data in, plain data out).
    A series without both labels is skipped: it cannot name either side."""
    found: dict[str, set[str]] = {}
    targets: set[str] = set()
    for info in series:
        labels = dict(info.labels)
        target = labels.get(c.LABEL_TARGET)
        if target:
            targets.add(target)
        instance_id = labels.get(c.LABEL_INSTANCE_ID)
        if target and instance_id:
            found.setdefault(instance_id, set()).add(target)
    return ReplicaTargets({r: frozenset(ts) for r, ts in found.items()}, frozenset(targets))


def replica_targets(reader: MetricsReader, known_targets: Iterable[str] = ()) -> ReplicaTargets:
    """The replica → target join over every stored ``engine_info`` series; ``known_targets``
    (e.g. the configured target names) adds names a ``host:port`` replica may match."""
    join = replica_targets_from_series(reader.series(c.ENGINE_INFO))
    return ReplicaTargets(join.targets_by_replica, join.known_targets | frozenset(known_targets))
