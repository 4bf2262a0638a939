"""Silences: matchers plus a time range during which matching alerts send no notification.

Semantics follow Alertmanager (``silence/silence.go``, ``api/v2/api.go``):

- a silence is *pending* before ``starts_at``, *active* from ``starts_at`` up to (not
  including) ``ends_at``, *expired* from ``ends_at`` on;
- it mutes an alert while active and every matcher matches the alert's labels;
- a new silence needs at least one matcher, at least one matcher that does not match the empty
  string (else it would mute every alert lacking a label), ``ends_at`` after ``starts_at`` and
  not in the past, an author and a comment;
- expiring an active silence ends it now; expiring a pending one moves both ends to now.

Time is passed in explicitly (``now_seconds``, Unix seconds): that is the injectable clock, so
state is a pure function of the silence and the time and tests never sleep.
"""

from __future__ import annotations

import enum
import math
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from alerts.errors import SilenceError
from alerts.matchers import Matcher, format_matchers, parse_matchers
from alerts.model import Alert, unique_by_fingerprint


class SilenceState(enum.Enum):
    PENDING = "pending"
    ACTIVE = "active"
    EXPIRED = "expired"


@dataclass(frozen=True)
class Silence:
    """A stored silence. Its invariants hold for every silence, expired ones included; the
    stricter rules for *new* silences are in :meth:`create`."""

    id: str
    matchers: tuple[Matcher, ...]
    starts_at_seconds: float
    ends_at_seconds: float
    created_by: str
    comment: str

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id.strip():
            raise SilenceError("id", f"must be a non-empty string, not {self.id!r}")
        matchers = self.matchers
        if isinstance(matchers, str):
            matchers = parse_matchers(matchers)
        matchers = tuple(matchers)
        if not all(isinstance(m, Matcher) for m in matchers):
            raise SilenceError("matchers", f"must be Matcher objects or matcher text: {matchers!r}")
        object.__setattr__(self, "matchers", matchers)
        if not matchers:
            raise SilenceError(
                "matchers",
                'a silence needs at least one matcher (e.g. alertname="X"); with '
                "none it would mute every alert",
            )
        if all(matcher.matches_value("") for matcher in matchers):
            raise SilenceError(
                "matchers",
                f"{format_matchers(matchers)}: at least one matcher must not match the empty "
                "string, or the silence mutes every alert that lacks the label",
            )
        for name in ("starts_at_seconds", "ends_at_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise SilenceError(name, f"must be Unix seconds (a number), not {value!r}")
            if not math.isfinite(value):
                raise SilenceError(name, f"must be a finite time, not {value!r}")
        if self.ends_at_seconds < self.starts_at_seconds:
            raise SilenceError(
                "ends_at_seconds",
                f"{self.ends_at_seconds!r} is before starts_at_seconds {self.starts_at_seconds!r}",
            )
        for name in ("created_by", "comment"):
            if not isinstance(getattr(self, name), str):
                raise SilenceError(name, f"must be a string, not {getattr(self, name)!r}")

    @classmethod
    def create(
        cls,
        matchers: Iterable[Matcher] | str,
        starts_at_seconds: float,
        ends_at_seconds: float,
        created_by: str,
        comment: str,
        now_seconds: float,
        silence_id: str | None = None,
    ) -> Silence:
        """A new silence, validated as Alertmanager's API validates a posted one.

        ``matchers`` may be matcher text (``'alertname="X", severity=~"page|ticket"'``). A
        start in the past is moved to ``now_seconds`` (as Alertmanager does). ``silence_id``
        defaults to a random UUID."""
        if (
            isinstance(now_seconds, bool)
            or not isinstance(now_seconds, int | float)
            or not math.isfinite(now_seconds)
        ):
            raise SilenceError("now_seconds", f"must be finite Unix seconds, not {now_seconds!r}")
        if not isinstance(created_by, str) or not created_by.strip():
            raise SilenceError("created_by", "say who creates the silence (a non-empty name)")
        if not isinstance(comment, str) or not comment.strip():
            raise SilenceError("comment", "say why the alerts are silenced (a non-empty comment)")
        silence = cls(
            id=silence_id if silence_id is not None else str(uuid.uuid4()),
            matchers=matchers,  # type: ignore[arg-type]  # text is parsed in __post_init__
            starts_at_seconds=starts_at_seconds,
            ends_at_seconds=ends_at_seconds,
            created_by=created_by,
            comment=comment,
        )
        if silence.ends_at_seconds <= silence.starts_at_seconds:
            raise SilenceError(
                "ends_at_seconds",
                f"{ends_at_seconds!r} must be after starts_at_seconds {starts_at_seconds!r}: a "
                "silence needs a positive duration",
            )
        if silence.ends_at_seconds <= now_seconds:
            raise SilenceError(
                "ends_at_seconds",
                f"{ends_at_seconds!r} is not after now ({now_seconds!r}): the silence would "
                "already be expired",
            )
        return replace(silence, starts_at_seconds=max(starts_at_seconds, now_seconds))

    def state(self, now_seconds: float) -> SilenceState:
        if now_seconds < self.starts_at_seconds:
            return SilenceState.PENDING
        if now_seconds < self.ends_at_seconds:
            return SilenceState.ACTIVE
        return SilenceState.EXPIRED

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether every matcher matches ``labels`` (whatever the silence's state)."""
        return all(matcher.matches(labels) for matcher in self.matchers)

    def mutes(self, labels: Mapping[str, str], now_seconds: float) -> bool:
        """Whether this silence mutes an alert with ``labels`` at ``now_seconds``."""
        return self.state(now_seconds) is SilenceState.ACTIVE and self.matches(labels)

    def expire(self, now_seconds: float) -> Silence:
        """This silence, expired at ``now_seconds`` (unchanged if it already is)."""
        state = self.state(now_seconds)
        if state is SilenceState.EXPIRED:
            return self
        if state is SilenceState.PENDING:
            return replace(self, starts_at_seconds=now_seconds, ends_at_seconds=now_seconds)
        return replace(self, ends_at_seconds=now_seconds)


def silenced_by(
    labels: Mapping[str, str], silences: Iterable[Silence], now_seconds: float
) -> tuple[str, ...]:
    """The ids of the silences muting an alert with ``labels`` at ``now_seconds``, sorted (as
    Alertmanager's ``status.silencedBy``)."""
    return tuple(sorted(s.id for s in silences if s.mutes(labels, now_seconds)))


def silenced_alerts(
    alerts: Iterable[Alert], silences: Iterable[Silence], now_seconds: float
) -> dict[str, tuple[str, ...]]:
    """For each muted alert's fingerprint, the ids of the silences muting it; alerts no silence
    mutes are absent."""
    active = [s for s in silences if s.state(now_seconds) is SilenceState.ACTIVE]
    muted: dict[str, tuple[str, ...]] = {}
    for alert in unique_by_fingerprint(alerts):
        ids = tuple(sorted(s.id for s in active if s.matches(alert.labels)))
        if ids:
            muted[alert.fingerprint] = ids
    return muted
