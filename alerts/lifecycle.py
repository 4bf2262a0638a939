"""One rule's alert lifecycle step, as Prometheus's ``AlertingRule.Eval``
(``rules/alerting.go``) takes it: the rule's active alerts and its expression's output at
``now`` in, the new active alerts, the alerts resolved now and the transitions out.

- an instance whose condition holds and has no active alert starts one, **pending** at ``now``
  (its ``active_at``); an active one keeps its times and takes the new value and annotations,
  and a firing one held by ``keep_firing_for:`` is released from the hold;
- a **pending** alert whose condition no longer holds is dropped (to inactive, never resolved);
- a **firing** alert whose condition no longer holds is kept firing while ``now`` is less
  than ``keep_firing_for`` after the first evaluation that missed it, else **resolved** at
  ``now`` (so exactly at the boundary it resolves);
- then every pending alert whose ``now - active_at >= for`` **fires** at ``now`` (so with
  ``for: 0`` an alert fires on its first evaluation, and exactly at the boundary it fires).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import NamedTuple

from alerts.labels import LabelSet, fingerprint_hex
from alerts.model import Alert, AlertState
from alerts.transitions import Transition


class Step(NamedTuple):
    """The result of one lifecycle step: the alerts still active (pending or firing), those
    resolved at this step, and every transition in the order it happened."""

    active: dict[str, Alert]
    resolved: list[Alert]
    transitions: list[Transition]


def _moved(at: float, before: AlertState, alert: Alert) -> Transition:
    return Transition(at, alert.fingerprint, before, alert.state, alert)


def step(
    active: Mapping[str, Alert],
    holding: Sequence[tuple[LabelSet, float]],
    now: float,
    *,
    for_seconds: float,
    keep_firing_for_seconds: float,
    annotations: Mapping[str, str] | None = None,
) -> Step:
    """Advance one rule's ``active`` alerts (by fingerprint) to ``now``, given the label sets
    (and values) whose condition holds now."""
    notes = LabelSet.coerce(dict(annotations or {}), "annotations")
    out: dict[str, Alert] = {}
    transitions: list[Transition] = []
    resolved: list[Alert] = []
    seen: set[str] = set()
    for labels, value in holding:
        fingerprint = fingerprint_hex(labels.fingerprint())
        seen.add(fingerprint)
        alert = active.get(fingerprint)
        if alert is None:
            alert = Alert.pending(labels, now, annotations=notes, value=value)
            transitions.append(_moved(now, AlertState.INACTIVE, alert))
        else:
            alert = replace(alert, value=value, annotations=notes)
            if alert.keep_firing_since_seconds is not None:
                alert = alert.keep_firing(None)
        out[fingerprint] = alert
    for fingerprint, alert in active.items():
        if fingerprint in seen:
            continue
        if alert.state is AlertState.PENDING:
            gone = Alert(alert.labels, AlertState.INACTIVE, alert.annotations, value=alert.value)
            transitions.append(_moved(now, AlertState.PENDING, gone))
            continue
        since = alert.keep_firing_since_seconds
        since = now if since is None else since
        if keep_firing_for_seconds > 0 and now - since < keep_firing_for_seconds:
            out[fingerprint] = alert.keep_firing(since)
            continue
        done = alert.resolve(now)
        resolved.append(done)
        transitions.append(_moved(now, AlertState.FIRING, done))
    for fingerprint, alert in list(out.items()):
        assert alert.active_at_seconds is not None
        if alert.state is AlertState.PENDING and now - alert.active_at_seconds >= for_seconds:
            fired = alert.fire(now)
            out[fingerprint] = fired
            transitions.append(_moved(now, AlertState.PENDING, fired))
    return Step(out, resolved, transitions)
