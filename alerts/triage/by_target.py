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

from collections.abc import Callable, Mapping
from typing import Any

from collectors import canonical as c
from collectors.store.protocols import MetricsReader
from collectors.store.records import SemanticsMismatchError
from slo import LayoutMismatchError

_Key = tuple[str, str, tuple[tuple[str, str], ...], float, float]
#: What a read of every target may refuse; each replica is then read alone.
_REFUSED = (LayoutMismatchError, SemanticsMismatchError)


class ByTargetReads:
    """``metrics`` whose one-target ``histogram_window``, ``counter_window``, ``samples`` and
    ``exemplars`` are answered from reads of every target (see the module docstring); any
    other read, and one that selects no single target, goes to ``metrics``."""

    def __init__(self, metrics: MetricsReader) -> None:
        self.metrics = metrics
        self._every: dict[_Key, Mapping[str, Any] | None] = {}

    def __getattr__(self, name: str) -> object:
        return getattr(self.metrics, name)

    def histogram_window(self, family, labels, start, end):  # type: ignore[no-untyped-def]
        every = self.metrics.histogram_windows_by_target
        return self._one("histogram_window", every, None, family, labels, start, end)

    def counter_window(self, family, labels, start, end):  # type: ignore[no-untyped-def]
        every = self.metrics.counter_windows_by_target
        return self._one("counter_window", every, None, family, labels, start, end)

    def samples(self, family, labels, start, end):  # type: ignore[no-untyped-def]
        return self._one("samples", self._samples_by_target, {}, family, labels, start, end)

    def exemplars(self, family, labels, start, end):  # type: ignore[no-untyped-def]
        every = getattr(self.metrics, "exemplars_by_target", None)  # NOTE: a server's
        if every is None:
            return self.metrics.exemplars(family, labels, start, end)
        return self._one("exemplars", every, [], family, labels, start, end)

    def _one(
        self,
        name: str,
        every: Callable[..., Mapping[str, Any]],
        missing: object,
        family: str,
        labels: Mapping[str, str] | None,
        start: float,
        end: float,
    ) -> Any:
        """The read ``name`` of the one target ``labels`` select, from ``every`` (the same
        read of every target, made once per family, other labels and window); ``missing``
        for a target it holds nothing of. No single target, or a refused read of every
        target: ``metrics``' own read."""
        rest = dict(labels or {})
        target = rest.pop(c.LABEL_TARGET, None)
        if target is not None:
            key = (name, family, tuple(sorted(rest.items())), start, end)
            if key not in self._every:
                try:
                    self._every[key] = every(family, rest or None, start, end)
                except _REFUSED:
                    self._every[key] = None  # NOTE: read alone, the refusal names the replica
            found = self._every[key]
            if found is not None:
                return found.get(target, missing)
        return getattr(self.metrics, name)(family, labels, start, end)

    def _samples_by_target(self, family, labels, start, end):  # type: ignore[no-untyped-def]
        """One ``samples`` read of every series, grouped by target."""
        out: dict[str, dict] = {}
        for series, readings in self.metrics.samples(family, labels, start, end).items():
            out.setdefault(dict(series).get(c.LABEL_TARGET, ""), {})[series] = readings
        return out
