"""SQLAlchemy 2 models of the store: targets, scrapes, series, counter/gauge samples,
histogram snapshots (cumulative, per scrape), exemplars.

Layouts (bucket bounds) are stored once and shared: a snapshot holds only its counts.
Timestamps are unix seconds (float). Label sets are stored as canonical JSON (sorted keys),
which is also the series' identity together with the family.
"""

from __future__ import annotations

from sqlalchemy import (
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column


class Base(DeclarativeBase):
    """Declarative base of every store table."""


class Target(Base):
    __tablename__ = "targets"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    dialect: Mapped[str] = mapped_column(String(64), default="")


class Scrape(Base):
    __tablename__ = "scrapes"
    # NOTE: (target, timestamp) is the scrape's identity: writing it twice is a no-op.
    __table_args__ = (UniqueConstraint("target_id", "timestamp_seconds"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"))
    timestamp_seconds: Mapped[float] = mapped_column(Float)
    duration_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    is_up: Mapped[bool] = mapped_column(Boolean, default=True)
    error: Mapped[str] = mapped_column(Text, default="")


class Series(Base):
    __tablename__ = "series"
    # NOTE: semantic flags are part of the identity: data that means something else (a
    # token-weighted ITL, blocks instead of tokens) never shares a series with the canonical.
    # The label set enters the unique key as its SHA-256 (``labels_hash``): PostgreSQL's btree
    # refuses index rows over ~2.7 kB, and label values have no length limit.
    __table_args__ = (UniqueConstraint("family", "labels_hash", "flags"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    target_id: Mapped[int] = mapped_column(ForeignKey("targets.id"), index=True)
    family: Mapped[str] = mapped_column(String(255), index=True)
    kind: Mapped[str] = mapped_column(String(16))  # counter | gauge | histogram | raw type
    labels_json: Mapped[str] = mapped_column(Text)
    labels_hash: Mapped[str] = mapped_column(String(64))  # sha256 hex of labels_json
    flags: Mapped[str] = mapped_column(String(255), default="")  # semantic flags, sorted, ","
    source: Mapped[str] = mapped_column(String(255), default="")


class Layout(Base):
    __tablename__ = "layouts"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bounds_json: Mapped[str] = mapped_column(Text)  # upper bounds, "+Inf" last
    bounds_hash: Mapped[str] = mapped_column(String(64), unique=True)  # sha256 hex of bounds_json


class ValueSample(Base):
    __tablename__ = "samples"
    __table_args__ = (Index("ix_samples_series_time", "series_id", "timestamp_seconds"),)

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    scrape_id: Mapped[int] = mapped_column(ForeignKey("scrapes.id"), primary_key=True)
    timestamp_seconds: Mapped[float] = mapped_column(Float)
    value: Mapped[float] = mapped_column(Float)


class HistogramSnapshotRow(Base):
    __tablename__ = "histogram_snapshots"
    __table_args__ = (Index("ix_snapshots_series_time", "series_id", "timestamp_seconds"),)

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    scrape_id: Mapped[int] = mapped_column(ForeignKey("scrapes.id"), primary_key=True)
    timestamp_seconds: Mapped[float] = mapped_column(Float)
    layout_id: Mapped[int] = mapped_column(ForeignKey("layouts.id"))
    counts_json: Mapped[str] = mapped_column(Text)  # cumulative, one per bound
    sum_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    count: Mapped[float] = mapped_column(Float)


class ExemplarRow(Base):
    __tablename__ = "exemplars"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), index=True)
    scrape_id: Mapped[int] = mapped_column(ForeignKey("scrapes.id"))
    upper_bound: Mapped[float] = mapped_column(Float)
    value: Mapped[float] = mapped_column(Float)
    labels_json: Mapped[str] = mapped_column(Text)
    timestamp_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)


class SpanRow(Base):
    """One received span (OTLP), as ``collectors.request_records.SpanRecord``."""

    __tablename__ = "spans"
    # NOTE: a span is identified by its trace and span id: an exporter's retry stores it once.
    __table_args__ = (UniqueConstraint("trace_id", "span_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    trace_id: Mapped[str] = mapped_column(String(32), index=True)
    span_id: Mapped[str] = mapped_column(String(16))
    parent_span_id: Mapped[str | None] = mapped_column(String(16), nullable=True)
    name: Mapped[str] = mapped_column(String(255))
    kind: Mapped[int] = mapped_column(Integer)
    start_seconds: Mapped[float] = mapped_column(Float, index=True)
    end_seconds: Mapped[float] = mapped_column(Float)
    status_code: Mapped[int] = mapped_column(Integer)
    status_message: Mapped[str] = mapped_column(Text, default="")
    service: Mapped[str | None] = mapped_column(String(255), nullable=True)
    scope: Mapped[str] = mapped_column(String(255), default="")
    attributes_json: Mapped[str] = mapped_column(Text)
    events_json: Mapped[str] = mapped_column(Text)
    resource_json: Mapped[str] = mapped_column(Text)


class RequestRow(Base):
    """One request record derived from a request span
    (``collectors.request_records.RequestRecord``)."""

    __tablename__ = "request_records"
    __table_args__ = (UniqueConstraint("trace_id", "span_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    request_id: Mapped[str] = mapped_column(String(255), index=True)
    trace_id: Mapped[str] = mapped_column(String(32))
    span_id: Mapped[str] = mapped_column(String(16))
    service: Mapped[str | None] = mapped_column(String(255), nullable=True)
    tenant: Mapped[str | None] = mapped_column(String(255), nullable=True)
    model: Mapped[str | None] = mapped_column(String(255), nullable=True)
    replica: Mapped[str | None] = mapped_column(String(255), nullable=True)
    arrival_seconds: Mapped[float] = mapped_column(Float, index=True)
    queue_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    ttft_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    prefill_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    decode_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    tpot_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    e2e_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    input_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    output_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    cached_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    preemptions: Mapped[int | None] = mapped_column(Integer, nullable=True)
    finish_reason: Mapped[str | None] = mapped_column(String(64), nullable=True)
    is_error: Mapped[bool] = mapped_column(Boolean, default=False)


# -- retention and 1-minute roll-ups (revision 0003) ------------------------------------------
# NOTE: retention deletes raw rows by scrape, and a deleted scrape is checked against every
# table that references it: without these indexes each deleted scrape scans those tables.
Index("ix_samples_scrape_id", ValueSample.scrape_id)
Index("ix_snapshots_scrape_id", HistogramSnapshotRow.scrape_id)
Index("ix_exemplars_scrape_id", ExemplarRow.scrape_id)
# NOTE: and it finds the scrapes past retention by time, oldest first.
Index("ix_scrapes_timestamp_seconds", Scrape.timestamp_seconds)


class HistogramRollup(Base):
    """One series' histogram increase over one minute ``(start, start + 60]``: the sum of the
    reset-corrected increases of consecutive snapshot pairs whose later snapshot falls in the
    minute. No row: no such pair. ``other_layout_id`` is set when the minute's snapshots
    carry more than one layout (then the counts are empty and any window over it raises)."""

    __tablename__ = "histogram_rollups"

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    start_seconds: Mapped[float] = mapped_column(Float, primary_key=True, index=True)
    layout_id: Mapped[int] = mapped_column(ForeignKey("layouts.id"))
    other_layout_id: Mapped[int | None] = mapped_column(ForeignKey("layouts.id"), nullable=True)
    pairs: Mapped[int] = mapped_column(Integer)
    counts_json: Mapped[str] = mapped_column(Text)  # cumulative increase, one per bound
    sum_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    count: Mapped[float] = mapped_column(Float)


class SampleRollup(Base):
    """One counter/gauge/raw series over one minute ``(start, start + 60]``: the
    reset-corrected increase over the pairs ending in it (counters), and the count, last, min,
    max and sum of the readings in it (gauges: avg = sum / samples)."""

    __tablename__ = "sample_rollups"

    series_id: Mapped[int] = mapped_column(ForeignKey("series.id"), primary_key=True)
    start_seconds: Mapped[float] = mapped_column(Float, primary_key=True, index=True)
    pairs: Mapped[int] = mapped_column(Integer)
    increase: Mapped[float] = mapped_column(Float)
    samples: Mapped[int] = mapped_column(Integer)
    last_value: Mapped[float] = mapped_column(Float)
    min_value: Mapped[float] = mapped_column(Float)
    max_value: Mapped[float] = mapped_column(Float)
    sum_value: Mapped[float] = mapped_column(Float)


class RollupState(Base):
    """Where maintenance stands (one row, id 1). Scrapes with ``id <= processed_scrape_id``
    are rolled up; ``settled_scrape_id`` <= it is the id below which no scrape can still
    appear (a PostgreSQL writer may commit a lower id after a higher one); ``processed_count``
    is the number of scrapes in (settled, processed] when they were rolled up, so a late lower
    id is noticed. ``raw_horizon_seconds``: raw rows before it may have been deleted."""

    __tablename__ = "rollup_state"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    processed_scrape_id: Mapped[int] = mapped_column(Integer)
    settled_scrape_id: Mapped[int] = mapped_column(Integer)
    processed_count: Mapped[int] = mapped_column(Integer)
    mark_scrape_id: Mapped[int | None] = mapped_column(Integer, nullable=True)
    mark_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    newest_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    raw_horizon_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)


# -- alert states, transition history and silences (revision 0004) ---------------------------
# NOTE: the ``*_json`` columns hold the exact data the reads decode (JSON text, not JSONB:
# JSONB refuses NaN and ``\u0000``); the plain columns beside them are copies for SQL queries
# and indexes, with NUL written as U+FFFD (PostgreSQL text holds no NUL) and clipped to fit.


class AlertStateRow(Base):
    """One pending or firing alert, as the evaluator last saved it (``alerts.Alert``)."""

    __tablename__ = "alert_states"

    fingerprint: Mapped[str] = mapped_column(String(16), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)  # order within the saved evaluation
    alertname: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(16))
    active_at_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    started_at_seconds: Mapped[float | None] = mapped_column(Float, nullable=True)
    alert_json: Mapped[str] = mapped_column(Text)


class AlertTransitionRow(Base):
    """One change of an alert's state (``alerts.transitions.Transition``), oldest id first."""

    __tablename__ = "alert_transitions"
    __table_args__ = (Index("ix_alert_transitions_alertname_at", "alertname", "at_seconds"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at_seconds: Mapped[float] = mapped_column(Float, index=True)
    fingerprint: Mapped[str] = mapped_column(String(16))
    alertname: Mapped[str] = mapped_column(String(255))
    from_state: Mapped[str] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    alert_json: Mapped[str] = mapped_column(Text)


class SilenceRow(Base):
    """One silence (``alerts.Silence``); ``id_hash`` (SHA-256 of the id) is its key, since an
    id is any text; ``seq`` keeps the order silences were first saved in."""

    __tablename__ = "silences"

    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    id_hash: Mapped[str] = mapped_column(String(64), unique=True)
    id: Mapped[str] = mapped_column(String(255))
    matchers: Mapped[str] = mapped_column(Text)  # Alertmanager's text form
    starts_at_seconds: Mapped[float] = mapped_column(Float)
    ends_at_seconds: Mapped[float] = mapped_column(Float, index=True)
    created_by: Mapped[str] = mapped_column(Text)
    comment: Mapped[str] = mapped_column(Text)
    silence_json: Mapped[str] = mapped_column(Text)
