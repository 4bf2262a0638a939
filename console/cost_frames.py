"""Cost figures for the Cost page, from ``slo.cost`` and ``slo.showback``: the GPU time the
targets were observed for (:func:`billed_time`) priced, cost per 1M output tokens effective, at capacity (the measured knee) and on
good tokens only, utilisation, and showback per tenant and model with its FOCUS export.

Pure: request records and token counts in, plain data out.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
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


@dataclass(frozen=True)
class BilledTime:
    """The GPU time a window bills: ``gpu_seconds`` in all, over ``observed_seconds`` of wall
    time (the first reading of any target to the last), so ``num_gpus`` is the GPUs on
    average (``gpu_seconds / observed_seconds``); ``basis`` says where the count came from."""

    gpu_seconds: float
    observed_seconds: float
    basis: str

    @property
    def num_gpus(self) -> float:
        return self.gpu_seconds / self.observed_seconds if self.observed_seconds > 0 else 0.0


def _plural(count: float, word: str) -> str:
    return f"{count:g} {word}" + ("" if count == 1 else "s")


def billed_time(
    observed: Mapping[str, tuple[float, float]],
    nvml_gpus: int = 0,
    configured_gpus: int | None = None,
) -> BilledTime:
    """GPU time over the spans the targets were observed (``observed``: target → the first
    and last reading of its counters in the window), never the whole window: a stack that
    ran two minutes of an hour's range bills two minutes. GPUs: ``configured_gpus`` when
    given (over the fleet's observed span); else the GPUs NVML saw (``nvml_gpus``, replicas
    sharing them); else one per replica, each over its own span. No target observed: none."""
    spans = {t: max(0.0, b - a) for t, (a, b) in observed.items()}
    if not spans:
        return BilledTime(0.0, 0.0, "no target observed in the window")
    fleet = max(b for _, b in observed.values()) - min(a for a, _ in observed.values())
    replicas = _plural(len(spans), "replica")
    if configured_gpus:
        return BilledTime(
            configured_gpus * fleet, fleet, f"{_plural(configured_gpus, 'GPU')} as entered"
        )
    if nvml_gpus:
        basis = f"{_plural(nvml_gpus, 'GPU')} NVML reports, shared by {replicas}"
        return BilledTime(nvml_gpus * fleet, fleet, basis)
    return BilledTime(sum(spans.values()), fleet, f"one GPU per replica ({replicas})")


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
