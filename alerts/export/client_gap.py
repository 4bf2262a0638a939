"""The client-gap rule kind as PromQL (``alerts.rules.client_gap``) and its promtool case.

Two recording rules per model, the clients' and the engines' TTFT quantile over the window
(each ``and`` its evidence), and an alert that holds while the clients' is over
``rise_min`` times its baseline median and the engines' at most ``server_rise_max`` times
theirs. An engine with no client family (vLLM exports none) cannot express it: the client
family comes from a gateway's or a load generator's ``/metrics``.
"""

from __future__ import annotations

import math

from alerts.export.exprs import _baseline, _baseline_count, quantile_record
from alerts.export.names import EngineNames
from alerts.export.promql_text import (
    PromRule,
    Reader,
    alert_rule,
    group_name,
)
from alerts.export.promtool_cases import _case, _drop_index, _relative_evals
from alerts.export.promtool_series import (
    MODEL,
    Builder,
    Case,
    alert_records,
    edge_above,
    expected_quantile,
    series,
)
from alerts.export.slo import LAYOUTS
from alerts.rules.client_gap import ClientGapRule
from collectors import canonical as c


def client_gap(rule: ClientGapRule, names: EngineNames) -> list[PromRule]:
    reader = Reader(names, rule)
    records = [
        quantile_record(reader, rule, family, rule.quantile)
        for family in (c.CLIENT_TTFT_SECONDS, c.TTFT_SECONDS)
    ]
    client, server = records[0].record, records[1].record
    parts = [
        f"{client} > {rule.rise_min!r} * {_baseline(client, rule)}",  # type: ignore[arg-type]
        _baseline_count(client, rule),  # type: ignore[arg-type]
        f"{server} <= {rule.server_rise_max!r} * {_baseline(server, rule)}",  # type: ignore[arg-type]
        _baseline_count(server, rule),  # type: ignore[arg-type]
    ]
    # NOTE: the first condition's left side is the clients' tail: the alert's value
    return [*records, alert_rule(rule, reader, group_name(rule), "\nand ".join(parts))]


def client_gap_case(rule: ClientGapRule, names: EngineNames, alert: PromRule) -> Case:
    """Firing: the clients' first tokens move to a slow bucket while the engines' stay fast.
    Clean: both move together (an engine incident, which the engine rules own)."""
    b = Builder(names, rule)
    w, base = rule.window_seconds, rule.baseline_window_seconds
    k = _drop_index(b, rule, base, w)
    evals = _relative_evals(b, rule, k, w, base)
    n = b.samples(evals)
    family = c.CLIENT_TTFT_SECONDS
    fast = LAYOUTS[family][3]
    per = 1000.0 * b.interval * max(1, math.ceil(rule.min_observations / (1000.0 * w)))
    calm = {fast: per}
    calm_tail = expected_quantile(rule.quantile, family, calm, b.interval)
    slow = edge_above(family, calm_tail * rule.rise_min, skip=1)
    hot = {slow: per}
    client_hot = b.histogram(c.CLIENT_TTFT_SECONDS, calm, n, then=hot, at=k)
    server_calm = b.histogram(c.TTFT_SECONDS, calm, n)
    server_hot = b.histogram(c.TTFT_SECONDS, calm, n, then=hot, at=k)
    values = [
        expected_quantile(rule.quantile, family, hot, b.interval),
        expected_quantile(rule.quantile, c.TTFT_SECONDS, calm, b.interval),
    ]
    records = [
        (record, evals, [(series(record, {b.model: MODEL}), value)])
        for record, value in zip(alert_records(alert), values, strict=False)
    ]
    return _case(
        b,
        [*client_hot, *server_calm],
        [*client_hot, *server_hot],
        evals,
        [b.expect(**{b.model: MODEL})],
        records,
    )
