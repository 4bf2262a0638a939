"""An SLO's burn-rate rules in PromQL: Sloth-style SLI recording rules per window
(``tailwatch:slo_<name>:error_ratio_rate<w>``) and the multi-window multi-burn-rate alert.

The latency SLI is ``1 - bucket{le=bound} / count`` with the threshold snapped to an edge of
the layout vLLM (and the bundled engine) serves; the error SLI counts what ``slo.outcomes``
calls errors, over what it counts at all.
"""

from __future__ import annotations

from alerts.export.names import EngineNames
from alerts.export.promql_text import (
    PromRule,
    Reader,
    Unexportable,
    alert_rule,
    group_name,
    quote,
    record_rule,
    selector,
)
from alerts.rules.records import (
    THRESHOLD_LABEL,
    metric_token,
    prom_duration,
    slo_record_labels,
    slo_record_name,
)
from alerts.rules.sli import ErrorSLI, LatencySLI, SnappedThreshold, snap_threshold
from alerts.rules.types import BurnRateRule
from collectors import canonical as c
from engine.metric_names import BUCKETS
from slo import ErrorSource

#: The bucket layouts a latency SLI's threshold snaps to: vLLM 0.33's defaults, which the
#: bundled engine serves too (``engine/metric_names.py``).
LAYOUTS: dict[str, tuple[float, ...]] = {
    c.TTFT_SECONDS: BUCKETS["time_to_first_token"],
    c.ITL_SECONDS: BUCKETS["inter_token_latency"],
    c.E2E_SECONDS: BUCKETS["request_latency"],
    c.CLIENT_TTFT_SECONDS: BUCKETS["time_to_first_token"],
}


def snapped_bound(sli: LatencySLI) -> SnappedThreshold:
    return snap_threshold(sli.threshold_seconds, LAYOUTS[sli.family])


def _le_text(bound: float) -> str:
    from prometheus_client.utils import floatToGoString

    return floatToGoString(bound)


def sli_error_ratio(reader: Reader, spec: BurnRateRule, window: str) -> str:
    """The SLI's error ratio over ``window`` on the engine's names."""
    base = {}
    if spec.selector.model is not None:
        base[reader.label(c.LABEL_MODEL)] = spec.selector.model
    tenant = spec.selector.tenant is not None
    if tenant:
        base[c.LABEL_TENANT] = spec.selector.tenant
    sli = spec.sli
    if isinstance(sli, LatencySLI):
        bucket = reader.metric(sli.family, "_bucket", per_tenant=tenant)
        count = reader.metric(sli.family, "_count", per_tenant=tenant)
        le = {**base, c.LABEL_LE: _le_text(snapped_bound(sli).bound_seconds)}
        return (
            f"1 - (sum(rate({selector(bucket, le)}[{window}])) / "
            f"sum(rate({selector(count, base)}[{window}])))"
        )
    return error_ratio(reader, sli, base, window, by="", per_tenant=tenant)


def error_ratio(
    reader: Reader,
    sli: ErrorSLI,
    base: dict[str, str],
    window: str,
    by: str,
    per_tenant: bool = False,
) -> str:
    metric = reader.metric(sli.family, per_tenant=per_tenant)
    base = {**base, **({} if per_tenant else reader.matchers(sli.family))}
    label = reader.label(sli.label)
    group = f" by ({by})" if by else ""
    if sli.indicator.source is ErrorSource.REQUESTS:
        bad = selector(metric, {**base, label + "~": "|".join(sli.bad_reasons())})
        valid = selector(metric, {**base, label + "~": "|".join(sli.valid_reasons())})
    else:
        patterns = sli.code_patterns()
        bad = selector(metric, {**base, label + "~": patterns.bad})
        negative = f"{label}!~{quote(patterns.left_out)}" if patterns.left_out else ""
        valid = selector(metric, {**base, label + "~": patterns.valid}, negative)
    return f"sum{group} (rate({bad}[{window}])) / sum{group} (rate({valid}[{window}]))"


def burn_rate_records(rule: BurnRateRule, names: EngineNames, windows: tuple[float, ...]):
    """The SLI recording rules of one SLO, one per window (Sloth's ``ratio_rate<w>``)."""
    if rule.selector.route is not None:
        raise Unexportable(
            f"rule {rule.name!r}: SLO {rule.slo!r} selects a route, which "
            f"{names.dialect.value}'s histograms and counters do not carry"
        )
    reader = Reader(names, rule)
    group = f"tailwatch-slo-{metric_token(rule.slo)}-sli"
    out = []
    for seconds in windows:
        expr = sli_error_ratio(reader, rule, prom_duration(seconds))
        labels = slo_record_labels(rule.slo, rule.sli)
        out.append(record_rule(reader, group, slo_record_name(rule.slo, seconds), expr, **labels))
    return out


def burn_rate_alert(rule: BurnRateRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    sli_records = burn_rate_records(rule, names, rule.window_lengths_seconds())
    reader.sources = list(sli_records[0].sources)
    budget = 1.0 - rule.target
    rows = []
    for w in rule.windows:
        limit = f"({w.burn_rate_factor!r} * {budget!r})"
        long_name = slo_record_name(rule.slo, w.long_window_seconds)
        short_name = slo_record_name(rule.slo, w.short_window_seconds)
        # NOTE: the threshold label tells the evaluator which objective a record measured;
        # the alert keeps the labels it always had
        rows.append(
            f"max without ({THRESHOLD_LABEL}) ({long_name} > {limit} and {short_name} > {limit})"
        )
    return [alert_rule(rule, reader, group_name(rule), "\nor\n".join(rows))]
