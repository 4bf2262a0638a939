"""``FakeMetricsReader``: the :class:`~collectors.store.protocols.MetricsReader` over plain
in-memory data, so rule, triage and console logic is tested without a database.

Build it from the same :class:`ScrapeRecord`\\ s the SQL store takes::

    reader = FakeMetricsReader([ScrapeRecord("a:8000", 60.0, samples=(...,), histograms=(...,))])
    reader.write_scrape(ScrapeRecord("a:8000", 120.0, ...))  # or write_scrapes([...])

Series are kept as the store keeps them: one per family, label set and *semantic* flags
(``collectors.canonical.SEMANTIC_FLAGS``), owned by the target of the first scrape that held
it, readings in time order; a scrape is stored once per target and timestamp; NaN readings
are no readings. Every answer is computed from the raw readings by the documented rules
(``collectors.store.protocols``), with the pure functions of :mod:`slo`, never with the SQL
store's query code: ``tests/collectors/test_reader_contract.py`` runs the same cases on this
fake, SQLite and PostgreSQL, and that proves something only because the two are independent.
The fake has no roll-ups and no retention: ``use_rollups`` is accepted and changes nothing
(by contract the answer is the same).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from collectors import canonical as c
from collectors.canonical import Labels
from collectors.store.fake_requests import FakeRequestReader
from collectors.store.fake_windows import (
    SeriesData,
    WindowSemantics,
    exact_counter_steps,
    exact_histogram_steps,
    prometheus_counter_steps,
    prometheus_histogram_steps,
)
from collectors.store.records import (
    DuplicateSeriesError,
    ScrapeRecord,
    ScrapeStatus,
    SemanticsMismatchError,
    SeriesInfo,
    StoredExemplar,
)
from collectors.store.step_reads import StepReads
from slo import ClassicHistogram, HistogramSnapshot, Sample

__all__ = ["FakeMetricsReader", "FakeRequestReader"]

#: ``Series.kind`` of samples no dialect maps (as the store's).
RAW_KIND = "raw"

_Identity = tuple[str, Labels, frozenset[str]]
_NO_FLAGS: frozenset[c.Flag] = frozenset()


@dataclass
class _Stored(SeriesData):
    """One stored series with its exemplars: ``(scrape time, exemplar)`` in arrival order."""

    exemplars: list[tuple[float, StoredExemplar]] = field(default_factory=list)


class FakeMetricsReader(StepReads):
    """Stored metrics in plain Python lists: a :class:`MetricsReader` (and a
    :class:`ScrapeStore`) that needs no database."""

    def __init__(self, records: Iterable[ScrapeRecord] = ()) -> None:
        self._series: dict[_Identity, _Stored] = {}  # NOTE: insertion order = the store's ids
        self._scrapes: dict[str, dict[float, ScrapeStatus]] = {}
        self.write_scrapes(list(records))

    # -- writing ---------------------------------------------------------------------------

    def write_scrape(self, record: ScrapeRecord) -> bool:
        """Keep one scrape; ``False`` (keeping nothing) when this target's scrape at this
        timestamp is already kept."""
        return self.write_scrapes([record])[0]

    add = write_scrape

    def write_scrapes(self, records: Sequence[ScrapeRecord]) -> list[bool]:
        """Keep a batch; ``result[i]`` is ``False`` where ``records[i]`` was kept already (or
        came earlier in the batch). Raises :class:`DuplicateSeriesError`, keeping nothing,
        when a record holds one series twice."""
        for record in records:
            _require_distinct_series(record)
        return [self._keep(record) for record in records]

    def _keep(self, record: ScrapeRecord) -> bool:
        seen = self._scrapes.setdefault(record.target, {})
        t = record.timestamp_seconds
        if t in seen:
            return False
        seen[t] = ScrapeStatus(t, record.is_up, record.error.replace("\x00", "\ufffd"))
        values = [(s.family, s.labels, s.flags, s.kind.value, s.value) for s in record.samples]
        values += [
            (c.RAW_PREFIX + r.name, r.labels, _NO_FLAGS, RAW_KIND, r.value) for r in record.raw
        ]
        for family, labels, flags, kind, value in values:
            stored = self._at(family, labels, flags, kind, record)  # the series exists anyway
            if value == value:  # NOTE: a NaN reading is no reading, as in the store
                stored.insert_value(Sample(t, value))
        for h in record.histograms:
            stored = self._at(h.family, h.labels, h.flags, c.Kind.HISTOGRAM.value, record)
            if h.count != h.count or any(n != n for n in h.cumulative_counts):
                continue  # a NaN count: the whole snapshot is no reading
            sum_value = None if h.sum_value != h.sum_value else h.sum_value
            histogram = ClassicHistogram(h.upper_bounds, tuple(h.cumulative_counts), sum_value)
            stored.insert_snapshot(HistogramSnapshot(t, histogram))
            stored.exemplars.extend(
                (t, StoredExemplar(e.upper_bound, e.value, _canonical(e.labels)))
                for e in h.exemplars
            )
        return True

    def _at(
        self,
        family: str,
        labels: Labels,
        flags: frozenset[c.Flag],
        kind: str,
        record: ScrapeRecord,
    ) -> _Stored:
        key = _identity(family, labels, flags)
        stored = self._series.get(key)
        if stored is None:
            info = SeriesInfo(family, key[1], kind, key[2])
            stored = self._series[key] = _Stored(info, record.target)
        return stored

    # -- reading ---------------------------------------------------------------------------

    def series(self, family: str, labels: Mapping[str, str] | None = None) -> list[SeriesInfo]:
        """Series of ``family`` whose labels include every pair in ``labels``; a breakdown
        label (``tenant``) must be named to select series that carry it."""
        return [s.info for s in self._select(family, labels)]

    def raw_family_names(self) -> list[str]:
        """The raw families kept (``raw:`` + a sample name no dialect maps), sorted."""
        return sorted({name for name, _, _ in self._series if name.startswith(c.RAW_PREFIX)})

    def samples(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[Sample]]:
        """Counter or gauge readings with ``start <= t <= end``, per series, in time order."""
        return {s.info.labels: _between(s.values, start, end) for s in self._select(family, labels)}

    def snapshots(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[HistogramSnapshot]]:
        """Histogram snapshots with ``start <= t <= end``, per series, in time order."""
        chosen = self._select(family, labels)
        return {s.info.labels: _between(s.snapshots, start, end) for s in chosen}

    def exemplars(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> list[StoredExemplar]:
        """Exemplars seen in scrapes over [start, end] (the store promises no order)."""
        return [
            e
            for s in self._select(family, labels)
            for t, e in sorted(s.exemplars, key=lambda item: item[0])
            if start <= t <= end
        ]

    def scrapes(
        self, target: str, start: float = -math.inf, end: float = math.inf
    ) -> list[ScrapeStatus]:
        """The kept scrapes of ``target`` with ``start <= t <= end``, oldest first."""
        kept = self._scrapes.get(target, {}).values()
        return sorted(s for s in kept if start <= s.timestamp_seconds <= end)

    # -- the window engine -----------------------------------------------------------------

    def _select(self, family: str, labels: Mapping[str, str] | None) -> list[_Stored]:
        wanted = dict(labels or {})
        chosen = []
        for (name, _, _), stored in self._series.items():
            if name != family:
                continue
            have = dict(stored.info.labels)
            if any(have.get(k) != v for k, v in wanted.items()):
                continue
            # NOTE: per-tenant series sit next to the fleet-wide ones; an unnamed breakdown
            # label would count the same requests twice.
            if any(k in have and k not in wanted for k in c.BREAKDOWN_LABELS):
                continue
            chosen.append(stored)
        return chosen

    def _chosen(self, family: str, labels: Mapping[str, str] | None) -> list[_Stored]:
        chosen = self._select(family, labels)
        kinds = {s.info.flags for s in chosen}
        if len(kinds) > 1:
            described = sorted(",".join(sorted(f)) or "(none)" for f in kinds)
            raise SemanticsMismatchError(
                f"series of {family} selected with different semantic flags {described}; "
                "narrow the label selector (e.g. by target) so that one meaning is merged"
            )
        return chosen

    def _histogram_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,  # NOTE: the fake has no roll-ups; by contract the answer is the same
        mode: WindowSemantics,
    ) -> list[ClassicHistogram | None]:
        chosen = self._chosen(family, labels)
        if mode is WindowSemantics.EXACT:
            return exact_histogram_steps(chosen, bounds)
        return prometheus_histogram_steps(chosen, bounds, mode)

    def _counter_steps(
        self,
        family: str,
        labels: Mapping[str, str] | None,
        bounds: list[float],
        use_rollups: bool,  # NOTE: the fake has no roll-ups; by contract the answer is the same
        mode: WindowSemantics,
    ) -> list[float | None]:
        chosen = self._chosen(family, labels)
        if mode is WindowSemantics.EXACT:
            return exact_counter_steps(chosen, bounds)
        return prometheus_counter_steps(chosen, bounds, mode)


def _identity(family: str, labels: Labels, flags: frozenset[c.Flag]) -> _Identity:
    """A series' identity, as the store's: family, label set, semantic flags only."""
    semantic = frozenset(f.value for f in flags if f in c.SEMANTIC_FLAGS)
    return family, _canonical(labels), semantic


def _canonical(labels: Labels) -> Labels:
    """Sorted pairs, one per name (the last wins), as the store's label JSON keeps them."""
    return tuple(sorted(dict(labels).items()))


def _require_distinct_series(record: ScrapeRecord) -> None:
    keys = [_identity(s.family, s.labels, s.flags) for s in record.samples]
    keys += [_identity(c.RAW_PREFIX + r.name, r.labels, _NO_FLAGS) for r in record.raw]
    keys += [_identity(h.family, h.labels, h.flags) for h in record.histograms]
    seen: set[_Identity] = set()
    for key in keys:
        if key in seen:
            family, labels, _ = key
            raise DuplicateSeriesError(
                f"scrape holds {family} {dict(labels)} twice; a dialect mapped two source "
                "series onto one canonical series: give them distinct labels or keep one raw"
            )
        seen.add(key)


def _between(items: list, start: float, end: float) -> list:
    # NOTE: a plain filter, not bisection: a NaN edge then selects nothing, as in SQL.
    return [item for item in items if start <= item.timestamp_seconds <= end]
