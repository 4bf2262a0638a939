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
    kept = (c.LABEL_MODEL, c.LABEL_TENANT)
    # NOTE: (family, part, record, aggregation, labels kept, a counter's rate or a gauge)
    wanted = []
    for family in r.FAMILIES:
        wanted.append((family, "_bucket", r.fleet_record_name(family, "_bucket"), "sum", (c.LABEL_LE, *kept), True))  # fmt: skip
        wanted.append((family, "_sum", r.fleet_record_name(family, "_sum"), "sum", kept, True))
    for family, split in r.COUNTER_FAMILIES.items():
        by = (*kept, split) if split else kept
        wanted.append((family, "", r.fleet_counter_record(family), "sum", by, True))
    for family, across in r.GAUGE_FAMILIES.items():
        wanted.append((family, "", r.fleet_gauge_record(family), across, kept, False))
    out = []
    for family, part, record, across, by, is_rate in wanted:
        metric = names.metric(family, part)
        if metric is None:
            continue
        read = selector(metric, names.matchers(family) or None)
        read = f"rate({read}[5m])" if is_rate else read
        out.append(
            PromRule(
                group=GROUP,
                expr=f"{across} by ({', '.join(by)}) ({_canonical_labels(names, read, by)})",
                record=record,
                sources=(names.source(family) or "",),
                rule="console",
            )
        )
    return out


def _canonical_labels(names: EngineNames, expr: str, labels: tuple[str, ...]) -> str:
    """``expr`` with each of ``labels`` the engine names otherwise copied to its canonical
    name (vLLM's ``model_name`` to ``model``)."""
    for label in labels:
        source = names.label(label)
        if source != label:
            expr = f'label_replace({expr}, {quote(label)}, "$1", {quote(source)}, "(.*)")'
    return expr
