"""Tables of revision 0006: the knob lab's runs and points (``collectors.store.lab_records``).

The JSON columns are ``Text`` holding JSON text (see :mod:`collectors.store.lab_codec` for
why not the database's JSON type). A point belongs to its run: deleting a run deletes its
points. Store retention does not touch these tables: lab results are studies, not metrics.
"""

from __future__ import annotations

from sqlalchemy import BigInteger, Boolean, Float, ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from collectors.store.models import Base

#: ``BIGINT`` on PostgreSQL; on SQLite an ``INTEGER PRIMARY KEY`` (the rowid).
LabId = BigInteger().with_variant(Integer(), "sqlite")


class LabRunRow(Base):
    """One sweep or replay (``LabRun``); ``id`` is never reused."""

    __tablename__ = "lab_runs"
    __table_args__ = (
        Index("ix_lab_runs_kind_created_at", "kind", "created_at_seconds"),
        Index("ix_lab_runs_created_at", "created_at_seconds"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(LabId, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    status: Mapped[str] = mapped_column(String(16))
    name: Mapped[str] = mapped_column(Text)
    target: Mapped[str] = mapped_column(Text)
    simulated: Mapped[bool] = mapped_column(Boolean)
    created_at_seconds: Mapped[float] = mapped_column(Float)
    finished_at_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    sweep_knob: Mapped[str | None] = mapped_column(Text, nullable=True)
    num_repeats: Mapped[int] = mapped_column(Integer)
    num_planned_points: Mapped[int] = mapped_column(Integer)
    window_start_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    window_end_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    knobs_json: Mapped[str] = mapped_column(Text)
    workload_json: Mapped[str] = mapped_column(Text)
    knob_values_json: Mapped[str] = mapped_column(Text)
    rates_json: Mapped[str] = mapped_column(Text)


class LabPointRow(Base):
    """What one (knob value, rate, repeat) of a run measured (``LabPoint``); ``id`` orders a
    run's points as they were measured."""

    __tablename__ = "lab_points"
    __table_args__ = (
        Index("ix_lab_points_run_id", "run_id", "id"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(LabId, primary_key=True, autoincrement=True)
    run_id: Mapped[int] = mapped_column(LabId, ForeignKey("lab_runs.id", ondelete="CASCADE"))
    knob_value_json: Mapped[str] = mapped_column(Text)
    rate: Mapped[float] = mapped_column(Float)
    repeat: Mapped[int] = mapped_column(Integer)
    measured_at_seconds: Mapped[float] = mapped_column(Float)
    summary_json: Mapped[str] = mapped_column(Text)
    samples_json: Mapped[str] = mapped_column(Text)
