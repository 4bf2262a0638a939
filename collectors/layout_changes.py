"""Bucket-layout changes, seen when a target is scraped.

A histogram series whose ``le`` edges differ from the ones it had when last seen (a replica
restarted with other buckets, an engine upgrade) cannot be merged across that time as one
layout. The collector reports the change at the scrape that shows it, rather than leaving it
to a later window query to find.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collectors.canonical import Labels
from collectors.store.records import ScrapeRecord
from slo.window import format_utc

#: Edges listed in full up to this many; longer layouts show their ends and the count.
MAX_EDGES_SHOWN = 8
#: Added or removed edges listed up to this many.
MAX_DIFF_SHOWN = 6


@dataclass(frozen=True)
class LayoutChange:
    """One histogram series of ``target`` whose bucket edges changed between two scrapes."""

    target: str
    timestamp_seconds: float  # the scrape that showed the new layout (Unix seconds)
    family: str
    labels: Labels
    old_upper_bounds: tuple[float, ...]
    new_upper_bounds: tuple[float, ...]

    def describe(self) -> str:
        """One line naming the target, the series, the time (UTC) and both layouts."""
        return (
            f"bucket layout of {self.family}{format_labels(self.labels)} on {self.target} "
            f"changed at {format_utc(self.timestamp_seconds)}: le "
            f"{format_edges(self.old_upper_bounds)} -> {format_edges(self.new_upper_bounds)}"
            f" ({format_diff(self.old_upper_bounds, self.new_upper_bounds)})"
        )

    def to_json(self) -> dict[str, object]:
        return {
            "timestamp_seconds": self.timestamp_seconds,
            "time": format_utc(self.timestamp_seconds),
            "family": self.family,
            "labels": dict(self.labels),
            "old_le": [format_edge(b) for b in self.old_upper_bounds],
            "new_le": [format_edge(b) for b in self.new_upper_bounds],
        }


class LayoutTracker:
    """The last bucket edges seen per histogram series of each target, in memory.

    NOTE: a series absent from a scrape keeps its last edges: prometheus_client shows a
    labelled histogram only once it has an observation, so a replica restarted with new
    buckets often exposes the series again only scrapes later, and the change must still be
    seen then. Memory is one tuple per series ever seen on a live target
    (:meth:`forget` drops a removed target's); each scrape costs one lookup per series."""

    def __init__(self) -> None:
        self._edges: dict[str, dict[tuple[str, Labels], tuple[float, ...]]] = {}

    def observe(self, record: ScrapeRecord) -> list[LayoutChange]:
        """The changes ``record`` shows (none for a down scrape, or a series seen first)."""
        if not record.is_up:
            return []
        seen = self._edges.setdefault(record.target, {})
        changes = []
        for histogram in record.histograms:
            key = (histogram.family, histogram.labels)
            previous = seen.get(key)
            if previous is not None and previous != histogram.upper_bounds:
                changes.append(
                    LayoutChange(
                        record.target,
                        record.timestamp_seconds,
                        histogram.family,
                        histogram.labels,
                        previous,
                        histogram.upper_bounds,
                    )
                )
            seen[key] = histogram.upper_bounds
        return changes

    def forget(self, target: str) -> None:
        self._edges.pop(target, None)


def format_edge(bound: float) -> str:
    """An ``le`` value as Prometheus writes it: ``+Inf``, ``0.005``, ``10``."""
    if math.isinf(bound):
        return "+Inf" if bound > 0 else "-Inf"
    return repr(float(bound)).removesuffix(".0")


def format_edges(bounds: tuple[float, ...]) -> str:
    """``[0.1, 0.5, 1, +Inf]``; past ``MAX_EDGES_SHOWN`` edges the ends and the count."""
    shown = [format_edge(b) for b in bounds]
    if len(shown) <= MAX_EDGES_SHOWN:
        return f"[{', '.join(shown)}]"
    return f"[{', '.join(shown[:3])}, …, {', '.join(shown[-3:])}] ({len(shown)} edges)"


def format_diff(old: tuple[float, ...], new: tuple[float, ...]) -> str:
    """``added 0.25; removed 0.3``: the edges only one layout has."""
    parts = []
    for verb, edges in (("added", set(new) - set(old)), ("removed", set(old) - set(new))):
        if edges:
            listed = [format_edge(b) for b in sorted(edges)]
            more = len(listed) - MAX_DIFF_SHOWN
            text = ", ".join(listed[:MAX_DIFF_SHOWN]) + (f" and {more} more" if more > 0 else "")
            parts.append(f"{verb} {text}")
    return "; ".join(parts) or "same edges"


def format_labels(labels: Labels) -> str:
    """``{model="m",tenant="a"}`` without the ``target`` label (named beside it)."""
    shown = [f'{name}="{value}"' for name, value in labels if name != "target"]
    return "{" + ",".join(shown) + "}" if shown else ""
