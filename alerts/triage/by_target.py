"""Triage's per-replica reads answered from one read of every replica.

Triage measures the fleet and then each replica over the incident and the baseline windows
(:func:`~alerts.triage.measure_scope.measure_scope`, a dozen reads a scope). Read replica by
replica that is a dozen queries per replica and window: 24,000 queries and 86 s of one
evaluation at 500 replicas on Prometheus. :class:`ByTargetReads` stands in for the reader
while the replicas are measured: a read selecting one target is answered from the reader's
per-target read of every target (``histogram_windows_by_target``,
``counter_windows_by_target``: one query on a server) or from one ``samples`` read of every
series, made once per family, labels and window and kept for the other replicas.

The answers are those of the per-target reads (the readers' contract tests hold every
reader's by-target reads to "each target's window, as a read of that target alone gives
it"). Where the read of every target is refused (a layout change, or series of two meanings
on some replica), each replica is read alone as before, so that the refusal names that
replica and the others are still measured.
"""

from __future__ import annotations

from collections.abc import Mapping

from collectors import canonical as c
from collectors.canonical import Labels
from collectors.store.protocols import MetricsReader
from collectors.store.records import SemanticsMismatchError
from slo import ClassicHistogram, LayoutMismatchError, Sample

_Key = tuple[str, tuple[tuple[str, str], ...], float, float]


class ByTargetReads:
    """``metrics`` whose one-target ``histogram_window``, ``counter_window`` and ``samples``
    are answered from reads of every target (see the module docstring); any other read, and
    one that selects no single target, goes to ``metrics``."""

    def __init__(self, metrics: MetricsReader) -> None:
        self.metrics = metrics
        self._histograms: dict[_Key, dict[str, ClassicHistogram] | None] = {}
        self._counters: dict[_Key, dict[str, float] | None] = {}
        self._samples: dict[_Key, dict[str, dict[Labels, list[Sample]]]] = {}

    def __getattr__(self, name: str) -> object:
        return getattr(self.metrics, name)

    def histogram_window(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> ClassicHistogram | None:
        target, key = _split(family, labels, start, end)
        if target is None:
            return self.metrics.histogram_window(family, labels, start, end)
        if key not in self._histograms:
            try:
                self._histograms[key] = self.metrics.histogram_windows_by_target(
                    family, dict(key[1]) or None, start, end
                )
            except (LayoutMismatchError, SemanticsMismatchError):
                self._histograms[key] = None  # NOTE: read alone, the refusal names the replica
        every = self._histograms[key]
        if every is None:
            return self.metrics.histogram_window(family, labels, start, end)
        return every.get(target)

    def counter_window(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> float | None:
        target, key = _split(family, labels, start, end)
        if target is None:
            return self.metrics.counter_window(family, labels, start, end)
        if key not in self._counters:
            try:
                self._counters[key] = self.metrics.counter_windows_by_target(
                    family, dict(key[1]) or None, start, end
                )
            except SemanticsMismatchError:
                self._counters[key] = None
        every = self._counters[key]
        if every is None:
            return self.metrics.counter_window(family, labels, start, end)
        return every.get(target)

    def samples(
        self, family: str, labels: Mapping[str, str] | None, start: float, end: float
    ) -> dict[Labels, list[Sample]]:
        target, key = _split(family, labels, start, end)
        if target is None:
            return self.metrics.samples(family, labels, start, end)
        if key not in self._samples:
            by_target: dict[str, dict[Labels, list[Sample]]] = {}
            for series, readings in self.metrics.samples(
                family, dict(key[1]) or None, start, end
            ).items():
                owner = dict(series).get(c.LABEL_TARGET, "")
                by_target.setdefault(owner, {})[series] = readings
            self._samples[key] = by_target
        return dict(self._samples[key].get(target, {}))


def _split(
    family: str, labels: Mapping[str, str] | None, start: float, end: float
) -> tuple[str | None, _Key]:
    """The one target ``labels`` select (``None``: none), and the key of the same read over
    every target."""
    rest = dict(labels or {})
    target = rest.pop(c.LABEL_TARGET, None)
    return target, (family, tuple(sorted(rest.items())), start, end)
