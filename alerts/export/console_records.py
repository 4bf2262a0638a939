"""The console's recording rules: each latency family's fleet histogram as a 5-minute rate
per ``le``, model and tenant, the Overview's counters as 5-minute rates and its gauges summed
(or maxed) over the replicas, per model and tenant (``collectors.prometheus.records``), so that
a day's chart of a large fleet reads a few series instead of every replica's."""

from __future__ import annotations

from alerts.export.names import EngineNames
from alerts.export.promql_text import PromRule, quote, selector
from collectors import canonical as c
from collectors.prometheus import records as r

GROUP = "tailwatch-console-fleet"


def console_records(names: EngineNames) -> list[PromRule]:
    """The records of every family the engine exposes under a plain name."""
    by = f"le, {c.LABEL_MODEL}, {c.LABEL_TENANT}"
    out = []
    renamed = _renamed(names)
    for family in r.FAMILIES:
        for part in ("_bucket", "_sum"):
            metric = names.metric(family, part)
            if metric is None:
                continue
            rate = renamed(f"rate({selector(metric, names.matchers(family) or None)}[5m])")
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
    for family, split in r.COUNTER_FAMILIES.items():
        metric = names.metric(family)
        if metric is None:
            continue
        rate = f"rate({selector(metric, names.matchers(family) or None)}[5m])"
        kept = ", ".join(x for x in (c.LABEL_MODEL, c.LABEL_TENANT, split) if x)
        out.append(
            PromRule(
                group=GROUP,
                expr=f"sum by ({kept}) ({renamed(rate, split)})",
                record=r.fleet_counter_record(family),
                sources=(names.source(family) or "",),
                rule="console",
            )
        )
    for family, across in r.GAUGE_FAMILIES.items():
        metric = names.metric(family)
        if metric is None:
            continue
        read = selector(metric, names.matchers(family) or None)
        out.append(
            PromRule(
                group=GROUP,
                expr=f"{across} by ({c.LABEL_MODEL}, {c.LABEL_TENANT}) ({renamed(read)})",
                record=r.fleet_gauge_record(family),
                sources=(names.source(family) or "",),
                rule="console",
            )
        )
    return out


def _renamed(names: EngineNames):  # type: ignore[no-untyped-def]
    """``expr`` with the engine's labels copied to their canonical names (vLLM's
    ``model_name`` to ``model``), the model's and ``split``'s, where they differ."""

    def renamed(expr: str, split: str | None = None) -> str:
        for label in (c.LABEL_MODEL, split):
            source = None if label is None else names.label(label)
            if label is not None and source != label:
                expr = f'label_replace({expr}, {quote(label)}, "$1", {quote(source)}, "(.*)")'
        return expr

    return renamed
