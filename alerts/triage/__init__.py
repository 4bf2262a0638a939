"""Guided triage of an incident: measurements gathered from the store, the evidence table,
ranked causes, the slowest requests and the knob that fixes it."""

from alerts.triage.change_groups import ChangeGroup, group_changes, short_targets
from alerts.triage.change_hypotheses import CIRCUMSTANCES, change_hypotheses, footprint
from alerts.triage.data import (
    KnobChange,
    Measure,
    Measurements,
    SlowRequest,
    Source,
    TimeWindow,
    TriageInput,
    TriageInputError,
    WindowPair,
)
from alerts.triage.evidence import evidence_table, rows_by_key
from alerts.triage.explain import configured_evaluator, triage_at, triage_explainer
from alerts.triage.gather import KNOB_CHANGES_FAMILY, GatherOptions, gather, knob_changes
from alerts.triage.hypotheses import MECHANISMS, ramp
from alerts.triage.measure_scope import exact_quantile
from alerts.triage.rank import (
    NO_CAUSE,
    NOT_ENOUGH_DATA,
    SCORE_FLOOR,
    TriageReport,
    slowest_requests,
    triage,
)
from alerts.triage.report import (
    format_change,
    format_seconds,
    format_value,
    recent_change_text,
    render_text,
    triage_renderable,
)
from alerts.triage.windows import alert_triage_windows, onset_seconds

__all__ = [
    "CIRCUMSTANCES",
    "KNOB_CHANGES_FAMILY",
    "MECHANISMS",
    "NOT_ENOUGH_DATA",
    "NO_CAUSE",
    "SCORE_FLOOR",
    "ChangeGroup",
    "GatherOptions",
    "KnobChange",
    "Measure",
    "Measurements",
    "SlowRequest",
    "Source",
    "TimeWindow",
    "TriageInput",
    "TriageInputError",
    "TriageReport",
    "WindowPair",
    "alert_triage_windows",
    "change_hypotheses",
    "configured_evaluator",
    "evidence_table",
    "exact_quantile",
    "footprint",
    "format_change",
    "format_seconds",
    "format_value",
    "gather",
    "group_changes",
    "knob_changes",
    "onset_seconds",
    "ramp",
    "recent_change_text",
    "render_text",
    "rows_by_key",
    "short_targets",
    "slowest_requests",
    "triage",
    "triage_at",
    "triage_explainer",
    "triage_renderable",
]
