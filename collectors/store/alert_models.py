"""Tables of revision 0005: incidents, rule failures, the evaluator's last evaluation time and
what each notifier has had. As in revision 0004 (``models.py``), each row's ``*_json`` column
holds the exact data the reads decode; the plain columns beside it are copies for queries and
indexes (NUL as U+FFFD, clipped to their length)."""

from __future__ import annotations

from sqlalchemy import BigInteger, Float, Index, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from collectors.store.models import Base

#: ``BIGINT`` on PostgreSQL; on SQLite an ``INTEGER PRIMARY KEY`` (the rowid, which
#: AUTOINCREMENT never hands out twice, even after the highest row is deleted).
IncidentId = BigInteger().with_variant(Integer(), "sqlite")


class IncidentRow(Base):
    """One firing episode of an alert (``alerts.incidents.Incident``): the alert as last
    saved, keyed by ``(fingerprint, started_at_seconds)``, with a never-reused ``id``."""

    __tablename__ = "alert_incidents"
    __table_args__ = (
        UniqueConstraint("fingerprint", "started_at_seconds", name="uq_alert_incidents_episode"),
        Index("ix_alert_incidents_resolved_at", "resolved_at_seconds"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(IncidentId, primary_key=True, autoincrement=True)
    fingerprint: Mapped[str] = mapped_column(String(16))
    alertname: Mapped[str] = mapped_column(String(255))
    severity: Mapped[str] = mapped_column(String(255))
    active_at_seconds: Mapped[float] = mapped_column(Float)
    started_at_seconds: Mapped[float] = mapped_column(Float, index=True)
    resolved_at_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    alert_json: Mapped[str] = mapped_column(Text)
    # Revision 0007: who acknowledged it, when, and why (all ``NULL``: not acknowledged).
    # Exact text (an acknowledgement holds no NUL or other control character).
    ack_by: Mapped[str | None] = mapped_column(Text, nullable=True)
    ack_at_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    ack_comment: Mapped[str | None] = mapped_column(Text, nullable=True)


class RuleFailureRow(Base):
    """A rule's latest evaluation error and how many there were (``RuleFailure``); keyed by
    the SHA-256 of the rule's name (a name has no length limit)."""

    __tablename__ = "alert_rule_failures"

    rule_hash: Mapped[str] = mapped_column(String(64), primary_key=True)
    rule: Mapped[str] = mapped_column(Text)
    error_type: Mapped[str] = mapped_column(String(255))
    message: Mapped[str] = mapped_column(Text)
    first_failed_seconds: Mapped[float] = mapped_column(Float)
    last_failed_seconds: Mapped[float] = mapped_column(Float, index=True)
    num_failures: Mapped[int] = mapped_column(BigInteger)
    failure_json: Mapped[str] = mapped_column(Text)


class EvaluatorStateRow(Base):
    """One row (id 1): when the evaluator last saved an evaluation."""

    __tablename__ = "alert_evaluator_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    last_evaluation_seconds: Mapped[float] = mapped_column(Float)


class NotifiedRow(Base):
    """What one notifier has had of one alert (``alerts.transitions.Notified``)."""

    __tablename__ = "alert_notified"

    notifier: Mapped[str] = mapped_column(String(255), primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(16), primary_key=True)
    state: Mapped[str] = mapped_column(String(16))
    at_seconds: Mapped[float] = mapped_column(Float, index=True)
    alert_json: Mapped[str] = mapped_column(Text)
