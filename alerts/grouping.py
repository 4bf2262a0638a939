"""One cause, one page: alerts that triage explains by the same cause, in the same scope and
at the same time, belong to one incident.

When an alert fires, :class:`Explainer` (triage over what is stored by then) says which
cause it comes from and where (the fleet, or the replica it points at). The first firing
alert of a cause in a fleet (the ``model`` its rules group by) opens an incident; an alert
that fires while that one is still firing, or whose condition began while it still fired
(pending then, its ``for:`` outlasting the other's resolution), explained by the same cause
in the same fleet, joins it as a symptom: its ``incident_group`` is the opener's
fingerprint. The replica a
cause points at is kept (``cause_scope``) but does not split an incident: two replicas
slowed or squeezed at once are one thing to handle (a generated incident slowing two of
five replicas opened two incidents when it did). An alert triage cannot explain ("no cause
stands out", "not enough data") opens its own, and the evaluator explains it again at each
evaluation while it fires: one that fired on the first 1 % of a tail, before the evidence
showed its cause, joins its cause's incident once it does. Notifiers
group by the incident (one webhook group per incident, as Alertmanager's ``group_by``
groups), so the on-call engineer is paged once for one cause and sees the rest as its
symptoms. Pure: alerts in, alerts out.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from alerts.model import Alert

FLEET = "fleet"


@dataclass(frozen=True)
class Explanation:
    """Triage's conclusion for one alert: its cause (empty: none stood out) and scope."""

    cause: str
    scope: str = FLEET


#: What explains a firing alert at a time (Unix seconds); ``None``: it cannot say.
Explainer = Callable[[Alert, float], Explanation | None]


#: The label that names a fleet (the rules group by it).
FLEET_LABEL = "model"


def _same_fleet(a: Alert, b: Alert) -> bool:
    """Whether two alerts are of one fleet: their ``model`` labels agree where both have one
    (an alert of every model, such as ``target-down``, is of each)."""
    ma, mb = a.labels.get(FLEET_LABEL), b.labels.get(FLEET_LABEL)
    return ma is None or mb is None or ma == mb


def _overlaps(member: Alert, alert: Alert) -> bool:
    """Whether ``member`` still fired when ``alert``'s condition began: it has not ended, or
    it ended at or after ``alert`` went pending."""
    if member.ended_at_seconds is None or alert.active_at_seconds is None:
        return True
    return member.ended_at_seconds >= alert.active_at_seconds


def group_fired(
    fired: Sequence[Alert],
    firing: Iterable[Alert],
    explain: Explainer,
    now: float,
    ended: Iterable[Alert] = (),
) -> list[Alert]:
    """``fired`` (alerts that began firing at ``now``, in order) each with its explanation
    and incident group, joining an incident of ``firing`` (alerts already firing, grouped
    before), of ``ended`` (grouped alerts that resolved while the new one was pending: its
    condition began while they still fired) or one opened by an earlier alert of
    ``fired``."""
    open_groups = [a for a in (*firing, *ended) if a.cause]
    out = []
    for alert in fired:
        explanation = explain(alert, now)
        if explanation is None or not explanation.cause:
            out.append(alert.explained("", "", alert.fingerprint))
            continue
        opener = next(
            (
                a
                for a in open_groups
                if a.cause == explanation.cause and _same_fleet(a, alert) and _overlaps(a, alert)
            ),
            None,
        )
        group = alert.fingerprint if opener is None else opener.group
        explained = alert.explained(explanation.cause, explanation.scope, group)
        out.append(explained)
        open_groups.append(explained)
    return out


def symptoms_of(opener: Alert, alerts: Iterable[Alert]) -> list[Alert]:
    """The alerts that joined ``opener``'s incident (not ``opener`` itself)."""
    return [
        a
        for a in alerts
        if a.incident_group == opener.fingerprint and a.fingerprint != opener.fingerprint
    ]
