"""The evaluator's alert states, history, incidents, silences, rule failures and notifier
memory in the store's database: the SQL of :class:`alerts.state.AlertStateStore`.

The tables are the store's (``collectors/store/models.py`` and ``alert_models.py``, on its
metadata and Alembic history, expired by its maintenance); the reads and writes live here,
beside the types they encode, so the store knows nothing of alerts. The application puts the
two together where it is assembled (the collector daemon, ``alerts run``, the console):
:func:`alert_state_of` over an open :class:`collectors.store.Store`.
"""

from __future__ import annotations

import threading
from typing import Protocol

from sqlalchemy.orm import Session, sessionmaker

from alerts.sql.state import SQLAlertState

__all__ = ["SQLAlertState", "alert_state_of"]


class _SQLStore(Protocol):
    """What :func:`alert_state_of` needs of a store: its sessions and its write lock."""

    @property
    def sessions(self) -> sessionmaker[Session]: ...

    @property
    def write_lock(self) -> threading.Lock: ...


def alert_state_of(store: _SQLStore) -> SQLAlertState:
    """The alert state on ``store``'s tables, writing under its one write lock (shared with
    its scrape, span and maintenance writers). Cheap: it holds no state of its own, so any
    number of them over one store agree."""
    return SQLAlertState(store.sessions, store.write_lock)
