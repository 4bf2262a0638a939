"""The evaluator: the rules over a :class:`MetricsReader` on an injectable clock, the alert
lifecycle of Prometheus (``alerts/lifecycle.py``), state and silences through an
:class:`~alerts.state.AlertStateStore`, inhibition, and the notification step
(``alerts/notify/dispatch.py``).

Each :meth:`Evaluator.evaluate_once`:

0. runs the ``watchers`` with its time (the change detector, ``collectors.changes``: what
   changed is recorded before the rules read, so an alert triaged at this tick sees it); one
   that fails is logged and the evaluation goes on;
1. reads the silences (before anything changes: a store that cannot answer fails the cycle
   with nothing half done);
2. evaluates every rule at ``now`` (``alerts/rules/evaluate.py``); a rule whose evaluation fails
   (a bucket layout change inside its window, series that cannot be merged, …) is recorded as
   an :class:`EvaluationError`, logged, and keeps its alerts as they were (Prometheus keeps an
   alerting rule's state when its query fails); the other rules go on;
3. steps each rule's alerts: pending → firing after ``for:``, firing → resolved when the
   condition clears (after ``keep_firing_for:``), a pending alert whose condition clears
   dropped;
4. marks the silenced alerts (an active silence mutes notification; the alert still exists)
   and the inhibited ones (a firing page inhibits the ticket for the same SLO);
5. explains every alert that began firing (``explain``: triage over what is stored by then)
   and groups it with the firing alerts of the same cause (``alerts/grouping.py``: one
   cause, one incident); a firing alert triage could not explain yet is explained again;
6. saves the active alerts, the transitions (which open and close incidents) and the rules'
   errors in one ``state.save_evaluation``; only then does the evaluator's own state move
   on, so a failed save is retried from the old state;
7. dispatches to the notifiers (never failing the cycle), whose memory of what each has had
   is kept in the state store, so a restart does not send every firing alert again.

:meth:`Evaluator.run` calls it at each slot of a fixed grid, stamped with the slot rather
than the time it woke (``alerts/schedule.py``), as Prometheus's rule group does.

A restarted evaluator resumes from ``state.active_alerts()``: a pending alert keeps its
``active_at``, so its ``for:`` continues rather than restarts.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace

from alerts.conventions import ALERTNAME
from alerts.grouping import Explainer, Explanation, group_fired
from alerts.inhibition import DEFAULT_INHIBIT_RULES, InhibitRule, inhibited_alerts
from alerts.kept_steps import KeptSteps, kept_steps
from alerts.kinds import evaluate_rule
from alerts.labels import LabelSet, fingerprint_hex
from alerts.lifecycle import step
from alerts.model import Alert, AlertState
from alerts.notify.dispatch import Dispatcher, DispatchOutcome
from alerts.notify.notifiers import Notifier
from alerts.rule_errors import EvaluationError
from alerts.rules.base import Rule
from alerts.rules.read import Instance
from alerts.schedule import run_ticks
from alerts.silences import silenced_alerts
from alerts.state import AlertStateStore
from alerts.transitions import Transition
from collectors.store.protocols import MetricsReader
from collectors.store.records import SemanticsMismatchError
from collectors.store.window_semantics import LayoutChangeError
from slo import LayoutMismatchError
from slo.window import format_utc

LOG = logging.getLogger(__name__)
#: Alert label sets the evaluator keeps between cycles (:meth:`Evaluator._alert_labels`).
LABEL_SETS_KEPT = 100_000


class ClockWentBackError(ValueError):
    """The evaluation time is before the times of the alert state it would move on from."""


@dataclass(frozen=True)
class EvaluationResult:
    """One evaluation: every alert (pending and firing after it, and those resolved by it),
    the transitions, the rules that failed, and which alerts are muted: ``silenced``
    (fingerprint → silence ids) and ``inhibited`` (fingerprint → the inhibiting alert's)."""

    at_seconds: float
    alerts: tuple[Alert, ...]
    transitions: tuple[Transition, ...]
    errors: tuple[EvaluationError, ...]
    silenced: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    inhibited: Mapping[str, str] = field(default_factory=dict)
    notifications: tuple[DispatchOutcome, ...] = ()

    def by_state(self, state: AlertState) -> tuple[Alert, ...]:
        return tuple(a for a in self.alerts if a.state is state)

    @property
    def firing(self) -> tuple[Alert, ...]:
        return self.by_state(AlertState.FIRING)

    @property
    def pending(self) -> tuple[Alert, ...]:
        return self.by_state(AlertState.PENDING)

    @property
    def resolved(self) -> tuple[Alert, ...]:
        return self.by_state(AlertState.RESOLVED)

    def is_muted(self, fingerprint: str) -> bool:
        return fingerprint in self.silenced or fingerprint in self.inhibited


def _describe(rule: Rule, error: Exception) -> str:
    if isinstance(error, LayoutChangeError):
        why = "a series' bucket layout changed inside the rule's window"
    elif isinstance(error, LayoutMismatchError):
        why = "the selected series have different bucket layouts"
    elif isinstance(error, SemanticsMismatchError):
        why = "the selected series mean different things and cannot be merged"
    else:
        why = "evaluation failed"
    return f"rule {rule.name!r} ({rule.kind}): {why}: {error}"


def rule_of(alert: Alert, rules: Iterable[Rule]) -> Rule | None:
    """The rule whose alerts carry ``alert``'s name and every label the rule sets."""
    for rule in rules:
        wanted = rule.alert_labels()
        if rule.alert == alert.name and all(alert.labels.get(k) == v for k, v in wanted.items()):
            return rule
    return None


class Evaluator:
    """Runs ``rules`` over ``reader``; see the module docstring. ``clock`` gives Unix seconds
    (tests step it); ``notifiers`` get the alerts after each evaluation.

    ``watchers``: called with each evaluation's time before the rules read (step 0).

    ``read_concurrency``: how many rules read at once (default: the reader's
    ``concurrent_reads``, else 1). A reader over a metrics server answers several queries at
    once, each on a core of its own, as Prometheus evaluates its rule groups; the alert state
    still moves rule by rule, in order, from what each rule read."""

    def __init__(
        self,
        rules: Iterable[Rule],
        reader: MetricsReader,
        state: AlertStateStore,
        clock: Callable[[], float] = time.time,
        inhibit_rules: Iterable[InhibitRule] = DEFAULT_INHIBIT_RULES,
        notifiers: Iterable[Notifier] = (),
        explain: Explainer | None = None,
        read_concurrency: int | None = None,
        watchers: Iterable[Callable[[float], object]] = (),
    ) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.watchers = tuple(watchers)
        concurrency = getattr(reader, "concurrent_reads", 1)
        self.read_concurrency = max(
            1, int(concurrency if read_concurrency is None else read_concurrency)
        )
        self.explain = explain
        #: The rules' reader; its step series keep their final steps across cycles
        #: (``alerts.kept_steps``).
        self.reader = kept_steps(reader)
        self.state = state
        self.clock = clock
        self.inhibit_rules = tuple(inhibit_rules)
        self.dispatcher = Dispatcher(notifiers, memory=state)
        self._active: dict[str, dict[str, Alert]] = {r.name: {} for r in self.rules}
        self._labelled: dict[tuple, tuple[LabelSet, str]] = {}
        #: Alerts restored from the store that no rule raises any more: resolved (firing) or
        #: dropped (pending) at the first evaluation.
        self._orphans: dict[str, Alert] = {}
        #: Grouped alerts that resolved while another alert was pending or unexplained: a
        #: pending one joins their incident if it fires with their cause
        #: (``alerts.grouping.group_fired``). In memory: a restart forgets them.
        self._ended: list[Alert] = []
        for alert in state.active_alerts():
            rule = rule_of(alert, self.rules)
            if rule is None:
                self._orphans[alert.fingerprint] = alert
            else:
                self._active[rule.name][alert.fingerprint] = alert

    def active_alerts(self) -> list[Alert]:
        return [a for alerts in self._active.values() for a in alerts.values()]

    def _latest_state_time(self) -> float:
        times = [
            t
            for alerts in (*self._active.values(), self._orphans)
            for a in alerts.values()
            for t in (a.active_at_seconds, a.started_at_seconds, a.keep_firing_since_seconds)
            if t is not None
        ]
        return max(times, default=-math.inf)

    def evaluate_once(self, now: float | None = None) -> EvaluationResult:
        """Evaluate every rule at ``now`` (default: the clock) and notify."""
        now = self.clock() if now is None else now
        if isinstance(now, bool) or not isinstance(now, int | float) or not math.isfinite(now):
            raise ValueError(f"now={now!r}: must be a finite Unix time in seconds")
        now = float(now)
        latest = self._latest_state_time()
        if now < latest:
            # NOTE: a clock stepped back (or --now before the stored state) would move alerts
            # back in time: refuse the cycle, keep the state; the next one on time goes on.
            raise ClockWentBackError(
                f"evaluation time {format_utc(now)} is before the stored alert state's latest "
                f"time {format_utc(latest)}; waiting for the clock to pass it"
            )
        if isinstance(self.reader, KeptSteps):
            self.reader.at(now)
        for watch in self.watchers:
            try:
                watch(now)
            except Exception:  # NOTE: what changed is evidence; the rules still run without it
                LOG.exception("watcher %r failed at %s", watch, format_utc(now))
        silences = self.state.silences()
        new_active: dict[str, dict[str, Alert]] = {}
        resolved: list[Alert] = []
        transitions: list[Transition] = []
        errors: list[EvaluationError] = []
        claimed: dict[str, str] = {}  # fingerprint → the rule raising it
        for rule, read in zip(self.rules, self._read(now), strict=True):
            previous = self._active[rule.name]
            try:
                holding = self._holding(rule, read, claimed)
            except Exception as error:  # NOTE: one broken rule must not stop the others
                message = _describe(rule, error)
                LOG.error("%s", message)
                errors.append(EvaluationError(rule.name, now, type(error).__name__, message))
                new_active[rule.name] = previous
                claimed.update(dict.fromkeys(previous, rule.name))
                continue
            moved = step(
                previous,
                holding,
                now,
                for_seconds=rule.for_seconds,
                keep_firing_for_seconds=rule.keep_firing_for_seconds,
                annotations=rule.annotations(),
            )
            new_active[rule.name] = moved.active
            claimed.update(dict.fromkeys(moved.active, rule.name))
            resolved.extend(moved.resolved)
            transitions.extend(moved.transitions)
        orphans = step(self._orphans, [], now, for_seconds=0.0, keep_firing_for_seconds=0.0)
        resolved.extend(orphans.resolved)
        transitions.extend(orphans.transitions)
        if self.explain is not None:
            transitions = self._grouped(new_active, transitions, resolved, now)
        active = [a for alerts in new_active.values() for a in alerts.values()]
        self.state.save_evaluation(active, transitions, errors, now)
        self._active, self._orphans = new_active, {}
        every = [*active, *resolved]
        silenced = silenced_alerts(every, silences, now)
        inhibited = inhibited_alerts(every, self.inhibit_rules)
        muted = {**silenced, **inhibited}
        notifications = self.dispatcher.dispatch(every, muted, now)
        return EvaluationResult(
            now, tuple(every), tuple(transitions), tuple(errors), silenced, inhibited, notifications
        )

    def _grouped(
        self,
        active: dict[str, dict[str, Alert]],
        transitions: list[Transition],
        resolved: list[Alert],
        now: float,
    ) -> list[Transition]:
        """``active`` (changed in place) and ``transitions`` with every alert that began
        firing explained and grouped (step 5 of the module docstring). A firing alert that
        triage could not explain yet (its evidence was thin when it fired) is explained
        again, and joins its cause's incident once the cause shows. An alert whose condition
        began while an incident's alert still fired joins that incident even if the other
        resolved while it was pending (a ticket on a tail's first edge, then the page its
        for: held back)."""
        fired = [t.alert for t in transitions if t.to_state is AlertState.FIRING]
        new = {a.fingerprint for a in fired}
        firing = [
            a for alerts in active.values() for a in alerts.values()
            if a.is_firing and a.fingerprint not in new
        ]  # fmt: skip
        unexplained = [a for a in firing if not a.cause]
        # NOTE: an ended alert matters while an alert that went pending before it ended may
        # still fire (pending, or firing unexplained); then never again
        earliest = min(
            (
                a.active_at_seconds
                for alerts in active.values()
                for a in alerts.values()
                if a.active_at_seconds is not None and (not a.is_firing or not a.cause)
            ),
            default=math.inf,
        )
        self._ended = [
            a
            for a in (*self._ended, *(r for r in resolved if r.cause))
            if a.ended_at_seconds is not None and a.ended_at_seconds >= earliest
        ]
        if not fired and not unexplained:
            return transitions
        explained = [a for a in firing if a.cause]
        grouped = {
            a.fingerprint: a
            for a in group_fired(
                [*fired, *unexplained], explained, self._explain, now, ended=self._ended
            )
        }
        for alerts in active.values():
            for fingerprint in alerts.keys() & grouped.keys():
                alerts[fingerprint] = grouped[fingerprint]
        return [
            replace(t, alert=grouped[t.fingerprint])
            if t.to_state is AlertState.FIRING and t.fingerprint in grouped
            else t
            for t in transitions
        ]

    def _explain(self, alert: Alert, now: float) -> Explanation | None:
        """``self.explain``, which must never fail the evaluation: an error is logged and the
        alert opens an incident of its own."""
        assert self.explain is not None
        try:
            return self.explain(alert, now)
        except Exception:  # NOTE: triage reads the store; a failed read must not stop the cycle
            LOG.exception("explaining %s failed; it opens an incident of its own", alert.name)
            return None

    def _read(self, now: float) -> list[list[Instance] | Exception]:
        """Each rule's instances at ``now``, or the error its read raised, read
        ``read_concurrency`` rules at a time."""

        def one(rule: Rule) -> list[Instance] | Exception:
            try:
                return evaluate_rule(rule, self.reader, now)
            except Exception as error:  # NOTE: raised where the rule's outcome is used
                return error

        if self.read_concurrency == 1 or len(self.rules) < 2:
            return [one(rule) for rule in self.rules]
        with ThreadPoolExecutor(self.read_concurrency, thread_name_prefix="rule-read") as pool:
            return list(pool.map(one, self.rules))

    def _holding(
        self, rule: Rule, read: list[Instance] | Exception, claimed: Mapping[str, str]
    ) -> list[tuple[LabelSet, float]]:
        """The label sets (and values) of ``rule``'s instances whose condition holds; a
        ``ValueError`` when two share a label set (Prometheus: "vector contains metrics with
        the same labelset after applying alert labels") or another rule raises the same."""
        holding = []
        seen: set[str] = set()
        if isinstance(read, Exception):
            raise read
        for instance in read:
            labels, fingerprint = self._alert_labels(rule, instance.labels)
            if fingerprint in seen:
                raise ValueError(f"two instances share the labels {labels!r}")
            other = claimed.get(fingerprint)
            if other is not None and other != rule.name:
                raise ValueError(f"rule {other!r} raises an alert with the same labels {labels!r}")
            seen.add(fingerprint)
            if instance.holds:
                holding.append((labels, instance.value))
        return holding

    def _alert_labels(self, rule: Rule, labels: Mapping[str, str]) -> tuple[LabelSet, str]:
        """The alert's label set of ``rule``'s instance with ``labels``, and its fingerprint;
        kept, since a cycle meets the same label sets as the last: at 500 replicas, about
        2,000 a cycle, whose validation and hashing took 0.10 s of a profiled cycle's CPU
        (0.005 s kept)."""
        key = (rule.name, rule.alert, tuple(labels.items()))
        known = self._labelled.get(key)
        if known is None:
            alert = LabelSet(
                {**labels, **rule.alert_labels(), ALERTNAME: rule.alert}, field="labels"
            )
            known = (alert, fingerprint_hex(alert.fingerprint()))
            if len(self._labelled) >= LABEL_SETS_KEPT:
                self._labelled.clear()
            self._labelled[key] = known
        return known

    def run(
        self,
        stop: threading.Event,
        interval_seconds: float,
        wait: Callable[[float], object] | None = None,
        start_seconds: float | None = None,
    ) -> int:
        """Evaluate at ``start + n × interval_seconds`` (``start`` defaults to the clock now)
        until ``stop`` is set; return the number of evaluations. Each is stamped with its
        scheduled slot, not the time the loop woke for it, so ``for:`` counts whole intervals
        (``alerts/schedule.py``: missed slots are skipped, none is ever after the clock).
        ``wait(seconds)`` sleeps (default ``stop.wait``: a set event ends the wait). A failed
        evaluation (the state store unreachable, say) is logged and the loop goes on."""
        return run_ticks(
            self.evaluate_once, stop, interval_seconds, self.clock, wait, start_seconds
        )
