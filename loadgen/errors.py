"""Errors a user of the load generator can act on."""

from __future__ import annotations


class LoadgenError(Exception):
    """A bad workload, scenario or target; the message names the field and the value."""


class WorkloadError(LoadgenError):
    """A workload field with a value that cannot work: ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


class TargetError(LoadgenError):
    """A URL that cannot be reached or does not speak the OpenAI API."""
