"""Retention and 1-minute roll-ups: the ``Store`` methods that maintain and read them live
here, mixed into :class:`collectors.store.repository.Store`."""

from __future__ import annotations


class RollupsMixin:
    """Roll-ups and retention. Uses ``self._sessions`` (a ``sessionmaker``) of ``Store``."""
