"""The pieces of synthetic promtool input: :class:`Case`, series and value notation, and a
builder that writes an engine's series with fixed labels (``alerts/export/promtool_cases.py`` uses
them per rule kind).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, fields

from alerts.export.exprs import LAYOUTS, PromRule, quote
from alerts.export.names import EngineNames
from alerts.rules.base import Rule
from collectors import canonical as c
from slo import histogram_quantile

INTERVAL_SECONDS = 60.0
REPLICA = "r1:8000"
MODEL = "m"
JOB = "vllm"
LE = "le"


class CaseError(ValueError):
    """The rule's thresholds admit no synthetic input (e.g. a threshold past the layout)."""


@dataclass
class Case:
    """Input series (``(series, values)`` in promtool's notation) that fire the alert, and
    clean ones; the evaluation time; the labels of every alert expected at that time; and
    ``(expr, eval seconds, series, value)`` checks of recording rules on the firing input."""

    firing: list[tuple[str, str]]
    clean: list[tuple[str, str]]
    eval_seconds: float
    expected: list[dict[str, str]]
    records: list[tuple[str, float, list[tuple[str, float]]]] = field(default_factory=list)
    #: Annotations per expected alert; empty: every one has the exported alert's.
    annotations: list[dict[str, str]] = field(default_factory=list)
    interval_seconds: float = INTERVAL_SECONDS


def series(metric: str, labels: dict[str, str]) -> str:
    inner = ",".join(f"{k}={quote(v)}" for k, v in sorted(labels.items()))
    return f"{metric}{{{inner}}}"


def counter(per_interval: float, samples: int) -> str:
    return f"0+{per_interval:g}x{samples}"


def gauge(value: float, samples: int) -> str:
    return f"{value:g}x{samples}"


def switched(before: float, k: int, after: float, samples: int) -> str:
    """A counter rising ``before`` per interval for ``k`` intervals, then ``after`` per
    interval: ``samples + 1`` values, as :func:`counter` writes."""
    if k >= samples:
        return counter(before, samples)
    return f"0+{before:g}x{k} {before * k + after:g}+{after:g}x{samples - k - 1}"


class Builder:
    def __init__(self, names: EngineNames, rule: Rule, model: str = MODEL) -> None:
        self.names, self.rule, self.model_value = names, rule, model
        self.model = names.label(c.LABEL_MODEL)
        self.instance = names.label(c.LABEL_TARGET)
        self.interval = interval_for(rule)
        self.per_tenant = False  # series of the per-tenant breakdown (a tenant SLO)
        self.extra: dict[str, str] = {}  # labels every series carries (its tenant)

    def labels(self, instance: str = REPLICA, **extra: str) -> dict[str, str]:
        return {
            "job": JOB,
            self.instance: instance,
            self.model: self.model_value,
            "engine": "0",
            **self.extra,
            **extra,
        }

    def metric(self, family: str, part: str = "") -> str:
        name = self.names.metric(family, part, per_tenant=self.per_tenant)
        assert name is not None, family
        return name

    def samples(self, eval_seconds: float) -> int:
        return round(eval_seconds / self.interval) + 2

    def at_interval(self, seconds: float) -> float:
        """``seconds`` rounded up to a whole number of intervals."""
        return math.ceil(seconds / self.interval - 1e-9) * self.interval

    def eval_after(self, *windows: float) -> float:
        """A whole number of intervals past every window and the ``for:``."""
        return self.at_interval(max(windows, default=0.0) + self.rule.for_seconds + 2 * self.interval)  # fmt: skip

    def expect(self, **series_labels: str) -> dict[str, str]:
        return {**series_labels, **self.rule.alert_labels()}

    def histogram(
        self,
        family: str,
        counts: dict[float, float],
        samples: int,
        instance: str = REPLICA,
        *,
        then: dict[float, float] | None = None,
        at: int = 0,
    ) -> list[tuple[str, str]]:
        """Bucket series of ``family``'s layout: ``counts`` maps an edge to the observations
        per interval in that bucket (not cumulative); with ``then``, those per interval from
        interval ``at`` on."""
        edges = (*LAYOUTS[family], math.inf)
        out, before, after = [], 0.0, 0.0
        for edge in edges:
            before += counts.get(edge, 0.0)
            after += (counts if then is None else then).get(edge, 0.0)
            le = "+Inf" if edge == math.inf else go_float(edge)
            labels = self.labels(instance, **{LE: le})
            values = switched(before, at, after, samples) if then else counter(before, samples)
            out.append((series(self.metric(family, "_bucket"), labels), values))
        values = switched(before, at, after, samples) if then else counter(before, samples)
        out.append((series(self.metric(family, "_count"), self.labels(instance)), values))
        return out


def go_float(value: float) -> str:
    from prometheus_client.utils import floatToGoString

    return floatToGoString(value)


def interval_for(rule: Rule) -> float:
    """The sample spacing for a rule's input: a fifth of its shortest window (so every range
    holds at least five samples), at most a minute, in whole seconds, so that every rate is
    an exact quotient of integers. A window under 5 s gets no synthetic input."""
    windows = [getattr(rule, f.name) for f in fields(rule) if f.name.endswith("window_seconds")]
    lengths = getattr(rule, "window_lengths_seconds", None)
    if lengths is not None:
        windows += list(lengths())
    shortest = min(windows, default=5 * INTERVAL_SECONDS)
    if shortest < 5:
        raise CaseError(
            f"rule {rule.name!r}: a {shortest:g} s window is too short for whole-second samples"
        )
    return float(min(INTERVAL_SECONDS, math.floor(shortest / 5)))


def expected_quantile(
    q: float, family: str, counts: dict[float, float], interval_seconds: float
) -> float:
    """The value histogram_quantile gives for per-interval bucket counts (rates per second)."""
    running, buckets = 0.0, []
    for edge in (*LAYOUTS[family], math.inf):
        running += counts.get(edge, 0.0)
        buckets.append((edge, running / interval_seconds))
    return histogram_quantile(q, buckets).value


def edge_above(family: str, seconds: float, skip: int = 0) -> float:
    edges = [e for e in LAYOUTS[family] if e > seconds]
    if len(edges) <= skip:
        raise CaseError(f"no bucket edge of {family} above {seconds:g} s")
    return edges[skip]


def alert_records(alert: PromRule) -> list[str]:
    """The ``tailwatch:`` recording rules an alert expression reads, in order of appearance."""
    return list(dict.fromkeys(re.findall(r"tailwatch:[A-Za-z0-9_:]+", alert.expr)))
