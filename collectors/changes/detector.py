"""The change detector: at each cycle, what changed since the last one, read through the
:class:`~collectors.store.protocols.MetricsReader` (so it works the same over the store the
collector writes and over a Prometheus-compatible server), written to a
:class:`~collectors.store.protocols.ChangeStore`.

Each :meth:`ChangeDetector.detect` at ``now`` reads the range since its last cycle (the
first cycle: ``margin_seconds`` back), plus ``margin_seconds`` before it for the state the
range starts from, and finds (``collectors.changes.detect``):

1. the targets added or removed, from their scrapes (``scrapes_by_target``: a target that is
   down is still scraped, so it is not removed);
2. every label change of every ``*_info`` gauge (the raw families ``raw_family_names``
   lists, and the canonical ``engine_info``): a ``config`` change, or, for ``engine_info``'s
   ``instance_id``, a restart;
3. the live knob changes (``tailwatch:knob_changes_total``), merged with the info gauge's
   change of the same knob at the same scrape, which gives their before and after;
4. restarts: a start-time gauge that moved, a counter that went down, a new instance id;
   one event per target and scrape whatever showed it;
5. the traffic mix (``collectors.changes.mix``), a step at a time once a step is
   ``step_seconds`` old (a request's record is written when it ends): tenants' and models'
   shares from the request records, routes' from ``http_responses_total``.

The stateless parts find a change again when ranges overlap (the store keeps it once), so
a restarted detector loses nothing within its margin; the mix is re-learnt from the window
before the first cycle.
"""

from __future__ import annotations

import collections
import logging
import math
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from collectors import canonical as c
from collectors.changes.detect import (
    LabelChange,
    ValueChange,
    counter_increases,
    counter_resets,
    label_changes,
    target_set_changes,
    value_changes,
)
from collectors.changes.mix import NO_VALUE, MixOptions, MixTracker
from collectors.store.change_records import (
    ChangeEvent,
    ChangeKind,
    MixDimension,
    TargetChange,
)
from collectors.store.protocols import ChangeStore, MetricsReader, RawFamilies, RequestReader
from slo.window import format_utc

LOG = logging.getLogger("tailwatch.changes")

#: The bundled engine's live-knob counter, kept raw (``engine/metric_names.py``).
KNOB_CHANGES_FAMILY = c.RAW_PREFIX + "tailwatch:knob_changes_total"
LABEL_KNOB = "knob"
INFO_SUFFIX = "_info"
#: Info gauges whose labels are live state, not configuration: vLLM's LoRA gauge names the
#: adapters running and waiting now, a different label set at almost every scrape.
LIVE_STATE_INFO = frozenset({c.RAW_PREFIX + "vllm:lora_requests_info"})
#: Gauges that hold a process's start time (prometheus_client's, and the bundled engine's).
START_TIME_FAMILIES = (
    c.RAW_PREFIX + "process_start_time_seconds",
    c.RAW_PREFIX + "tailwatch:engine_start_time_seconds",
)
#: A counter every engine's dialect maps: when it goes down, its process restarted.
RESET_FAMILY = c.GENERATION_TOKENS_TOTAL
#: The families whose series name the targets (by their ``target`` label).
TARGET_FAMILIES = (c.ENGINE_INFO, c.REQUESTS_RUNNING, c.KV_CACHE_USAGE, c.TTFT_SECONDS)


def _positive(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name}={value!r}: must be a number of seconds")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name}={value!r}: must be a number of seconds > 0")


@dataclass(frozen=True)
class DetectorOptions:
    """``margin_seconds``: how far before a cycle's range the state it starts from is read
    (and how far back the first cycle looks); ``absent_rounds``: how many times the other
    targets are scraped without a target before it counts as removed (or, back, as added);
    ``mix``: the traffic mix's window and thresholds; ``record_limit``: the most request
    records read for one mix step."""

    margin_seconds: float = 300.0
    absent_rounds: int = 3
    mix: MixOptions = field(default_factory=MixOptions)
    record_limit: int = 10_000

    def __post_init__(self) -> None:
        _positive("margin_seconds", self.margin_seconds)
        for name in ("absent_rounds", "record_limit"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r}: must be a positive integer")

    def scaled(self, scale: float) -> DetectorOptions:
        """The same options with every time ``scale`` times as long (a drill's windows)."""
        _positive("scale", scale)
        mix = replace(self.mix, window_seconds=self.mix.window_seconds * scale)
        return replace(self, margin_seconds=self.margin_seconds * scale, mix=mix)


def _family_source(family: str) -> str:
    return family.removeprefix(c.RAW_PREFIX)


@dataclass(frozen=True)
class _Restart:
    target: str
    at_seconds: float
    signal: str
    before: str = ""
    after: str = ""


