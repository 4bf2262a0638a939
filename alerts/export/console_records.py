"""The console's recording rules: each latency family's fleet histogram as a 5-minute rate
per ``le``, model and tenant (``collectors.prometheus.records``), so that a day's percentile
chart of a large fleet reads one series a bucket instead of every replica's."""

from __future__ import annotations

from alerts.export.names import EngineNames
from alerts.export.promql_text import PromRule, quote, selector
from collectors import canonical as c
from collectors.prometheus import records as r

GROUP = "tailwatch-console-fleet"


def console_records(names: EngineNames) -> list[PromRule]:
    """The records of every family the engine exposes under a plain name."""
    model = names.label(c.LABEL_MODEL)
    by = f"le, {c.LABEL_MODEL}, {c.LABEL_TENANT}"
    out = []
    for family in r.FAMILIES:
        for part in ("_bucket", "_sum"):
            metric = names.metric(family, part)
            if metric is None:
                continue
            rate = f"rate({selector(metric, names.matchers(family) or None)}[5m])"
            if model != c.LABEL_MODEL:
                rate = (
                    f'label_replace({rate}, {quote(c.LABEL_MODEL)}, "$1", {quote(model)}, "(.*)")'
                )
            by_part = by if part == "_bucket" else by.removeprefix("le, ")
            out.append(
                PromRule(
                    group=GROUP,
                    expr=f"sum by ({by_part}) ({rate})",
                    record=r.fleet_record_name(family, part),
                    sources=(names.source(family) or "",),
                    rule="console",
                )
            )
    return out
