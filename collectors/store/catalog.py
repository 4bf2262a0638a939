"""The store's catalog: who a series is, and the ids of the rows that name things.

A series' identity is its family, its canonical label JSON and its semantic flags; targets,
series and bucket layouts get integer ids on first sight, which the catalog caches so that a
write looks up only what it has not seen. Layout bounds are cached the other way round for
readers (layouts never change once stored). Every cache is bounded: past
:data:`MAX_CACHED_IDS` entries it starts over, so label churn cannot grow it forever.
Series selection (:meth:`Catalog.select`) is the one label-matching rule of every read.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from sqlalchemy import Connection, insert, select, update
from sqlalchemy.orm import Session

from collectors import canonical as c
from collectors.canonical import Flag, Labels
from collectors.store.codec import (
    decode_bounds,
    decode_labels,
    digest,
    encode_bounds,
    encode_labels,
    split_flags,
)
from collectors.store.models import Layout, Series, Target
from collectors.store.records import ScrapeRecord, SemanticsMismatchError, SeriesInfo
from collectors.store.sql import chunks

#: ``Series.kind`` of samples no dialect maps.
RAW_KIND = "raw"
#: Bound of each cache; past it a cache starts over.
MAX_CACHED_IDS = 1_000_000

#: A series' stored identity: family, canonical label JSON, semantic flags (sorted, ",").
SeriesKey = tuple[str, str, str]
#: Bucket upper bounds, ``+Inf`` last.
Bounds = tuple[float, ...]


class NewSeries(NamedTuple):
    """What a series row is created with, besides its identity."""

    target_id: int
    kind: str
    source: str


class SelectedSeries(NamedTuple):
    """A series a selector chose: its id and what it is."""

    series_id: int
    info: SeriesInfo


@dataclass
class ResolvedIds:
    """Ids one write transaction resolved; they join the catalog once it commits."""

    targets: dict[str, tuple[int, str]] = field(default_factory=dict)  # name -> (id, dialect)
    series: dict[SeriesKey, int] = field(default_factory=dict)
    layouts: dict[Bounds, int] = field(default_factory=dict)


class Catalog:
    """Series identities, cached row ids and layout bounds, and the series-selection rule."""

    def __init__(self) -> None:
        # NOTE: ids of committed rows only (see :meth:`remember`).
        self._target_ids: dict[str, tuple[int, str]] = {}
        self._series_ids: dict[SeriesKey, int] = {}
        self._layout_ids: dict[Bounds, int] = {}
        self._identities: dict[tuple[str, Labels, frozenset[Flag]], SeriesKey] = {}
        self._bounds_by_layout: dict[int, Bounds] = {}

    # -- identity and ids (the writer's side) -----------------------------------------------

    def identity(self, family: str, labels: Labels, flags: frozenset[Flag]) -> SeriesKey:
        """The stored identity of a series: family, canonical label JSON, semantic flags."""
        key = (family, labels, flags)
        identity = self._identities.get(key)
        if identity is None:
            semantic = ",".join(sorted(f.value for f in flags if f in c.SEMANTIC_FLAGS))
            identity = (family, encode_labels(labels), semantic)
            _make_room(self._identities, 1)
            self._identities[key] = identity
        return identity

    def forget(self) -> None:
        """Drop the cached ids: one may name a row deleted since (after a refused write)."""
        self._target_ids.clear()
        self._series_ids.clear()
        self._layout_ids.clear()

    def remember(self, resolved: ResolvedIds) -> None:
        """Cache the ids of a committed transaction (those of a rolled-back one never are)."""
        for cache, new in (
            (self._target_ids, resolved.targets),
            (self._series_ids, resolved.series),
            (self._layout_ids, resolved.layouts),
        ):
            _make_room(cache, len(new))
            cache.update(new)

    def resolve_targets(
        self, connection: Connection, records: Iterable[ScrapeRecord], resolved: ResolvedIds
    ) -> dict[str, int]:
        """Target ids by name, creating targets on first sight; a record's non-empty dialect
        becomes its target's (the last one in the batch wins)."""
        dialects: dict[str, str] = {}
        for record in records:
            if record.dialect or record.target not in dialects:
                dialects[record.target] = record.dialect
        known = {n: self._target_ids[n] for n in dialects if n in self._target_ids}
        missing = sorted(set(dialects) - set(known))
        for chunk in chunks(missing):
            rows = connection.execute(
                select(Target.name, Target.id, Target.dialect).where(Target.name.in_(chunk))
            )
            known.update((name, (tid, dialect)) for name, tid, dialect in rows)
        new = [n for n in missing if n not in known]
        if new:
            ids = connection.execute(
                insert(Target).returning(Target.id, sort_by_parameter_order=True),
                [{"name": n, "dialect": dialects[n]} for n in new],
            ).scalars().all()  # fmt: skip
            known.update((n, (tid, dialects[n])) for n, tid in zip(new, ids, strict=True))
        for name, dialect in dialects.items():
            tid, stored_dialect = known[name]
            if dialect and dialect != stored_dialect:
                connection.execute(update(Target).where(Target.id == tid).values(dialect=dialect))
                known[name] = (tid, dialect)
        resolved.targets.update(known)
        return {name: tid for name, (tid, _) in known.items()}

    def cached_series_id(self, key: SeriesKey) -> int | None:
        """The id of a series already committed and cached, else ``None``."""
        return self._series_ids.get(key)

    def resolve_series(
        self, connection: Connection, pending: dict[SeriesKey, NewSeries], resolved: ResolvedIds
    ) -> dict[SeriesKey, int]:
        """Ids of the (uncached) series in ``pending``, creating those not stored yet."""
        ids: dict[SeriesKey, int] = {}
        hashes = {key: digest(key[1]) for key in pending}
        missing = dict(pending)
        for chunk in chunks(sorted(set(hashes.values()))):
            rows = connection.execute(
                select(Series.id, Series.family, Series.labels_json, Series.flags).where(
                    Series.labels_hash.in_(chunk)
                )
            )
            for sid, family, labels_json, flags in rows:
                if missing.pop((family, labels_json, flags), None) is not None:
                    ids[(family, labels_json, flags)] = sid
        if missing:
            new_ids = connection.execute(
                insert(Series).returning(Series.id, sort_by_parameter_order=True),
                [
                    {
                        "target_id": new.target_id,
                        "family": family,
                        "kind": new.kind,
                        "labels_json": labels_json,
                        "labels_hash": hashes[family, labels_json, flags],
                        "flags": flags,
                        "source": new.source,
                    }
                    for (family, labels_json, flags), new in missing.items()
                ],
            ).scalars().all()  # fmt: skip
            ids.update(zip(missing, new_ids, strict=True))
        resolved.series.update(ids)
        return ids

    def resolve_layouts(
        self, connection: Connection, layouts: set[Bounds], resolved: ResolvedIds
    ) -> dict[Bounds, int]:
        """Layout ids of the given bucket bounds, creating layouts on first sight."""
        ids = {b: self._layout_ids[b] for b in layouts if b in self._layout_ids}
        texts = {b: encode_bounds(b) for b in layouts if b not in ids}
        by_hash = {digest(text): b for b, text in texts.items()}
        for chunk in chunks(sorted(by_hash)):
            rows = connection.execute(
                select(Layout.id, Layout.bounds_hash).where(Layout.bounds_hash.in_(chunk))
            )
            for lid, bounds_hash in rows:
                ids[by_hash.pop(bounds_hash)] = lid
        if by_hash:
            hashes = sorted(by_hash)
            new_ids = connection.execute(
                insert(Layout).returning(Layout.id, sort_by_parameter_order=True),
                [{"bounds_json": texts[by_hash[h]], "bounds_hash": h} for h in hashes],
            ).scalars().all()  # fmt: skip
            ids.update((by_hash[h], lid) for h, lid in zip(hashes, new_ids, strict=True))
        resolved.layouts.update(ids)
        return ids

    # -- bounds and selection (the readers' side) -------------------------------------------

    def bounds(self, session: Session | Connection, layout_id: int) -> Bounds:
        """A layout's bounds, cached: a stored layout never changes."""
        bounds = self._bounds_by_layout.get(layout_id)
        if bounds is None:
            text = session.scalar(select(Layout.bounds_json).where(Layout.id == layout_id))
            bounds = decode_bounds(text)
            _make_room(self._bounds_by_layout, 1)
            self._bounds_by_layout[layout_id] = bounds
        return bounds

    def select(
        self, session: Session, family: str, labels: Mapping[str, str] | None
    ) -> list[SelectedSeries]:
        """Series of ``family`` whose labels include every pair in ``labels``. A breakdown
        label (``tenant``) must be named to select series that carry it, so a selector
        without it never adds per-tenant series to their total."""
        wanted = dict(labels or {})
        rows = session.execute(
            select(Series.id, Series.labels_json, Series.kind, Series.flags).where(
                Series.family == family
            )
        )
        chosen = []
        for sid, labels_json, kind, flags in rows:
            have = dict(decode_labels(labels_json))
            if any(have.get(k) != v for k, v in wanted.items()):
                continue
            if any(k in have and k not in wanted for k in c.BREAKDOWN_LABELS):
                continue
            info = SeriesInfo(family, tuple(sorted(have.items())), kind, split_flags(flags))
            chosen.append(SelectedSeries(sid, info))
        return chosen

    def mergeable_ids(
        self, session: Session, family: str, labels: Mapping[str, str] | None
    ) -> list[int]:
        """Ids of the selected series, which a window adds together: raises
        :class:`SemanticsMismatchError` when their semantic flags differ."""
        chosen = self.select(session, family, labels)
        kinds = {s.info.flags for s in chosen}
        if len(kinds) > 1:
            described = sorted(",".join(sorted(f)) or "(none)" for f in kinds)
            raise SemanticsMismatchError(
                f"series of {family} selected with different semantic flags {described}; "
                "narrow the label selector (e.g. by target) so that one meaning is merged"
            )
        return [s.series_id for s in chosen]


def _make_room(cache: dict, num_new: int) -> None:
    """Start ``cache`` over when ``num_new`` more entries would pass the bound."""
    if len(cache) + num_new > MAX_CACHED_IDS:
        cache.clear()
