"""Evaluates parsed expressions of Prometheus's histogram scripts with ``slo``'s functions.

Only PromQL plumbing lives here (label matching, grouping by label values); every number comes
from ``slo``: instant lookups (``latest_at``), ``rate``/``increase``
(``extrapolated_rate``/``extrapolated_increase``), ``sum``/``avg by (le, ...)``
(``ClassicHistogram.from_buckets`` + ``merge_histograms``), ``histogram_quantile``,
``histogram_quantiles`` and ``histogram_fraction`` (``group_bucket_samples`` +
``histogram_quantile``/``histogram_fraction``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

from slo_promql_parse import Aggregation, Call, Num, Selector, Str, parse_expression
from slo_promtest_script import EvalCase, Labels, NotMapped, Series

import slo
from slo import RangeSemantics

Vector = list[tuple[dict[str, str], float]]
_NATIVE_ONLY = {
    "histogram_count",
    "histogram_sum",
    "histogram_avg",
    "histogram_stddev",
    "histogram_stdvar",
}
ALMOST_EQUAL_EPSILON = 1e-6  # promqltest's defaultEpsilon


class EvaluationError(Exception):
    """PromQL would fail the query (``expect fail`` / ``eval_fail``)."""


@dataclass
class Evaluator:
    storage: tuple[Series, ...]
    at_seconds: float
    semantics: RangeSemantics
    small_delta_tolerance: float
    has_warning: bool = False
    has_info: bool = False

    def vector(self, node: object) -> Vector:
        if isinstance(node, Selector):
            if node.range_seconds is not None:
                raise NotMapped("range vector at the top level")
            out = []
            for series in self.select(node):
                value = slo.latest_at(series.samples, self.at_seconds, semantics=self.semantics)
                if value is not None:
                    out.append((series.label_dict, value))
            return out
        if isinstance(node, Aggregation):
            return self.aggregate(node)
        if isinstance(node, Call):
            return self.call(node)
        raise NotMapped(f"{type(node).__name__} where a vector is expected")

    def select(self, selector: Selector) -> list[Series]:
        chosen = [s for s in self.storage if _matches(selector, s.label_dict)]
        if any(s.is_native for s in chosen):
            raise NotMapped("selects native histograms (NHCB twin or native literal)")
        return chosen

    def call(self, node: Call) -> Vector:
        if node.function in ("rate", "increase"):
            (selector,) = node.args
            if not isinstance(selector, Selector) or selector.range_seconds is None:
                raise NotMapped(f"{node.function} of a non-range selector")
            compute = (
                slo.extrapolated_rate if node.function == "rate" else slo.extrapolated_increase
            )
            out = []
            for series in self.select(selector):
                value = compute(
                    series.samples, self.at_seconds, selector.range_seconds, self.semantics
                )
                if value is not None:
                    labels = {k: v for k, v in series.labels if k != "__name__"}
                    out.append((labels, value))
            return out
        if node.function == "histogram_quantile":
            q = self.number(node.args[0])
            self.has_warning |= not 0 <= q <= 1
            return self.per_histogram(node.args[1], lambda b: self.quantile(q, b))
        if node.function == "histogram_quantiles":
            label = node.args[1]
            if not isinstance(label, Str):
                raise NotMapped("histogram_quantiles label")
            out = []
            for q in (self.number(a) for a in node.args[2:]):
                self.has_warning |= not 0 <= q <= 1
                for labels, value in self.per_histogram(
                    node.args[0], lambda b, q=q: self.quantile(q, b)
                ):
                    out.append((labels | {label.value: _format_q(q)}, value))
            keys = [tuple(sorted(labels.items())) for labels, _ in out]
            if len(set(keys)) != len(keys):
                raise EvaluationError("histogram_quantiles output label sets collide")
            return out
        if node.function == "histogram_fraction":
            lower, upper = self.number(node.args[0]), self.number(node.args[1])
            return self.per_histogram(
                node.args[2],
                lambda b: slo.histogram_fraction(
                    lower, upper, b, small_delta_tolerance=self.small_delta_tolerance
                ),
            )
        if node.function in _NATIVE_ONLY:
            raise NotMapped(f"{node.function} (native histograms only)")
        raise NotMapped(f"function {node.function}")

    def quantile(self, q: float, buckets: tuple[slo.Bucket, ...]) -> float:
        result = slo.histogram_quantile(
            q, buckets, small_delta_tolerance=self.small_delta_tolerance
        )
        self.has_info |= result.has_forced_monotonicity
        return result.value

    def per_histogram(
        self, node: object, compute: Callable[[tuple[slo.Bucket, ...]], float]
    ) -> Vector:
        grouped = self.grouped(self.vector(node))
        return [(dict(group.labels), compute(group.buckets)) for group in grouped.groups]

    def grouped(self, vector: Vector) -> slo.GroupedBuckets:
        try:
            grouped = slo.group_bucket_samples(vector)
        except slo.DuplicateLabelSetError as exc:
            raise EvaluationError(str(exc)) from exc
        self.has_warning |= bool(grouped.skipped_le_values)
        return grouped

    def aggregate(self, node: Aggregation) -> Vector:
        inner = self.vector(node.expr)
        if "le" not in node.by:  # plain float aggregation, no histogram involved
            groups: dict[Labels, list[float]] = {}
            for labels, value in inner:
                key = tuple((k, labels[k]) for k in sorted(node.by) if labels.get(k))
                groups.setdefault(key, []).append(value)
            average = node.operator == "avg"
            return [(dict(k), math.fsum(v) / (len(v) if average else 1)) for k, v in groups.items()]
        # sum/avg by (le, ...): merge the histograms of each group with slo.
        keep = [label for label in node.by if label != "le"]
        by_group: dict[Labels, list[slo.ClassicHistogram]] = {}
        for group in self.grouped(inner).groups:
            labels = dict(group.labels)
            key = tuple((k, labels[k]) for k in sorted(keep) if labels.get(k))
            by_group.setdefault(key, []).append(slo.ClassicHistogram.from_buckets(group.buckets))
        out = []
        for key, histograms in by_group.items():
            merged = slo.merge_histograms(histograms)
            if node.operator == "avg":
                merged = merged.scaled(1.0 / len(histograms))
            for bucket in merged.buckets():
                out.append((dict(key) | {"le": repr(bucket.upper_bound)}, bucket.count))
        return out

    @staticmethod
    def number(node: object) -> float:
        if not isinstance(node, Num):
            raise NotMapped("non-constant scalar argument")
        return node.value


def _matches(selector: Selector, labels: dict[str, str]) -> bool:
    matchers = list(selector.matchers)
    if selector.name is not None:
        matchers.append(("__name__", "=", selector.name))
    for name, op, value in matchers:
        actual = labels.get(name, "")
        ok = {
            "=": actual == value,
            "!=": actual != value,
            "=~": re.fullmatch(value, actual) is not None,
            "!~": re.fullmatch(value, actual) is None,
        }[op]
        if not ok:
            return False
    return True


def _format_q(q: float) -> str:
    if math.isnan(q):
        return "NaN"
    return f"{q:.1f}" if q == int(q) else repr(q)


def values_match(expected: float, actual: float) -> bool:
    """promqltest's comparison: ``almost.Equal(expected, actual, 1e-6)``."""
    if (math.isnan(expected) and math.isnan(actual)) or expected == actual:
        return True
    abs_sum = abs(expected) + abs(actual)
    diff = abs(expected - actual)
    min_normal = 2.2250738585072014e-308
    if expected == 0 or actual == 0 or abs_sum < min_normal:
        return diff < ALMOST_EQUAL_EPSILON * min_normal
    return diff / min(abs_sum, 1.7976931348623157e308) < ALMOST_EQUAL_EPSILON


def classify(case: EvalCase) -> str | None:
    """``None`` when the case is mapped onto slo, else the reason it is not."""
    if any(value.startswith("{{") for _, value in case.expected):
        return "expects a native histogram value"
    try:
        node = parse_expression(case.expr)
        Evaluator(case.storage, case.at_seconds, RangeSemantics.PROMETHEUS_3, 0.0).vector(node)
    except NotMapped as exc:
        return str(exc)
    except EvaluationError:
        return None
    return None
