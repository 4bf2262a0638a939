"""The table of revision 0008: change events (``collectors.store.change_records``), one row
per event, unique on its identity so that detecting a change twice stores it once."""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from collectors.store.models import Base

#: ``BIGINT`` on PostgreSQL; on SQLite an ``INTEGER PRIMARY KEY`` (the rowid).
ChangeId = BigInteger().with_variant(Integer(), "sqlite")


class ChangeEventRow(Base):
    """One :class:`~collectors.store.change_records.ChangeEvent`. The identity's text enters
    the unique key as its SHA-256 (``identity_hash``), as a series' labels do: PostgreSQL's
    btree refuses index rows over ~2.7 kB."""

    __tablename__ = "change_events"
    __table_args__ = (
        UniqueConstraint("identity_hash", name="uq_change_events_identity"),
        Index("ix_change_events_at", "at_seconds"),
        Index("ix_change_events_target_at", "target", "at_seconds"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(ChangeId, primary_key=True, autoincrement=True)
    at_seconds: Mapped[float] = mapped_column(Float)
    target: Mapped[str] = mapped_column(String(512))
    kind: Mapped[str] = mapped_column(String(16))
    source: Mapped[str] = mapped_column(Text)
    subject: Mapped[str] = mapped_column(Text)
    before: Mapped[str] = mapped_column(Text)
    after: Mapped[str] = mapped_column(Text)
    identity_hash: Mapped[str] = mapped_column(String(64))
