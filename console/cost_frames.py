"""Cost figures for the Cost page, from ``slo.cost`` and ``slo.showback``: the window's GPU
time priced, cost per 1M output tokens effective, at capacity (the measured knee) and on
good tokens only, utilisation, and showback per tenant and model with its FOCUS export.

Pure: request records and token counts in, plain data out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from collectors.request_records import RequestRecord
from slo import (
    Pricing,
    ShowbackRow,
    UsageRecord,
    allocate_gpu_seconds,
    capacity_cost_per_million_tokens,
    cost_per_million_tokens,
    gpu_cost,
    showback,
)


@dataclass(frozen=True)
class CostSummary:
    """Per 1M output tokens: ``effective`` (billed GPU time over tokens served), ``at_capacity``
    (serving at the knee all the time, NaN without a knee), ``good_only`` (over the output
    tokens of requests that met their SLOs); ``utilisation`` is served / capacity."""

    billed_cost: float
    output_tokens: float
    good_output_tokens: float
    effective: float
    at_capacity: float
    good_only: float
    utilisation: float


def cost_summary(
    pricing: Pricing,
    num_gpus: float,
    billed_seconds: float,
    output_tokens: float,
    good_output_tokens: float,
    capacity_tokens_per_second: float | None,
) -> CostSummary:
    """The page's headline figures (see :class:`CostSummary`)."""
    billed = gpu_cost(pricing, num_gpus, billed_seconds)
    has_knee = capacity_tokens_per_second is not None and capacity_tokens_per_second > 0
    at_capacity = (
        capacity_cost_per_million_tokens(pricing, num_gpus, capacity_tokens_per_second)
        if has_knee
        else math.nan
    )
    served_rate = output_tokens / billed_seconds if billed_seconds > 0 else math.nan
    utilisation = served_rate / capacity_tokens_per_second if has_knee else math.nan
    return CostSummary(
        billed_cost=billed,
        output_tokens=output_tokens,
        good_output_tokens=good_output_tokens,
        effective=cost_per_million_tokens(billed, output_tokens),
        at_capacity=at_capacity,
        good_only=cost_per_million_tokens(billed, good_output_tokens),
        utilisation=utilisation,
    )


def usage_records(records: Sequence[RequestRecord], total_gpu_seconds: float) -> list[UsageRecord]:
    """Each record's share of the GPUs' time, in proportion to its tokens (prompt + output;
    ``slo.allocate_gpu_seconds``), as a ``UsageRecord`` at its arrival. No tokens: none."""
    weights = {
        i: float((r.input_tokens or 0) + (r.output_tokens or 0)) for i, r in enumerate(records)
    }
    if not any(weights.values()):
        return []
    shares = allocate_gpu_seconds(total_gpu_seconds, weights)
    return [
        UsageRecord(
            model=r.model or "(unknown)",
            tenant=r.tenant or "(none)",
            start_seconds=r.arrival,
            gpu_seconds=shares[i],
            input_tokens=r.input_tokens or 0,
            output_tokens=r.output_tokens or 0,
        )
        for i, r in enumerate(records)
    ]


def showback_rows(
    records: Sequence[RequestRecord], pricing: Pricing, total_gpu_seconds: float
) -> tuple[ShowbackRow, ...]:
    """Hourly showback rows per model and tenant (``slo.showback``)."""
    return showback(usage_records(records, total_gpu_seconds), pricing)


def managed_api_cost(output_tokens: float, price_per_million: float) -> float:
    """What the same output tokens cost at a managed API's per-1M-token price."""
    return output_tokens / 1e6 * price_per_million
