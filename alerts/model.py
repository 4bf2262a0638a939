"""An alert as data: what the evaluator produces, the store keeps and the notifiers send.

The lifecycle is Prometheus's (``rules/alerting.go``)::

    inactive ──condition holds──▶ pending ──held for `for:`──▶ firing ──clears──▶ resolved
                  (active_at)              (started_at)                (ended_at)

A pending alert whose condition clears before ``for:`` elapses is dropped, never resolved
(Prometheus deletes it), so a resolved alert always fired. Times are Unix seconds. The alert's
identity is its label set; :attr:`Alert.fingerprint` is Alertmanager's hash of it, so the same
alert has the same fingerprint here, in the store and in Alertmanager's API.

The transitions (:meth:`Alert.pending`, :meth:`Alert.fire`, :meth:`Alert.resolve`) return new
alerts and refuse moves the lifecycle does not have.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from alerts.conventions import ALERTNAME
from alerts.errors import AlertError
from alerts.labels import LabelSet, fingerprint_hex


class AlertState(enum.Enum):
    INACTIVE = "inactive"
    PENDING = "pending"
    FIRING = "firing"
    RESOLVED = "resolved"


def _check_time(name: str, value: float | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise AlertError(name, f"must be Unix seconds (a number), not {value!r}")
    if not math.isfinite(value):
        raise AlertError(name, f"must be a finite time in Unix seconds, not {value!r}")


@dataclass(frozen=True)
class Alert:
    """One alert instance.

    - ``labels``: its identity (``alertname`` required); ``annotations``: free text for humans
      (summary, description, runbook), not part of the identity.
    - ``active_at_seconds``: when the condition first held (the start of pending);
      ``started_at_seconds``: when it began firing (Alertmanager's ``startsAt``, Prometheus's
      ``FiredAt``); ``ended_at_seconds``: when it resolved (``endsAt`` of the resolved alert).
    - ``value``: the rule expression's value at the last evaluation (None when not evaluated,
      NaN allowed: a NaN ratio never fires, but may be recorded).
    - ``generator_url``: a link back to what produced the alert (Alertmanager's
      ``generatorURL``); empty when there is none.
    - ``keep_firing_since_seconds``: for a firing alert held by ``keep_firing_for:``, when its
      condition stopped holding (Prometheus's ``KeepFiringSince``); None otherwise.
    - ``cause`` and ``cause_scope``: what triage concluded when the alert fired (a
      :class:`alerts.vocabulary.Cause` value, and ``fleet`` or the replica it points at);
      empty when no cause stood out or nothing triaged it. ``incident_group``: the
      fingerprint of the alert whose incident this one joined (its own when it opened one,
      :mod:`alerts.grouping`); empty when it was not grouped. Set once, when it fires.
    """

    labels: LabelSet
    state: AlertState
    annotations: LabelSet = field(default_factory=lambda: LabelSet(field="annotations"))
    active_at_seconds: float | None = None
    started_at_seconds: float | None = None
    ended_at_seconds: float | None = None
    value: float | None = None
    generator_url: str = ""
    keep_firing_since_seconds: float | None = None
    cause: str = ""
    cause_scope: str = ""
    incident_group: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "labels", LabelSet.coerce(self.labels, "labels"))
        object.__setattr__(self, "annotations", LabelSet.coerce(self.annotations, "annotations"))
        if not isinstance(self.state, AlertState):
            try:
                object.__setattr__(self, "state", AlertState(self.state))
            except ValueError:
                names = ", ".join(s.value for s in AlertState)
                raise AlertError("state", f"{self.state!r} is not one of {names}") from None
        if ALERTNAME not in self.labels:
            raise AlertError("labels", f"an alert needs an {ALERTNAME!r} label: {self.labels!r}")
        for name in (
            "active_at_seconds",
            "started_at_seconds",
            "ended_at_seconds",
            "keep_firing_since_seconds",
        ):
            _check_time(name, getattr(self, name))
        if self.value is not None and (
            isinstance(self.value, bool) or not isinstance(self.value, int | float)
        ):
            raise AlertError("value", f"must be a number or None, not {self.value!r}")
        for name in ("generator_url", "cause", "cause_scope", "incident_group"):
            if not isinstance(getattr(self, name), str):
                raise AlertError(name, f"must be a string, not {getattr(self, name)!r}")
        self._check_times_for_state()

    def _check_times_for_state(self) -> None:
        required = {
            AlertState.INACTIVE: (),
            AlertState.PENDING: ("active_at_seconds",),
            AlertState.FIRING: ("active_at_seconds", "started_at_seconds"),
            AlertState.RESOLVED: ("active_at_seconds", "started_at_seconds", "ended_at_seconds"),
        }[self.state]
        for name in ("active_at_seconds", "started_at_seconds", "ended_at_seconds"):
            is_set = getattr(self, name) is not None
            if name in required and not is_set:
                raise AlertError(name, f"a {self.state.value} alert needs it")
            if name not in required and is_set:
                raise AlertError(
                    name, f"a {self.state.value} alert has none; got {getattr(self, name)!r}"
                )
        active, started, ended = (
            self.active_at_seconds,
            self.started_at_seconds,
            self.ended_at_seconds,
        )
        if started is not None and active is not None and started < active:
            raise AlertError(
                "started_at_seconds",
                f"{started!r} is before active_at_seconds {active!r}: an alert fires after it "
                "becomes active",
            )
        held = self.keep_firing_since_seconds
        if held is not None and self.state is not AlertState.FIRING:
            raise AlertError(
                "keep_firing_since_seconds",
                f"only a firing alert is kept firing; this one is {self.state.value}",
            )
        if held is not None and started is not None and held < started:
            raise AlertError(
                "keep_firing_since_seconds",
                f"{held!r} is before started_at_seconds {started!r}",
            )
        if ended is not None and started is not None and ended < started:
            raise AlertError(
                "ended_at_seconds",
                f"{ended!r} is before started_at_seconds {started!r}: an alert resolves after "
                "it fires",
            )

    @property
    def name(self) -> str:
        return self.labels[ALERTNAME]

    @property
    def fingerprint(self) -> str:
        """Alertmanager's fingerprint of the labels, as 16 hex digits."""
        return fingerprint_hex(self.labels.fingerprint())

    @property
    def is_firing(self) -> bool:
        return self.state is AlertState.FIRING

    @property
    def group(self) -> str:
        """The incident group it belongs to: its ``incident_group``, or itself ungrouped."""
        return self.incident_group or self.fingerprint

    def explained(self, cause: str, scope: str, group: str) -> Alert:
        """This alert with triage's ``cause`` and ``scope`` and its incident ``group``."""
        return replace(self, cause=cause, cause_scope=scope, incident_group=group)

    # -- transitions -------------------------------------------------------------------------

    @classmethod
    def pending(
        cls,
        labels: LabelSet | dict[str, str],
        at_seconds: float,
        annotations: LabelSet | dict[str, str] | None = None,
        value: float | None = None,
        generator_url: str = "",
    ) -> Alert:
        """A new alert whose condition started holding at ``at_seconds``."""
        return cls(
            labels=LabelSet.coerce(labels, "labels"),
            state=AlertState.PENDING,
            annotations=LabelSet.coerce(annotations or {}, "annotations"),
            active_at_seconds=at_seconds,
            value=value,
            generator_url=generator_url,
        )

    def fire(self, at_seconds: float, value: float | None = None) -> Alert:
        """This pending alert, firing from ``at_seconds`` (its ``for:`` has elapsed)."""
        self._require(AlertState.PENDING, "fire")
        return self._moved(AlertState.FIRING, started_at_seconds=at_seconds, value=value)

    def resolve(self, at_seconds: float, value: float | None = None) -> Alert:
        """This firing alert, resolved at ``at_seconds``."""
        self._require(AlertState.FIRING, "resolve")
        return self._moved(
            AlertState.RESOLVED,
            ended_at_seconds=at_seconds,
            keep_firing_since_seconds=None,
            value=value,
        )

    def keep_firing(self, since_seconds: float | None) -> Alert:
        """This firing alert, held by ``keep_firing_for:`` since its condition stopped holding
        at ``since_seconds`` (an earlier hold is kept); ``None`` clears the hold when the
        condition holds again."""
        self._require(AlertState.FIRING, "keep firing")
        if since_seconds is not None and self.keep_firing_since_seconds is not None:
            return self
        return replace(self, keep_firing_since_seconds=since_seconds)

    def _require(self, state: AlertState, action: str) -> None:
        if self.state is not state:
            raise AlertError(
                "state",
                f"cannot {action} a {self.state.value} alert {self.name!r} "
                f"({self.fingerprint}); only a {state.value} one",
            )

    def _moved(self, state: AlertState, value: float | None, **times: Any) -> Alert:
        return replace(self, state=state, value=self.value if value is None else value, **times)


def unique_by_fingerprint(alerts: Iterable[Alert]) -> list[Alert]:
    """``alerts`` as a list, refusing two alerts with one label set (one fingerprint): an alert
    set holds each alert once, and results keyed by fingerprint would silently keep one."""
    listed = list(alerts)
    seen: dict[str, Alert] = {}
    for alert in listed:
        other = seen.get(alert.fingerprint)
        if other is not None:
            raise AlertError(
                "alerts",
                f"two alerts share the labels {alert.labels!r} (fingerprint {alert.fingerprint}, "
                f"{other.state.value} and {alert.state.value}); pass each alert once",
            )
        seen[alert.fingerprint] = alert
    return listed
