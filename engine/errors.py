"""Errors the engine raises for a caller's mistake. Each names the knob or field and the value."""

from __future__ import annotations


class EngineError(Exception):
    """Base class for every engine error that a caller can act on."""


class ConfigError(EngineError, ValueError):
    """An engine knob, or a combination of knobs, that cannot work."""


class RequestError(EngineError, ValueError):
    """A request that cannot be served as given (empty prompt, too long, bad parameter)."""
