"""A triage report as a rich renderable (what ``tailwatch incident show`` prints) or plain text.

Pure: ``triage_renderable(report)`` builds rich tables and returns them; ``render_text`` prints
them into a string (no colour), which is what the tests and docs compare. Unknown values read
"not enough data", never NaN.
"""

from __future__ import annotations

import io
import math

from rich.console import Console, Group, RenderableType
from rich.table import Table
from rich.text import Text

from alerts.triage.change_hypotheses import is_action
from alerts.triage.data import SlowRequest
from alerts.triage.evidence import ChangeKind, EvidenceKey, EvidenceRow
from alerts.triage.hypotheses import Hypothesis, Reason
from alerts.triage.rank import NO_CAUSE, NOT_ENOUGH_DATA, SCORE_FLOOR, TriageReport
from alerts.vocabulary import Action

K = EvidenceKey
_SECONDS = {K.TTFT_MEAN, K.QUEUE_MEAN, K.PREFILL_MEAN, K.TTFT_P95, K.ITL_P99}
_SECONDS |= {K.CLIENT_TTFT_P95, K.CLIENT_GAP}
_TOKENS = {K.PROMPT_P95, K.OUTPUT_MEAN}
UNKNOWN = "not enough data"


def _known(x: float) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def format_seconds(x: float) -> str:
    if not _known(x):
        return "—"
    return f"{x * 1000:.1f} ms" if abs(x) < 1 else f"{x:.2f} s"


def format_value(key: EvidenceKey, x: float) -> str:
    """A row's value in its unit: seconds as ms or s, tokens whole, the rest to 3 digits."""
    if not _known(x):
        return "—"
    if key in _SECONDS:
        return format_seconds(x)
    if key in _TOKENS:
        return f"{x:.0f}"
    if key is K.ARRIVAL_RATE:
        return f"{x:.2f}/s"
    if key in (K.E2E_P50_SKEW, K.E2E_MEAN_SKEW, K.ITL_MEAN_SKEW):
        return f"{x:.2f}×"
    return f"{x:.3g}"


def format_change(row: EvidenceRow) -> str:
    if not _known(row.change):
        return "—"
    if row.change_kind is ChangeKind.RATIO:
        return f"×{row.change:.2f}"
    return f"{row.change:+.3g}"


def _cells(*texts: str) -> list[Text]:
    """Cells as literal text: a scope like ``[r1]`` or a label value is never rich markup."""
    return [Text(t) for t in texts]


def _evidence_table(rows: tuple[EvidenceRow, ...]) -> Table:
    table = Table(title="Evidence: incident window against baseline", title_justify="left")
    for name in ("signal", "scope", "incident", "baseline", "change", "source"):
        table.add_column(name, no_wrap=name not in ("signal", "source"), min_width=8)
    for row in rows:
        incident = format_value(row.key, row.incident) if row.is_known else UNKNOWN
        source = row.source.value + (f" ({row.note})" if row.note else "")
        table.add_row(
            *_cells(
                row.what,
                row.scope,
                incident,
                format_value(row.key, row.baseline),
                format_change(row),
                source,
            )
        )
    return table


def _reason_text(reason: Reason) -> str:
    side = {"change": "change", "incident": "value", "baseline": "baseline"}[reason.uses]
    if not _known(reason.value):
        return f"{reason.what.strip()} {side}: {UNKNOWN}"
    optional = "" if reason.is_required else ", optional"
    return (
        f"{reason.what.strip()} [{reason.scope}] {side} {reason.value:.3g} "
        f"(ramp {reason.lo:g}..{reason.hi:g} → {reason.sub_score:.2f}{optional})"
    )