def _iso(seconds: float) -> str:
    return format_utc(seconds) if math.isfinite(seconds) else f"{seconds!r}"


class ChangeDetector:
    """Finds changes through ``metrics`` (and the traffic mix through ``requests``, when
    given) and writes them to ``sink``; see the module docstring. ``clock``: Unix seconds."""

    def __init__(
        self,
        metrics: MetricsReader,
        sink: ChangeStore,
        requests: RequestReader | None = None,
        *,
        options: DetectorOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.metrics = metrics
        self.sink = sink
        self.requests = requests
        self.options = options or DetectorOptions()
        self.clock = clock
        self._last_end: float | None = None
        self._mix = {d: MixTracker(d, self.options.mix) for d in MixDimension}
        self._mix_done: float | None = None  # the end of the last mix step added

    def detect(self, now: float | None = None) -> list[ChangeEvent]:
        """The changes since the last cycle (see the module docstring), written to the sink;
        returns them. A ``now`` before the last cycle's finds nothing."""
        now = self.clock() if now is None else float(now)
        start = self._last_end if self._last_end is not None else now - self.options.margin_seconds
        if not math.isfinite(now) or now <= start:
            return []
        events = [*self.changes_between(start, now), *self._mix_steps(now)]
        if events:
            self.sink.write_change_events(events)
        self._last_end = now
        return sorted(events, key=lambda e: e.key)

    # -- the stateless part ------------------------------------------------------------------

    def changes_between(self, start: float, end: float) -> list[ChangeEvent]:
        """The changes at times in ``(start, end]`` other than the traffic mix."""
        read_from = start - self.options.margin_seconds
        scrapes = self._scrapes(read_from, end)
        events = list(self._presence(scrapes, start, end, read_from))
        config, restarts = self._info_changes(start, end, read_from)
        knobs = self._knob_changes(start, end, read_from, scrapes)
        events += _merge_knobs(knobs, config)
        restarts += self._restart_signals(start, end, read_from)
        events += _restart_events(restarts)
        return sorted(events, key=lambda e: e.key)

    def _targets(self) -> list[str]:
        found = {
            dict(info.labels).get(c.LABEL_TARGET, "")
            for family in TARGET_FAMILIES
            for info in self.metrics.series(family)
        }
        return sorted(t for t in found if t)

    def _scrapes(self, start: float, end: float) -> dict[str, list[float]]:
        by_target = self.metrics.scrapes_by_target(self._targets(), start, end)
        return {t: [s.timestamp_seconds for s in found] for t, found in by_target.items()}

    def _presence(
        self, scrapes: dict[str, list[float]], start: float, end: float, read_from: float
    ) -> Iterable[ChangeEvent]:
        for p in target_set_changes(scrapes, start, end, self.options.absent_rounds, read_from):
            subject = TargetChange.ADDED if p.added else TargetChange.REMOVED
            yield ChangeEvent(p.at_seconds, p.target, ChangeKind.TARGET, subject, source="scrapes")

    def _info_families(self) -> list[str]:
        if not isinstance(self.metrics, RawFamilies):
            return []
        return [
            f
            for f in self.metrics.raw_family_names()
            if f.endswith(INFO_SUFFIX) and f not in LIVE_STATE_INFO
        ]

    def _info_changes(
        self, start: float, end: float, read_from: float
    ) -> tuple[list[ChangeEvent], list[_Restart]]:
        config: list[ChangeEvent] = []
        restarts: list[_Restart] = []
        for family in [c.ENGINE_INFO, *self._info_families()]:
            readings = self.metrics.samples(family, None, read_from, end)
            for change in label_changes(readings, start, end):
                if family == c.ENGINE_INFO and change.label == c.LABEL_INSTANCE_ID:
                    restarts.append(
                        _Restart(
                            change.target, change.at_seconds, "instance id", change.before,
                            change.after,
                        )
                    )  # fmt: skip
                else:
                    config.append(_config_event(change, _family_source(family)))
        return config, restarts

    def _knob_changes(
        self, start: float, end: float, read_from: float, scrapes: dict[str, list[float]]
    ) -> list[ChangeEvent]:
        def scraped_before(target: str, t: float) -> bool:
            return any(read_from <= x < t for x in scrapes.get(target, ()))

        readings = self.metrics.samples(KNOB_CHANGES_FAMILY, None, read_from, end)
        return [
            ChangeEvent(
                i.at_seconds,
                i.target,
                ChangeKind.KNOB,
                dict(i.labels).get(LABEL_KNOB, "?"),
                source=_family_source(KNOB_CHANGES_FAMILY),
            )
            for i in counter_increases(readings, start, end, scraped_before)
        ]

    def _restart_signals(self, start: float, end: float, read_from: float) -> list[_Restart]:
        out: list[_Restart] = []
        for family in START_TIME_FAMILIES:
            readings = self.metrics.samples(family, None, read_from, end)
            out += [
                _start_time(v, _family_source(family)) for v in value_changes(readings, start, end)
            ]
        readings = self.metrics.samples(RESET_FAMILY, None, read_from, end)
        out += [
            _Restart(v.target, v.at_seconds, f"{RESET_FAMILY} reset")
            for v in counter_resets(readings, start, end)
        ]
        return out

    # -- the traffic mix ---------------------------------------------------------------------

    def _mix_steps(self, now: float) -> list[ChangeEvent]:
        """Add every mix step complete and ``step_seconds`` old by ``now`` (steps on a grid
        of ``step_seconds`` from the epoch); the first call starts a window back."""
        step = self.options.mix.step_seconds
        ready = math.floor((now - step) / step) * step  # the end of the newest step to add
        if self._mix_done is None:
            self._mix_done = ready - self.options.mix.window_seconds
        events: list[ChangeEvent] = []
        while self._mix_done + step <= ready + 1e-9 * step:
            low, high = self._mix_done, self._mix_done + step
            for dimension, counts in self._mix_counts(low, high).items():
                events += self._mix[dimension].add_step(low, counts)
            self._mix_done = high
        return events

    def _mix_counts(self, low: float, high: float) -> dict[MixDimension, dict[str, float]]:
        counts: dict[MixDimension, dict[str, float]] = {}
        if self.requests is not None:
            tenants: collections.Counter[str] = collections.Counter()
            models: collections.Counter[str] = collections.Counter()
            records = self.requests.requests(low, high, limit=self.options.record_limit)
            for r in records:
                if r.arrival > low:  # NOTE: (low, high]: a boundary arrival counts once
                    tenants[r.tenant or NO_VALUE] += 1
                    models[r.model or NO_VALUE] += 1
            counts[MixDimension.TENANT] = dict(tenants)
            counts[MixDimension.MODEL] = dict(models)
        counts[MixDimension.ROUTE] = self._route_counts(low, high)
        return counts

    def _route_counts(self, low: float, high: float) -> dict[str, float]:
        readings = self.metrics.samples(
            c.HTTP_RESPONSES_TOTAL, None, low - self.options.margin_seconds, high
        )
        routes: collections.Counter[str] = collections.Counter()
        for labels, samples in readings.items():
            route = dict(labels).get(c.LABEL_HANDLER)
            if not route:
                continue
            routes[route] += _increase(samples, low, high)
        return dict(routes)


def _increase(samples: Sequence, low: float, high: float) -> float:
    """A counter's increase over ``(low, high]`` from its readings (a reset restarts)."""
    points = sorted((float(t), float(v)) for t, v in samples if v == v)
    before = [v for t, v in points if t <= low]
    inside = [v for t, v in points if low < t <= high]
    if not inside or not before:
        return 0.0
    total, previous = 0.0, before[-1]
    for value in inside:
        total += value - previous if value >= previous else value
        previous = value
    return total


def _config_event(change: LabelChange, source: str) -> ChangeEvent:
    return ChangeEvent(
        change.at_seconds,
        change.target,
        ChangeKind.CONFIG,
        change.label,
        change.before,
        change.after,
        source,
    )


def _merge_knobs(knobs: list[ChangeEvent], config: list[ChangeEvent]) -> list[ChangeEvent]:
    """A knob change and an info gauge's change of the label of that name at the same scrape
    are one ``knob`` event with the info's before and after; the rest stay as they are."""
    by_label = {(e.target, e.at_seconds, e.subject): e for e in config}
    merged = []
    for knob in knobs:
        info = by_label.pop((knob.target, knob.at_seconds, knob.subject), None)
        if info is None:
            merged.append(knob)
        else:
            merged.append(replace(knob, before=info.before, after=info.after))
    return [*merged, *by_label.values()]


def _start_time(change: ValueChange, source: str) -> _Restart:
    return _Restart(
        change.target, change.at_seconds, source, _iso(change.before), _iso(change.after)
    )


def _restart_events(signals: list[_Restart]) -> list[ChangeEvent]:
    """One ``restarted`` event per target and time, whatever showed it: the instance id's
    before and after when it moved, else the start time's."""
    grouped: dict[tuple[str, float], list[_Restart]] = {}
    for s in signals:
        grouped.setdefault((s.target, s.at_seconds), []).append(s)
    events = []
    for (target, at), found in sorted(grouped.items()):
        with_values = [s for s in found if s.before or s.after]
        chosen = with_values[0] if with_values else found[0]
        events.append(
            ChangeEvent(
                at,
                target,
                ChangeKind.TARGET,
                TargetChange.RESTARTED,
                chosen.before,
                chosen.after,
                ", ".join(sorted({s.signal for s in found})),
            )
        )
    return events
