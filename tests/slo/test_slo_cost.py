"""Cost per million tokens (golden values from the issue), input/output split, showback and
the FOCUS-shaped export."""

from __future__ import annotations

import csv
import io
import json
import math

import pytest

import slo
from slo import Objectives, Pricing, RequestRecord

RUPEES = Pricing(currency="INR", gpu_hour_price=250.0)


def test_golden_cost_per_million_output_tokens_at_full_utilization() -> None:
    # ₹250/GPU-hour × 2 GPUs = ₹500/hour for 1,500 tokens/s × 3,600 s = 5.4 M tokens.
    cost = slo.capacity_cost_per_million_tokens(RUPEES, 2, 1500)
    assert cost == pytest.approx(500 / 5.4)
    assert round(cost, 1) == 92.6


def test_golden_cost_at_40_percent_utilization() -> None:
    cost = slo.cost_per_million_tokens_at_utilization(RUPEES, 2, 1500, 0.4)
    assert round(cost) == 231
    # The same figure from billed time and tokens actually served in one hour:
    served = 0.4 * 1500 * 3600
    assert slo.effective_cost_per_million_tokens(RUPEES, 2, 3600, served) == pytest.approx(cost)


def test_cost_per_million_edges() -> None:
    assert slo.cost_per_million_tokens(5.0, 0) == math.inf
    assert math.isnan(slo.cost_per_million_tokens(0.0, 0))
    with pytest.raises(slo.SLOError, match="num_tokens"):
        slo.cost_per_million_tokens(1.0, -5)
    with pytest.raises(slo.SLOError, match=r"utilization must be in \(0, 1\]"):
        slo.cost_per_million_tokens_at_utilization(RUPEES, 2, 1500, 0)


def test_cost_on_good_tokens_only() -> None:
    fast = RequestRecord(True, 0.2, 2.0, 1000, prompt_tokens=100)
    slow = RequestRecord(True, 3.0, 9.0, 3000, prompt_tokens=100)
    failed = RequestRecord(False, 0.1, 0.1, 0, prompt_tokens=100)
    objectives = Objectives(ttft_seconds=1.0)
    assert slo.good_token_counts([fast, slow, failed], objectives) == (100, 1000)
    # ₹500 for the hour; only 1,000 of 4,000 output tokens were useful: 4x the naive cost.
    good = slo.good_token_cost_per_million_tokens(RUPEES, 2, 3600, [fast, slow, failed], objectives)
    naive = slo.effective_cost_per_million_tokens(RUPEES, 2, 3600, 4000)
    assert good == pytest.approx(500 / 1000 * 1e6)
    assert good == pytest.approx(4 * naive)


def test_split_by_price_ratio() -> None:
    split = slo.split_cost_by_price_ratio(100.0, 1_000_000, 250_000, 4.0)
    assert split == pytest.approx((50.0, 50.0, 50.0, 200.0))
    assert split.output_cost_per_million_tokens == 4 * split.input_cost_per_million_tokens
    with pytest.raises(slo.SLOError, match="no tokens"):
        slo.split_cost_by_price_ratio(1.0, 0, 0, 4.0)


def test_split_by_time_share() -> None:
    split = slo.split_cost_by_time_share(100.0, 2_000_000, 100_000, 20.0, 80.0)
    assert split == pytest.approx((20.0, 80.0, 10.0, 800.0))
    with pytest.raises(slo.SLOError, match="both 0"):
        slo.split_cost_by_time_share(1.0, 1, 1, 0.0, 0.0)


@pytest.mark.parametrize("currency", ["₹", "inr", "RUPEES", ""])
def test_currency_is_an_iso_code_setting(currency: str) -> None:
    with pytest.raises(slo.SLOError, match="ISO 4217"):
        Pricing(currency=currency, gpu_hour_price=1.0)


def test_prices_default_to_the_billed_one() -> None:
    pricing = Pricing("USD", 2.0, list_gpu_hour_price=3.0)
    assert (pricing.list_price, pricing.effective_price) == (3.0, 2.0)
    with pytest.raises(slo.SLOError, match="gpu_hour_price"):
        Pricing("USD", -1.0)


