"""Per-tenant and per-model showback, and its export as a FOCUS-shaped CSV (FinOps Open Cost
and Usage Specification column names): one row per model, tenant and hour."""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, NamedTuple, TypeVar

from slo.cost import Pricing, cost_per_million_tokens
from slo.errors import SLOError

HOUR_SECONDS = 3600.0
FOCUS_COLUMNS = (
    "ChargePeriodStart",
    "ChargePeriodEnd",
    "ChargeCategory",
    "BilledCost",
    "EffectiveCost",
    "ListCost",
    "BillingCurrency",
    "ConsumedQuantity",
    "ConsumedUnit",
    "PricingQuantity",
    "PricingUnit",
    "ResourceId",
    "ServiceName",
    "ServiceCategory",
    "Tags",
)
K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True)
class UsageRecord:
    """GPU time and tokens attributed to one model and tenant, starting at ``start_seconds``
    (Unix time). ``gpu_seconds`` is this tenant's share of the GPUs' time (see
    :func:`allocate_gpu_seconds`)."""

    model: str
    tenant: str
    start_seconds: float
    gpu_seconds: float
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True)
class ShowbackRow:
    """Priced usage of one model and tenant over one charge period."""

    model: str
    tenant: str
    period_start_seconds: float
    period_end_seconds: float
    gpu_hours: float
    input_tokens: int
    output_tokens: int
    billed_cost: float
    effective_cost: float
    list_cost: float
    currency: str

    @property
    def consumed_tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def cost_per_million_output_tokens(self) -> float:
        return cost_per_million_tokens(self.billed_cost, self.output_tokens)


class ShowbackTotal(NamedTuple):
    """Showback summed over every period (and the other dimension) for one tenant or model."""

    key: str
    gpu_hours: float
    input_tokens: int
    output_tokens: int
    billed_cost: float
    currency: str

    @property
    def cost_per_million_output_tokens(self) -> float:
        return cost_per_million_tokens(self.billed_cost, self.output_tokens)


def allocate_gpu_seconds(total_gpu_seconds: float, weights: Mapping[K, float]) -> dict[K, float]:
    """Share GPU time among keys (tenants, models) in proportion to ``weights`` — tokens, or
    better prefill plus decode seconds. All-zero weights leave nothing to attribute: error."""
    total_weight = math.fsum(weights.values())
    if any(w < 0 for w in weights.values()) or total_weight <= 0:
        raise SLOError(f"weights must be >= 0 with a positive total, got {dict(weights)}")
    return {key: total_gpu_seconds * w / total_weight for key, w in weights.items()}


def showback(
    usage: Iterable[UsageRecord], pricing: Pricing, period_seconds: float = HOUR_SECONDS
) -> tuple[ShowbackRow, ...]:
    """Aggregate usage into (period, model, tenant) rows and price each.

    Periods are aligned to multiples of ``period_seconds`` since the Unix epoch (hours by
    default). Rows are sorted by period start, model, tenant.
    """
    totals: dict[tuple[float, str, str], list[float]] = {}
    for record in usage:
        if record.gpu_seconds < 0 or record.input_tokens < 0 or record.output_tokens < 0:
            raise SLOError(f"usage must not be negative: {record}")
        start = math.floor(record.start_seconds / period_seconds) * period_seconds
        row = totals.setdefault((start, record.model, record.tenant), [0.0, 0, 0])
        row[0] += record.gpu_seconds
        row[1] += record.input_tokens
        row[2] += record.output_tokens
    rows = []
    for (start, model, tenant), (gpu_seconds, input_tokens, output_tokens) in sorted(
        totals.items()
    ):
        gpu_hours = gpu_seconds / HOUR_SECONDS
        rows.append(
            ShowbackRow(
                model=model,
                tenant=tenant,
                period_start_seconds=start,
                period_end_seconds=start + period_seconds,
                gpu_hours=gpu_hours,
                input_tokens=int(input_tokens),
                output_tokens=int(output_tokens),
                billed_cost=gpu_hours * pricing.gpu_hour_price,
                effective_cost=gpu_hours * pricing.effective_price,
                list_cost=gpu_hours * pricing.list_price,
                currency=pricing.currency,
            )
        )
    return tuple(rows)


def showback_totals(
    rows: Iterable[ShowbackRow], by: Literal["tenant", "model"]
) -> tuple[ShowbackTotal, ...]:
    """Totals per tenant or per model, sorted by key."""
    if by not in ("tenant", "model"):
        raise SLOError(f"showback totals are by 'tenant' or 'model', got {by!r}")
    grouped: dict[str, list[ShowbackRow]] = {}
    for row in rows:
        grouped.setdefault(getattr(row, by), []).append(row)
    currencies = {row.currency for group in grouped.values() for row in group}
    if len(currencies) > 1:
        raise SLOError(f"rows mix currencies {sorted(currencies)}; convert before summing")
    return tuple(
        ShowbackTotal(
            key=key,
            gpu_hours=math.fsum(r.gpu_hours for r in group),
            input_tokens=sum(r.input_tokens for r in group),
            output_tokens=sum(r.output_tokens for r in group),
            billed_cost=math.fsum(r.billed_cost for r in group),
            currency=group[0].currency,
        )
        for key, group in sorted(grouped.items())
    )


def focus_csv(
    rows: Iterable[ShowbackRow],
    *,
    service_name: str = "Tailwatch LLM inference",
    service_category: str = "AI and Machine Learning",
) -> str:
    """FOCUS-shaped CSV text, one line per row: ``ChargeCategory`` is ``Usage``,
    ``ConsumedQuantity`` counts tokens (input + output), ``PricingQuantity`` GPU-hours,
    ``ResourceId`` is the model, ``Tags`` a JSON object with tenant and model. Times are
    ISO 8601 UTC; amounts are plain decimals in ``BillingCurrency``."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(FOCUS_COLUMNS)
    for row in rows:
        tags = json.dumps({"model": row.model, "tenant": row.tenant}, sort_keys=True)
        writer.writerow(
            (
                _iso(row.period_start_seconds),
                _iso(row.period_end_seconds),
                "Usage",
                _decimal(row.billed_cost),
                _decimal(row.effective_cost),
                _decimal(row.list_cost),
                row.currency,
                row.consumed_tokens,
                "Tokens",
                _decimal(row.gpu_hours),
                "GPU-Hours",
                row.model,
                service_name,
                service_category,
                tags,
            )
        )
    return buffer.getvalue()


def _iso(unix_seconds: float) -> str:
    return datetime.fromtimestamp(unix_seconds, tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _decimal(value: float) -> str:
    text = f"{value:.10f}".rstrip("0").rstrip(".")
    return text or "0"
