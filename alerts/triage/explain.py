"""Triage of an alert at a moment, and the :data:`alerts.grouping.Explainer` the evaluator
groups incidents with: the cause triage ranks first (when one stands out) and its scope.

``triage_at`` is what ``tailwatch incident show`` computes for an incident, over the
incident window as the store held it at ``end``: from the start of the data that made the
alert's condition hold (``alerts.triage.windows``) against the baseline before it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from alerts.grouping import FLEET, Explainer, Explanation
from alerts.model import Alert
from alerts.rules.base import Rule
from alerts.sql import alert_state_of
from alerts.state import AlertStateStore
from alerts.triage.gather import gather
from alerts.triage.rank import TriageReport, triage
from alerts.triage.windows import alert_triage_windows
from collectors.changes import ChangeDetector, DetectorOptions
from collectors.replica_targets import replica_targets
from collectors.store.protocols import ChangeReader, MetricsReader, RequestReader

if TYPE_CHECKING:
    from alerts.evaluator import Evaluator
    from alerts.rules.config import AlertsConfig
    from collectors.store import Store

#: Called with each alert triaged, the time, and the report (a drill keeps them).
OnTriage = Callable[[Alert, float, TriageReport], None]


def triage_at(
    metrics: MetricsReader,
    requests: RequestReader | None,
    state: AlertStateStore,
    alert: Alert,
    end: float,
    rules: Sequence[Rule],
    window_scale: float = 1.0,
    changes: ChangeReader | None = None,
) -> TriageReport:
    """Triage of ``alert`` from when its condition first held to ``end`` (Unix seconds),
    reaching back over the window of the rule in ``rules`` (as evaluated: scaled) that
    raises it; the windows' floors are times ``window_scale``, as the rules' windows are.
    ``changes``: where the change events are (the store's; ``None``: none are read)."""
    start = alert.active_at_seconds if alert.active_at_seconds is not None else end
    incident, baseline = alert_triage_windows(
        alert, start, max(end, start + 1e-3), rules, scale=window_scale, state=state
    )
    mapping = replica_targets(metrics).unique()
    data = gather(metrics, requests, incident, baseline, replica_targets=mapping, changes=changes)
    return triage(data)


def triage_explainer(
    metrics: MetricsReader,
    requests: RequestReader | None,
    state: AlertStateStore,
    rules: Sequence[Rule],
    window_scale: float = 1.0,
    on_triage: OnTriage | None = None,
    changes: ChangeReader | None = None,
) -> Explainer:
    """The evaluator's ``explain``: triage at the moment an alert fires; its top cause and
    scope when one stands out, else an empty cause (the alert opens its own incident)."""
    chosen = tuple(rules)

    def explain(alert: Alert, now: float) -> Explanation:
        report = triage_at(metrics, requests, state, alert, now, chosen, window_scale, changes)
        if on_triage is not None:
            on_triage(alert, now, report)
        top = report.top
        if top is None:
            return Explanation("", FLEET)
        return Explanation(top.cause.value, top.scope)

    return explain


def configured_evaluator(
    config: AlertsConfig, store: Store, metrics: MetricsReader | None = None
) -> Evaluator:
    """The evaluator of ``tailwatch.yaml``'s ``alerts:``: the configured rules and notifiers,
    the change detector before each evaluation (``collectors.changes``, its windows scaled as
    the rules'), and triage when an alert fires, so alerts of one cause open one incident
    (``tailwatch collect`` and ``tailwatch alerts run`` both run this one). Rules, triage and
    the detector read metrics from ``metrics`` (a push-down Prometheus reader; default:
    ``store``'s own); the alert state, the change events and the request records are always
    ``store``'s."""
    from alerts.evaluator import Evaluator

    reader = store if metrics is None else metrics
    detector = ChangeDetector(
        reader, store, store, options=DetectorOptions().scaled(config.window_scale)
    )
    return Evaluator(
        config.rules,
        reader,
        alert_state_of(store),
        notifiers=[n.build() for n in config.notifiers],
        explain=triage_explainer(
            reader,
            store,
            alert_state_of(store),
            config.rules,
            config.window_scale,
            changes=store,
        ),
        watchers=[detector.detect],
    )
