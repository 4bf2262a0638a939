"""SLOs proposed from a stored window: per model, a TTFT and an ITL latency objective from
the window's histograms (``slo.propose_latency_objective``), written as the ``slos:``
section that :mod:`collectors.config` parses (docs/slo.md, "Proposing SLOs").

:func:`propose_slos` reads through :class:`~collectors.store.protocols.MetricsReader` (the
SQL store or the Prometheus-backed reader alike); :func:`proposals_yaml` renders the result
with a comment per SLO giving what the window showed. ``tailwatch slo propose`` prints it;
``tailwatch up`` writes it into the configuration it generates when none has SLOs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import yaml

from collectors import canonical as c
from collectors.store.protocols import MetricsReader
from collectors.store.records import SemanticsMismatchError
from slo import (
    DEFAULT_PROPOSAL_MARGIN,
    MIN_PROPOSAL_OBSERVATIONS,
    PROPOSAL_TARGETS,
    LatencyMetric,
    LatencyProposal,
    LayoutMismatchError,
    NoProposal,
    Shortfall,
    propose_latency_objective,
)
from slo.window import format_utc

#: The latencies proposed, and the canonical histogram each is read from.
PROPOSED_FAMILIES = ((LatencyMetric.TTFT, c.TTFT_SECONDS), (LatencyMetric.ITL, c.ITL_SECONDS))
#: The period a proposed SLO is written with (the init template's, a 4-week cycle).
PROPOSED_PERIOD_DAYS = 28
_NOT_IN_NAME = re.compile(r"[^A-Za-z0-9_.:-]+")


class ProposalError(ValueError):
    """Nothing to propose from: no latency series, an unknown model, an empty window."""


@dataclass(frozen=True)
class IndicatorProposal:
    """One model's latency: the proposed objective (``proposal``), or why none
    (``reason``). ``is_short_of_data`` when only too few observations stopped it, so a
    longer window may give one."""

    name: str
    model: str | None
    metric: LatencyMetric
    proposal: LatencyProposal | None
    reason: str
    num_observations: float
    is_short_of_data: bool

    def slo_item(self) -> dict[str, Any]:
        """The ``slos:`` entry (the mapping ``slo.parse_slo`` validates); proposed only."""
        if self.proposal is None:
            raise ValueError(f"{self.name}: no proposal ({self.reason})")
        item: dict[str, Any] = {"name": self.name}
        if self.model is not None:
            item["selector"] = {c.LABEL_MODEL: self.model}
        latency = {
            "metric": self.metric.value,
            "threshold_seconds": self.proposal.threshold_seconds,
        }
        item["indicator"] = {"latency": latency}
        item["target"] = self.proposal.target
        item["period_days"] = PROPOSED_PERIOD_DAYS
        return item

    def summary(self) -> str:
        """``tiny-ttft (ttft <= 0.25 s, target 0.99)``, or the name and why not."""
        if self.proposal is None:
            return f"{self.name}: none ({self.reason})"
        p = self.proposal
        return (
            f"{self.name} ({self.metric.value} <= {p.threshold_seconds:g} s, target {p.target:g})"
        )


@dataclass(frozen=True)
class ProposalReport:
    """The proposals over ``[start, end]`` (Unix seconds) with ``margin``."""

    start: float
    end: float
    margin: float
    indicators: tuple[IndicatorProposal, ...]

    @property
    def proposed(self) -> tuple[IndicatorProposal, ...]:
        return tuple(i for i in self.indicators if i.proposal is not None)

    def slo_items(self) -> list[dict[str, Any]]:
        return [i.slo_item() for i in self.proposed]


def latency_models(reader: MetricsReader) -> list[str]:
    """The models named by the stored TTFT and ITL series, sorted."""
    found: set[str] = set()
    for _, family in PROPOSED_FAMILIES:
        for info in reader.series(family):
            model = dict(info.labels).get(c.LABEL_MODEL)
            if model:
                found.add(model)
    return sorted(found)


def propose_slos(
    reader: MetricsReader,
    start: float,
    end: float,
    *,
    model: str | None = None,
    margin: float = DEFAULT_PROPOSAL_MARGIN,
    min_observations: float = MIN_PROPOSAL_OBSERVATIONS,
) -> ProposalReport:
    """A TTFT and an ITL objective per model (or ``model`` only) from the window
    ``[start, end]`` (Unix seconds, ``end > start``), each histogram summed over the
    model's targets as its burn-rate rule will read it.

    Raises :class:`ProposalError` when the store holds no TTFT or ITL series, ``model`` is
    not among the stored ones (the message lists them), or the window holds no observation
    at all; ``margin`` outside [0, 1) is an ``slo.SLOError``. An indicator that cannot be
    proposed (too few observations, p99 in ``+Inf``, series whose bucket layouts differ) is
    in the report with its reason.
    """
    if not end > start:
        raise ProposalError(f"the window must end after it starts, got [{start!r}, {end!r}]")
    models = latency_models(reader)
    has_series = any(reader.series(family) for _, family in PROPOSED_FAMILIES)
    if not has_series:
        raise ProposalError(
            "the store holds no ttft_seconds or itl_seconds series: nothing has been scraped "
            "from an engine yet (tailwatch collect, or tailwatch up)"
        )
    if model is not None and model not in models:
        known = ", ".join(models) if models else "none (the series have no model label)"
        raise ProposalError(f"no latency series for model {model!r}; models in the store: {known}")
    # NOTE: series without a model label (a dialect that has none) are proposed fleet-wide,
    # with no selector, only when no series names a model: otherwise the selector-less SLO
    # would also count every named model's requests.
    chosen: list[str | None] = [model] if model is not None else (list(models) or [None])
    indicators: list[IndicatorProposal] = []
    names: set[str] = set()
    for one in chosen:
        for metric, family in PROPOSED_FAMILIES:
            name = _unique(_slo_name(one, metric), names)
            indicators.append(
                _indicator(reader, family, one, metric, name, start, end, margin, min_observations)
            )
    # NOTE: not when series could not be added up (their reason says so), only when empty.
    if all(i.is_short_of_data and i.num_observations == 0 for i in indicators):
        raise ProposalError(
            f"no TTFT or ITL observations from {format_utc(start)} to {format_utc(end)}"
            f"{f' for model {model!r}' if model else ''}: pick a window with traffic"
        )
    return ProposalReport(start, end, margin, tuple(indicators))


def _indicator(
    reader: MetricsReader,
    family: str,
    model: str | None,
    metric: LatencyMetric,
    name: str,
    start: float,
    end: float,
    margin: float,
    min_observations: float,
) -> IndicatorProposal:
    selector = None if model is None else {c.LABEL_MODEL: model}
    try:
        histogram = reader.histogram_window(family, selector, start, end)
    except (LayoutMismatchError, SemanticsMismatchError) as error:
        # NOTE: one model's series that cannot be added up; the other models still get theirs.
        return IndicatorProposal(name, model, metric, None, str(error), 0.0, False)
    if histogram is None:
        reason = "no series with two scrapes in the window"
        return IndicatorProposal(name, model, metric, None, reason, 0.0, True)
    result = propose_latency_objective(histogram, margin=margin, min_observations=min_observations)
    if isinstance(result, NoProposal):
        short = result.shortfall is Shortfall.TOO_FEW_OBSERVATIONS
        return IndicatorProposal(
            name, model, metric, None, result.reason, result.num_observations, short
        )
    return IndicatorProposal(name, model, metric, result, "", result.num_observations, False)


def _slo_name(model: str | None, metric: LatencyMetric) -> str:
    """``<model>-ttft``, the model's characters outside an SLO name's replaced by ``-``."""
    if model is None:
        return metric.value
    safe = _NOT_IN_NAME.sub("-", model).lstrip("_.:-") or "model"
    return f"{safe}-{metric.value}"


def _unique(name: str, taken: set[str]) -> str:
    candidate, number = name, 2
    while candidate in taken:
        candidate, number = f"{name}-{number}", number + 1
    taken.add(candidate)
    return candidate


def proposals_yaml(report: ProposalReport) -> str:
    """The report as a ``slos:`` section: a header naming the window and the rule, then per
    indicator a comment with its attainment over the window and observation count, and the
    SLO itself (or, with no proposal, a comment saying why). Loads with
    :func:`tailwatch.config.parse_config` as it is."""
    targets = ", ".join(f"{t:g}" for t in PROPOSAL_TARGETS)
    lines = [
        f"# Proposed by `tailwatch slo propose` from {format_utc(report.start)} to",
        f"# {format_utc(report.end)} ({report.end - report.start:.0f} s): review them before "
        "they page anyone.",
        "# Threshold: the bucket edge at or above the window's p99. Target: the highest of",
        f"# {targets} at or below the 95% lower bound of the attainment there,",
        f'# minus {report.margin:g} (docs/slo.md, "Proposing SLOs").',
    ]
    items = report.slo_items()
    lines.append("slos:" if items else "slos: []")
    for indicator in report.indicators:
        if indicator.proposal is None:
            lines.append(_comment(f"{indicator.name}: no proposal: {indicator.reason}"))
            continue
        p = indicator.proposal
        lines.append(
            _comment(
                f"{indicator.name}: {p.attainment:.2%} of {p.num_observations:,.0f} observations "
                f"at or below {p.threshold_seconds:g} s in the window (95% lower bound "
                f"{p.attainment_lower_bound:.2%}; p{p.quantile * 100:g} {p.quantile_seconds:.3g} s)"
            )
        )
        body = yaml.safe_dump([indicator.slo_item()], sort_keys=False, default_flow_style=None)
        lines += [f"  {line}" for line in body.splitlines()]
    return "\n".join(lines) + "\n"


def _comment(text: str) -> str:
    # NOTE: a reason may quote a label value; a line break in it would end the comment.
    return "  # " + " ".join(text.split())