def _hypothesis_table(hypotheses: tuple[Hypothesis, ...]) -> Table:
    table = Table(title="Hypotheses, most likely first", title_justify="left")
    for name in ("#", "cause", "score", "scope", "numbers behind it"):
        table.add_column(name, no_wrap=name != "numbers behind it")
    for rank, h in enumerate(hypotheses, 1):
        numbers = "\n".join(_reason_text(r) for r in h.reasons)
        if h.note and (h.has_enough_data or h.change is not None):
            numbers = f"{h.note}\n{numbers}"
        table.add_row(*_cells(str(rank), h.cause.value, f"{h.score:.2f}", h.scope, numbers))
    return table


def _slow_table(requests: tuple[SlowRequest, ...]) -> Table:
    table = Table(title="Slowest requests", title_justify="left")
    # NOTE: the trace id is the link to the trace: never cut, whatever the width.
    table.add_column("trace id", no_wrap=True, min_width=32)
    for name in ("request id", "target", "e2e", "TTFT", "queue", "prefill", "from"):
        table.add_column(name, overflow="fold")
    for r in requests:
        table.add_row(
            *_cells(
                r.trace_id,
                r.request_id or "—",
                r.target or "—",
                format_seconds(r.e2e_seconds),
                format_seconds(r.ttft_seconds),
                format_seconds(r.queue_seconds),
                format_seconds(r.prefill_seconds),
                ", ".join(sorted(s.value for s in r.sources)) or "—",
            )
        )
    return table


def _recommendation(report: TriageReport) -> Text:
    rec = report.recommendation
    if rec is None:
        why = {
            NO_CAUSE: "no cause stands out: every hypothesis scores below the floor",
            NOT_ENOUGH_DATA: "not enough data in the incident window to rank causes",
        }
        return Text(f"Recommendation: none ({why.get(report.verdict, report.verdict)})")
    action = rec.action
    knob = _knob_text(action)
    where = f" on {rec.target}" if rec.target else ""
    what = f": {rec.change.describe()}" if rec.change is not None else ""
    lines = [f"Recommendation ({rec.cause.value}): {action.summary}{where}{what} [{knob}]"]
    lines.append(f"  why: {action.why}")
    # NOTE: an alternative may have no knob either (a pool of its own): "[None None]" before
    lines += [f"  or: {a.summary} [{_knob_text(a)}]" for a in rec.alternatives]
    lines += [f"  recent change: {recent_change_text(h)}" for h in rec.recent_changes]
    return Text("\n".join(lines))


def _knob_text(action: Action) -> str:
    if action.knob and action.direction:
        return f"{action.direction.value} {action.knob}"
    return "no engine knob"


def recent_change_text(hypothesis: Hypothesis) -> str:
    """A change beside the recommendation: what someone did that explains the incident
    (its score at the floor or above) is worth reverting first; the rest is context, with
    its score."""
    group = hypothesis.change
    assert group is not None, "a change hypothesis carries its group"
    if is_action(hypothesis) and hypothesis.score >= SCORE_FLOOR:
        return f"{group.describe()} — consider reverting it first"
    return f"{group.describe()} (score {hypothesis.score:.2f})"


def triage_renderable(report: TriageReport) -> RenderableType:
    """The whole report: verdict, evidence, hypotheses, slowest requests, recommendation."""
    top = report.top
    verdict = report.verdict
    if top is not None and top.change is not None:
        verdict = f"{verdict} ({top.change.describe()})"
    parts: list[RenderableType] = [
        Text(f"Triage verdict: {verdict}", style="bold"),
        _evidence_table(report.evidence),
        _hypothesis_table(report.hypotheses),
    ]
    if report.slowest_requests:
        parts.append(_slow_table(report.slowest_requests))
    else:
        parts.append(Text("Slowest requests: none linked (no exemplars or request records)"))
    parts.append(_recommendation(report))
    return Group(*parts)


def render_text(report: TriageReport, width: int = 120) -> str:
    """The report as plain text, ``width`` columns wide."""
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None, force_terminal=False)
    console.print(triage_renderable(report))
    return buffer.getvalue()
