"""Errors raised while resolving and loading a model."""

from __future__ import annotations


class ModelLoadError(Exception):
    """A preset or checkpoint could not be loaded; the message says what to do about it."""
