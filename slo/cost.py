"""Cost per million tokens: effective (billed GPU time over tokens actually served), at
capacity (over the tokens the fleet serves at its measured knee), and on good tokens only
(requests that met their SLO); and the split of a cost between input and output tokens.

Money is in ``Pricing.currency`` (an ISO 4217 code): nothing here assumes a currency.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import NamedTuple

from slo.errors import SLOError
from slo.goodput import RequestRecord, is_good
from slo.objectives import Objectives

TOKENS_PER_MILLION = 1_000_000
_CURRENCY = re.compile(r"[A-Z]{3}")


@dataclass(frozen=True)
class Pricing:
    """What a GPU-hour costs, in ``currency``.

    ``gpu_hour_price`` is what is billed; ``list_gpu_hour_price`` the public on-demand price
    (defaults to the billed one) and ``effective_gpu_hour_price`` the price after amortised
    commitments and discounts (defaults to the billed one). FOCUS exports all three.
    """

    currency: str
    gpu_hour_price: float
    list_gpu_hour_price: float | None = None
    effective_gpu_hour_price: float | None = None

    def __post_init__(self) -> None:
        if not _CURRENCY.fullmatch(self.currency):
            raise SLOError(
                f"currency must be an ISO 4217 code such as 'USD', 'EUR' or 'INR', "
                f"got {self.currency!r}"
            )
        for name in ("gpu_hour_price", "list_gpu_hour_price", "effective_gpu_hour_price"):
            value = getattr(self, name)
            if value is not None and not (math.isfinite(value) and value >= 0):
                raise SLOError(f"{name} must be a finite amount >= 0, got {value}")

    @property
    def list_price(self) -> float:
        return self.gpu_hour_price if self.list_gpu_hour_price is None else self.list_gpu_hour_price

    @property
    def effective_price(self) -> float:
        if self.effective_gpu_hour_price is None:
            return self.gpu_hour_price
        return self.effective_gpu_hour_price


def gpu_cost(pricing: Pricing, num_gpus: float, billed_seconds: float) -> float:
    """Billed cost of ``num_gpus`` GPUs for ``billed_seconds``."""
    _require_non_negative(num_gpus=num_gpus, billed_seconds=billed_seconds)
    return pricing.gpu_hour_price * num_gpus * billed_seconds / 3600.0


def cost_per_million_tokens(cost: float, num_tokens: float) -> float:
    """``cost / num_tokens * 1e6``; ``inf`` when money was spent on no tokens, NaN when
    neither money nor tokens were."""
    _require_non_negative(cost=cost, num_tokens=num_tokens)
    if num_tokens == 0:
        return math.inf if cost > 0 else math.nan
    return cost / num_tokens * TOKENS_PER_MILLION


def effective_cost_per_million_tokens(
    pricing: Pricing, num_gpus: float, billed_seconds: float, num_tokens_served: float
) -> float:
    """What a million tokens really cost: billed GPU time over the tokens actually served."""
    return cost_per_million_tokens(gpu_cost(pricing, num_gpus, billed_seconds), num_tokens_served)


def capacity_cost_per_million_tokens(
    pricing: Pricing, num_gpus: float, capacity_tokens_per_second: float
) -> float:
    """The floor: cost per million tokens when serving at the measured knee all the time."""
    _require_non_negative(capacity_tokens_per_second=capacity_tokens_per_second)
    return cost_per_million_tokens(
        gpu_cost(pricing, num_gpus, 3600.0), capacity_tokens_per_second * 3600.0
    )


def cost_per_million_tokens_at_utilization(
    pricing: Pricing, num_gpus: float, capacity_tokens_per_second: float, utilization: float
) -> float:
    """Cost per million tokens when the fleet serves ``utilization`` (0, 1] of its capacity:
    the capacity cost divided by the utilization."""
    if not 0 < utilization <= 1:
        raise SLOError(f"utilization must be in (0, 1], got {utilization}")
    return (
        capacity_cost_per_million_tokens(pricing, num_gpus, capacity_tokens_per_second)
        / utilization
    )


class TokenCounts(NamedTuple):
    input_tokens: int
    output_tokens: int


def good_token_counts(records: Iterable[RequestRecord], objectives: Objectives) -> TokenCounts:
    """Prompt and output tokens of the requests that met every objective (see ``is_good``)."""
    input_tokens = output_tokens = 0
    for record in records:
        if is_good(record, objectives):
            input_tokens += record.prompt_tokens
            output_tokens += record.output_tokens
    return TokenCounts(input_tokens, output_tokens)


def good_token_cost_per_million_tokens(
    pricing: Pricing,
    num_gpus: float,
    billed_seconds: float,
    records: Iterable[RequestRecord],
    objectives: Objectives,
) -> float:
    """Billed cost over the *output* tokens of requests that met their SLO: what a useful
    million tokens cost once tokens delivered too late are counted as waste."""
    good = good_token_counts(records, objectives)
    return cost_per_million_tokens(gpu_cost(pricing, num_gpus, billed_seconds), good.output_tokens)


class InputOutputCost(NamedTuple):
    """A cost split between input (prompt) and output (generated) tokens."""

    input_cost: float
    output_cost: float
    input_cost_per_million_tokens: float
    output_cost_per_million_tokens: float


def split_cost_by_price_ratio(
    cost: float, input_tokens: float, output_tokens: float, output_to_input_price_ratio: float
) -> InputOutputCost:
    """Split so that an output token costs ``ratio`` times an input token (APIs commonly
    price output at 3-5x input): ``input price = cost / (input + ratio * output)``."""
    _require_non_negative(cost=cost, input_tokens=input_tokens, output_tokens=output_tokens)
    if not (math.isfinite(output_to_input_price_ratio) and output_to_input_price_ratio > 0):
        raise SLOError(f"price ratio must be positive, got {output_to_input_price_ratio}")
    weighted = input_tokens + output_to_input_price_ratio * output_tokens
    if weighted == 0:
        raise SLOError("no tokens to split the cost over; pass the tokens of the same window")
    input_cost = cost * input_tokens / weighted
    return _split(cost, input_cost, input_tokens, output_tokens)


def split_cost_by_time_share(
    cost: float,
    input_tokens: float,
    output_tokens: float,
    prefill_seconds: float,
    decode_seconds: float,
) -> InputOutputCost:
    """Split by where the GPU time went: prefill time pays for input tokens, decode time
    for output tokens (the engine's ``prefill_seconds``/``decode_seconds`` histogram sums)."""
    _require_non_negative(
        cost=cost,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        prefill_seconds=prefill_seconds,
        decode_seconds=decode_seconds,
    )
    busy = prefill_seconds + decode_seconds
    if busy == 0:
        raise SLOError("prefill and decode time are both 0; measure them over the billed window")
    return _split(cost, cost * prefill_seconds / busy, input_tokens, output_tokens)


def _split(
    cost: float, input_cost: float, input_tokens: float, output_tokens: float
) -> InputOutputCost:
    output_cost = cost - input_cost
    return InputOutputCost(
        input_cost,
        output_cost,
        cost_per_million_tokens(input_cost, input_tokens),
        cost_per_million_tokens(output_cost, output_tokens),
    )


def _require_non_negative(**values: float) -> None:
    for name, value in values.items():
        if not (math.isfinite(value) and value >= 0):
            raise SLOError(f"{name} must be a finite number >= 0, got {value}")
