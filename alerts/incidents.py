"""Incidents: one record per firing episode of an alert, what an on-call engineer names
(``tailwatch incident show 12``) and the console links to (``/incident/12``).

An episode is identified by the alert's fingerprint and the time it began firing
(``started_at_seconds``): the same alert firing again later is a new incident. The store
gives each incident a short integer id when it first sees the episode, and never reuses one.
Each saved evaluation updates its open incidents with the alert as last evaluated (value,
annotations) and closes those the evaluation resolved (:func:`episodes` says which a save
touches; both state stores apply it the same way, in the save's transaction).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from alerts.conventions import SEVERITY
from alerts.errors import AcknowledgementError
from alerts.labels import LabelSet
from alerts.model import Alert, AlertState
from alerts.transitions import Transition

#: The largest incident id a store hands out or looks up (PostgreSQL's ``bigint``).
MAX_INCIDENT_ID = 2**63 - 1
#: Annotation the list and the report show as the one-line description.
SUMMARY = "summary"
#: The longest name an acknowledgement records (``--by``), in characters.
MAX_ACK_BY = 100
#: The longest comment an acknowledgement records (``--comment``), in characters.
MAX_ACK_COMMENT = 500
#: Unicode categories an acknowledgement's text may not hold: control characters (NUL,
#: newline, escape), format characters (bidi overrides), line and paragraph separators, and
#: lone surrogates (bytes that were not UTF-8).
_REFUSED = ("Cc", "Cf", "Zl", "Zp", "Cs")


def _checked_text(field: str, text: object, limit: int, *, required: bool) -> str:
    if not isinstance(text, str):
        raise AcknowledgementError(field, f"{text!r} is not text")
    if required and not text.strip():
        raise AcknowledgementError(field, "must name who acknowledges (it is empty)")
    if len(text) > limit:
        raise AcknowledgementError(field, f"{len(text)} characters: at most {limit}")
    if text != text.strip():
        raise AcknowledgementError(field, "must not begin or end with spaces")
    for char in text:
        if unicodedata.category(char) in _REFUSED:
            raise AcknowledgementError(
                field, f"holds the control or format character U+{ord(char):04X}: one line of text"
            )
    return text


@dataclass(frozen=True)
class Acknowledgement:
    """Someone is on an incident (PagerDuty's and Opsgenie's "acknowledge"): ``by`` whom
    (1-:data:`MAX_ACK_BY` characters), when (``at_seconds``, finite Unix seconds) and an
    optional ``comment`` (up to :data:`MAX_ACK_COMMENT`). It mutes nothing, unlike a silence.
    Text holds no control or format character and no spaces at its ends
    (:class:`~alerts.errors.AcknowledgementError` otherwise); :meth:`create` trims them."""

    by: str
    at_seconds: float
    comment: str = ""

    def __post_init__(self) -> None:
        _checked_text("by", self.by, MAX_ACK_BY, required=True)
        _checked_text("comment", self.comment, MAX_ACK_COMMENT, required=False)
        at = self.at_seconds
        if isinstance(at, bool) or not isinstance(at, int | float) or not math.isfinite(at):
            raise AcknowledgementError("at_seconds", f"{at!r}: must be finite Unix seconds")

    @classmethod
    def create(cls, by: str, at_seconds: float, comment: str = "") -> Acknowledgement:
        """An acknowledgement from what a person typed: spaces at the ends trimmed."""
        strip = lambda text: text.strip() if isinstance(text, str) else text  # noqa: E731
        return cls(strip(by), at_seconds, strip(comment))


@dataclass(frozen=True)
class Incident:
    """One firing episode: ``id`` (a positive integer, stable for the incident's life) and
    ``alert``, the alert as last saved (firing while the incident is open, resolved once it
    is closed), whose labels, annotations, times and value the properties read."""

    id: int
    alert: Alert
    #: Who is on it, since when (``None``: nobody has acknowledged it, or it was undone).
    ack: Acknowledgement | None = None

    @property
    def fingerprint(self) -> str:
        return self.alert.fingerprint

    @property
    def alertname(self) -> str:
        return self.alert.name

    @property
    def severity(self) -> str:
        """The alert's ``severity`` label (``page``, ``ticket``), empty when it has none."""
        return self.alert.labels.get(SEVERITY, "")

    @property
    def labels(self) -> LabelSet:
        return self.alert.labels

    @property
    def annotations(self) -> LabelSet:
        return self.alert.annotations

    @property
    def summary(self) -> str:
        return self.alert.annotations.get(SUMMARY, "")

    @property
    def pending_since_seconds(self) -> float:
        """When the alert's condition first held (it went pending): where triage's window
        starts."""
        assert self.alert.active_at_seconds is not None
        return self.alert.active_at_seconds

    @property
    def started_at_seconds(self) -> float:
        """When the alert went firing: the incident's start."""
        assert self.alert.started_at_seconds is not None
        return self.alert.started_at_seconds

    @property
    def resolved_at_seconds(self) -> float | None:
        """When the alert resolved; ``None`` while the incident is open."""
        return self.alert.ended_at_seconds

    @property
    def value(self) -> float | None:
        """The rule's value at the last saved evaluation (NaN kept)."""
        return self.alert.value

    @property
    def is_open(self) -> bool:
        return self.alert.state is AlertState.FIRING

    @property
    def state(self) -> str:
        """``firing`` (open) or ``resolved``."""
        return self.alert.state.value

    @property
    def cause(self) -> str:
        """What triage concluded when it fired, with its scope (``slow-replica on
        replica-1``); empty when no cause stood out."""
        a = self.alert
        if not a.cause:
            return ""
        return a.cause if a.cause_scope in ("", "fleet") else f"{a.cause} on {a.cause_scope}"

    @property
    def is_symptom(self) -> bool:
        """Whether it joined another alert's incident (``alerts.grouping``)."""
        group = self.alert.incident_group
        return bool(group) and group != self.fingerprint


def opener_of(incident: Incident, incidents: Sequence[Incident]) -> Incident | None:
    """The incident a symptom joined: the latest episode of its group's alert that began
    firing at or before it (``None`` for an incident that opened its own, or an opener not
    among ``incidents``)."""
    if not incident.is_symptom:
        return None
    candidates = [
        i
        for i in incidents
        if i.fingerprint == incident.alert.incident_group
        and i.started_at_seconds <= incident.started_at_seconds
    ]
    return max(candidates, key=lambda i: (i.started_at_seconds, i.id), default=None)


def episode_key(alert: Alert) -> tuple[str, float]:
    """The incident an alert (firing or resolved) belongs to: (fingerprint, started at)."""
    assert alert.started_at_seconds is not None
    return (alert.fingerprint, alert.started_at_seconds)


def episodes(alerts: Sequence[Alert], transitions: Sequence[Transition]) -> list[Alert]:
    """The firing episodes one saved evaluation touches, each as the alert to store with its
    incident: the firing and resolved alerts of ``transitions`` and the firing ones of
    ``alerts``, one per :func:`episode_key` in first-seen order. A later version replaces an
    earlier one, except that a resolved version is final (a resolution is never undone)."""
    chosen: dict[tuple[str, float], Alert] = {}
    candidates = [t.alert for t in transitions]
    candidates += [a for a in alerts if a.state is AlertState.FIRING]
    for alert in candidates:
        if alert.state not in (AlertState.FIRING, AlertState.RESOLVED):
            continue
        key = episode_key(alert)
        previous = chosen.get(key)
        if previous is not None and previous.state is AlertState.RESOLVED:
            continue
        chosen[key] = alert
    return list(chosen.values())


def merged(stored: Alert, new: Alert) -> Alert:
    """What an incident holds after a save brings ``new`` for it: ``new``, unless the
    incident is already resolved (closed incidents do not reopen)."""
    return stored if stored.state is AlertState.RESOLVED else new


def check_can_acknowledge(incident: Incident | None, incident_id: object) -> Incident:
    """``incident``, unless it is missing or resolved: :class:`AcknowledgementError` then.
    As in PagerDuty, a resolved incident cannot be acknowledged, and the acknowledgement it
    had when it resolved stays as it was (it cannot be undone either)."""
    if incident is None:
        raise AcknowledgementError("incident", f"no incident has id {incident_id!r}")
    if not incident.is_open:
        raise AcknowledgementError(
            "incident",
            f"incident {incident.id} is resolved: a resolved incident cannot be acknowledged "
            "or unacknowledged",
        )
    return incident


def check_can_unacknowledge(incident: Incident | None, incident_id: object) -> Acknowledgement:
    """The acknowledgement to undo: :class:`AcknowledgementError` when the incident is
    missing, resolved or not acknowledged."""
    ack = check_can_acknowledge(incident, incident_id).ack
    if ack is None:
        raise AcknowledgementError("incident", f"incident {incident_id} is not acknowledged")
    return ack


def check_incident_id(incident_id: object) -> int | None:
    """``incident_id`` as a valid id, or ``None`` when no incident can have it (not a positive
    integer up to :data:`MAX_INCIDENT_ID`): a lookup of such an id finds nothing."""
    if isinstance(incident_id, bool) or not isinstance(incident_id, int):
        return None
    return incident_id if 1 <= incident_id <= MAX_INCIDENT_ID else None


def listing_order(
    incidents: Sequence[Incident], since_seconds: float, limit: int
) -> list[Incident]:
    """Open incidents, then those resolved at or after ``since_seconds``, each newest first
    (by start, then id), at most ``limit`` (a positive integer; ``ValueError`` otherwise)."""
    check_limit(limit)

    def is_listed(incident: Incident) -> bool:
        resolved = incident.resolved_at_seconds
        return resolved is None or resolved >= since_seconds  # NOTE: NaN lists open ones only

    chosen = [i for i in incidents if is_listed(i)]
    chosen.sort(key=lambda i: (not i.is_open, -i.started_at_seconds, -i.id))
    return chosen[:limit]


def check_limit(limit: object) -> int:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit={limit!r}: must be a positive integer")
    return limit
