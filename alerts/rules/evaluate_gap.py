"""The client-gap rule's evaluation over the store (``alerts.rules.client_gap``)."""

from __future__ import annotations

import math
from collections.abc import Mapping

from alerts.rules.baseline import baseline_histograms, median, observations
from alerts.rules.client_gap import ClientGapRule
from alerts.rules.read import FLEET_LABELS, Instance, groups
from collectors import canonical as c
from collectors.store.protocols import MetricsReader


def _tails(
    rule: ClientGapRule,
    reader: MetricsReader,
    family: str,
    selector: Mapping[str, str],
    now: float,
) -> tuple[float, float]:
    """``family``'s quantile over the window and the median of its baseline windows' (NaN
    where a window, or too few baseline windows, hold ``min_observations``)."""
    split = now - rule.window_seconds
    floor = max(rule.min_observations, 1)
    window = reader.histogram_window(family, selector, split, now)
    if window is None or observations(window) < floor:
        return math.nan, math.nan
    past = baseline_histograms(
        reader,
        family,
        selector,
        split,
        rule.window_seconds,
        rule.baseline_window_seconds,
    )
    base = median(
        h.quantile(rule.quantile).value if h is not None and observations(h) >= floor else None
        for h in past
    )
    return window.quantile(rule.quantile).value, base


def client_gap(rule: ClientGapRule, reader: MetricsReader, now: float) -> list[Instance]:
    """Per model of the client family: the clients' tail against its baseline and the
    engines' tail against theirs. The value is the clients' tail (seconds). No instance
    without evidence on both sides: a fleet whose engines' TTFT is unread cannot show the
    engines did not move."""
    out = []
    for key, selector in groups(reader, c.CLIENT_TTFT_SECONDS, FLEET_LABELS).items():
        client, client_base = _tails(rule, reader, c.CLIENT_TTFT_SECONDS, selector, now)
        server, server_base = _tails(rule, reader, c.TTFT_SECONDS, selector, now)
        if any(math.isnan(v) for v in (client, client_base, server, server_base)):
            continue
        holds = (
            client > rule.rise_min * client_base and server <= rule.server_rise_max * server_base
        )
        out.append(Instance(dict(key), client, holds))
    return out