T0 = 1_767_261_600.0  # 2026-01-01T10:00:00Z
USAGE = [
    slo.UsageRecord("llama-8b", "acme", T0 + 60, 1800.0, 400_000, 100_000),
    slo.UsageRecord("llama-8b", "acme", T0 + 1900, 1800.0, 100_000, 50_000),
    slo.UsageRecord("llama-8b", "globex", T0 + 10, 3600.0, 900_000, 300_000),
    slo.UsageRecord("qwen-32b", "acme", T0 + 3700, 7200.0, 500_000, 200_000),
]


def test_showback_rows_per_model_tenant_and_hour() -> None:
    pricing = Pricing("USD", 2.0, list_gpu_hour_price=4.0, effective_gpu_hour_price=1.5)
    rows = slo.showback(USAGE, pricing)
    keys = [(r.period_start_seconds - T0, r.model, r.tenant) for r in rows]
    assert keys == [(0, "llama-8b", "acme"), (0, "llama-8b", "globex"), (3600, "qwen-32b", "acme")]
    acme = rows[0]
    assert (acme.gpu_hours, acme.input_tokens, acme.output_tokens) == (1.0, 500_000, 150_000)
    assert (acme.billed_cost, acme.effective_cost, acme.list_cost) == (2.0, 1.5, 4.0)
    assert acme.cost_per_million_output_tokens == pytest.approx(2.0 / 0.15)
    by_tenant = slo.showback_totals(rows, by="tenant")
    assert [(t.key, t.gpu_hours, t.billed_cost) for t in by_tenant] == [
        ("acme", 3.0, 6.0),
        ("globex", 1.0, 2.0),
    ]
    by_model = slo.showback_totals(rows, by="model")
    assert [(t.key, t.output_tokens) for t in by_model] == [
        ("llama-8b", 450_000),
        ("qwen-32b", 200_000),
    ]


def test_allocate_gpu_seconds_by_share() -> None:
    shares = slo.allocate_gpu_seconds(3600.0, {"acme": 300.0, "globex": 100.0})
    assert shares == {"acme": 2700.0, "globex": 900.0}
    with pytest.raises(slo.SLOError, match="positive total"):
        slo.allocate_gpu_seconds(3600.0, {"acme": 0.0})


def test_focus_csv_export() -> None:
    text = slo.focus_csv(slo.showback(USAGE, RUPEES))
    rows = list(csv.DictReader(io.StringIO(text)))
    assert tuple(rows[0]) == slo.FOCUS_COLUMNS
    assert len(rows) == 3
    first = rows[0]
    assert first["ChargePeriodStart"] == "2026-01-01T10:00:00Z"
    assert first["ChargePeriodEnd"] == "2026-01-01T11:00:00Z"
    assert first["ChargeCategory"] == "Usage"
    assert (first["BilledCost"], first["EffectiveCost"], first["ListCost"]) == ("250", "250", "250")
    assert first["BillingCurrency"] == "INR"
    assert (first["ConsumedQuantity"], first["ConsumedUnit"]) == ("650000", "Tokens")
    assert (first["PricingQuantity"], first["PricingUnit"]) == ("1", "GPU-Hours")
    assert first["ResourceId"] == "llama-8b"
    assert first["ServiceName"] and first["ServiceCategory"] == "AI and Machine Learning"
    assert json.loads(first["Tags"]) == {"model": "llama-8b", "tenant": "acme"}
    assert rows[2]["BilledCost"] == "500" and rows[2]["PricingQuantity"] == "2"


def test_showback_totals_refuse_mixed_currencies() -> None:
    rows = slo.showback(USAGE[:1], RUPEES) + slo.showback(USAGE[2:3], Pricing("USD", 2.0))
    with pytest.raises(slo.SLOError, match="mix currencies"):
        slo.showback_totals(rows, by="model")
