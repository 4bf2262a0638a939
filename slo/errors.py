"""The exceptions ``slo`` raises.

Every error is a ``ValueError`` (the inputs were wrong, not the program), so a caller that only
knows ``ValueError`` still catches them. Messages say what was wrong, with which value, and what
to do about it.
"""

from __future__ import annotations


class SLOError(ValueError):
    """Base class of every error raised by ``slo``."""


class LayoutMismatchError(SLOError):
    """Two classic histograms that must share a bucket layout do not.

    Raised when merging histograms or differencing snapshots whose ``le`` bounds differ.
    ``left`` and ``right`` are the two layouts (upper bounds, ``+Inf`` included).
    """

    def __init__(self, message: str, left: tuple[float, ...], right: tuple[float, ...]) -> None:
        super().__init__(message)
        self.left = left
        self.right = right


class DuplicateLabelSetError(SLOError):
    """Two bucket groups collapse onto the same output label set once ``le`` and the metric
    name are dropped (Prometheus: "vector cannot contain metrics with the same labelset")."""


class SLOSpecError(SLOError):
    """An SLO definition is invalid. ``slo_name`` and ``field`` say where."""

    def __init__(self, slo_name: str, field: str, problem: str) -> None:
        super().__init__(f"SLO {slo_name!r}, field {field!r}: {problem}")
        self.slo_name = slo_name
        self.field = field
        self.problem = problem
