"""The PromQL the reader sends, one function per read: the push-down itself.

Every window groups by ``instance`` (Tailwatch's ``target``) besides what it sums, so that the
reader can check bucket layouts per target and name the targets in an error, and can let a
current metric name win over a renamed one target by target, as a scrape does. The server
does the per-series work (``increase`` over every bucket series); what comes back is one
series per target and bucket.
"""

from __future__ import annotations

from collectors.prometheus.api import format_range
from collectors.prometheus.names import TARGET_LABEL

#: ``le`` of the rows that carry a histogram's ``_sum`` increase and its layout check.
SUM_ROW = "sum"
LAYOUT_CHANGED_ROW = "layout-changed"


def selector(metric: str, matchers: str) -> str:
    """``{__name__="metric",matchers}``: quoting the name keeps any spelling valid."""
    inner = ",".join(x for x in (f'__name__="{metric}"', matchers) if x)
    return "{" + inner + "}"


def histogram_window(stem: str, matchers: str, width_seconds: float) -> str:
    """Per target, ``increase`` of each bucket and of ``_sum`` over ``width``, and a row
    ``le="layout-changed"`` for a target whose bucket series hold different numbers of samples
    in the range (a restart with new buckets: Prometheus would add both layouts' ``le``s)."""
    w = format_range(width_seconds)
    buckets = f"{selector(stem + '_bucket', matchers)}[{w}]"
    sums = f"{selector(stem + '_sum', matchers)}[{w}]"
    by = f"by (le, {TARGET_LABEL})"
    return (
        f"sum {by} (increase({buckets}))"
        f' or label_replace(sum by ({TARGET_LABEL}) (increase({sums})), "le", "{SUM_ROW}", "", "")'
        f" or label_replace(max by ({TARGET_LABEL}) (count_over_time({buckets}))"
        f" != min by ({TARGET_LABEL}) (count_over_time({buckets})),"
        f' "le", "{LAYOUT_CHANGED_ROW}", "", "")'
    )


def fleet_histogram_window(stem: str, matchers: str, width_seconds: float) -> str:
    """``histogram_window`` summed over every target on the server (``sum by (le)``): what
    comes back is one series per bucket, whatever the size of the fleet. It is only read after
    :func:`layout_check` over the whole range found one layout: ``sum by (le)`` would silently
    add up different layouts."""
    w = format_range(width_seconds)
    buckets = f"{selector(stem + '_bucket', matchers)}[{w}]"
    sums = f"{selector(stem + '_sum', matchers)}[{w}]"
    return (
        f"sum by (le) (increase({buckets}))"
        f' or label_replace(sum(increase({sums})), "le", "{SUM_ROW}", "", "")'
    )


def layout_check(stem: str, matchers: str, width_seconds: float, *, per_series: bool) -> str:
    """What the reader checks a fleet read's bucket layouts from, over ``width``: a target
    whose buckets hold different numbers of samples changed layout; buckets not held by as
    many series each mean targets with different layouts. ``per_series``: the samples each
    bucket series holds (one pass, a row per series); else, on the server, the series holding
    each ``le`` (a row per ``le``) and a row ``le="layout-changed"`` per target whose buckets'
    counts are not all one (their ``stddev`` is exactly 0 when they are: two passes, few rows).
    Checked per step on the server, this took four passes a step."""
    w = format_range(width_seconds)
    counts = f"count_over_time({selector(stem + '_bucket', matchers)}[{w}])"
    if per_series:
        return counts
    return (
        f"count by (le) ({counts})"
        f" or label_replace(stddev by ({TARGET_LABEL}) ({counts}) > 0,"
        f' "le", "{LAYOUT_CHANGED_ROW}", "", "")'
    )


def histogram_means(stem: str, matchers: str, width_seconds: float) -> str:
    """Per target, the ``increase`` over ``width`` of ``_sum`` (as ``le="sum"``) and of the
    ``+Inf`` bucket (the count): what a mean needs, two series a target."""
    w = format_range(width_seconds)
    inf = ",".join(x for x in (matchers, 'le="+Inf"') if x)
    sums = f"{selector(stem + '_sum', matchers)}[{w}]"
    return (
        f"sum by (le, {TARGET_LABEL}) (increase({selector(stem + '_bucket', inf)}[{w}]))"
        f' or label_replace(sum by ({TARGET_LABEL}) (increase({sums})), "le", "{SUM_ROW}", "", "")'
    )


def fleet_counter_window(metric: str, matchers: str, width_seconds: float) -> str:
    """The counter's ``increase`` over ``width`` summed over every target on the server."""
    w = format_range(width_seconds)
    return f"sum(increase({selector(metric, matchers)}[{w}]))"


def gauge_across(across: str, metric: str, matchers: str, width_seconds: float) -> str:
    """Each series' mean over ``width``, summed or maxed (``across``) over every series."""
    w = format_range(width_seconds)
    return f"{across}(avg_over_time({selector(metric, matchers)}[{w}]))"


def counter_window(metric: str, matchers: str, width_seconds: float) -> str:
    """Per target, the counter's ``increase`` over ``width``."""
    w = format_range(width_seconds)
    return f"sum by ({TARGET_LABEL}) (increase({selector(metric, matchers)}[{w}]))"


def raw_range(metric_pattern: str, matchers: str, width_seconds: float) -> str:
    """Every stored sample of the matching series over ``width`` (a range-vector instant
    query: the server's own timestamps, nothing evaluated). ``metric_pattern`` is a regex."""
    inner = ",".join(x for x in (f'__name__=~"{metric_pattern}"', matchers) if x)
    return "{" + inner + "}" + f"[{format_range(width_seconds)}]"
