"""The store's spans and request records (OTLP): the ``Store`` methods that write and read
them live here, mixed into :class:`collectors.store.repository.Store`."""

from __future__ import annotations


class TracesMixin:
    """Spans and request records. Uses ``self._sessions`` (a ``sessionmaker``) of ``Store``."""
