"""Error budgets, burn rates and the multi-window multi-burn-rate table, hand-computed."""

from __future__ import annotations

import dataclasses
import math

import pytest

import slo
from slo import SRE_WORKBOOK_28D, SRE_WORKBOOK_30D, evaluate_burn_rates, firing_severities

HOUR, DAY = 3600.0, 86400.0
ALL_WINDOWS = (300.0, 1800.0, HOUR, 2 * HOUR, 6 * HOUR, DAY, 3 * DAY)


def ratios(**by_window: float) -> dict[float, float]:
    """Zero errors everywhere except the windows named (w5m, w30m, w1h, w2h, w6h, w1d, w3d)."""
    seconds = dict(
        zip(("w5m", "w30m", "w1h", "w2h", "w6h", "w1d", "w3d"), ALL_WINDOWS, strict=True)
    )
    base = dict.fromkeys(ALL_WINDOWS, 0.0)
    return base | {seconds[name]: value for name, value in by_window.items()}


# (table, row, long window, short window, bad requests at exactly the threshold, total)
# 30 d at 99.9 %: B = 0.001, thresholds 14.4 B = 1.44 %, 6 B = 0.6 %, 3 B = 0.3 %, 1 B = 0.1 %.
# 28 d: 13.44 B, 5.6 B, 2.8 B and 14/15 B (= 140 of 150,000 requests).
ROWS = [
    (SRE_WORKBOOK_30D, 0, "w1h", "w5m", 1440, 100_000, "page"),
    (SRE_WORKBOOK_30D, 1, "w6h", "w30m", 600, 100_000, "page"),
    (SRE_WORKBOOK_30D, 2, "w1d", "w2h", 300, 100_000, "ticket"),
    (SRE_WORKBOOK_30D, 3, "w3d", "w6h", 100, 100_000, "ticket"),
    (SRE_WORKBOOK_28D, 0, "w1h", "w5m", 1344, 100_000, "page"),
    (SRE_WORKBOOK_28D, 1, "w6h", "w30m", 560, 100_000, "page"),
    (SRE_WORKBOOK_28D, 2, "w1d", "w2h", 280, 100_000, "ticket"),
    (SRE_WORKBOOK_28D, 3, "w3d", "w6h", 140, 150_000, "ticket"),
]


@pytest.mark.parametrize(("table", "row", "long", "short", "bad", "total", "severity"), ROWS)
def test_each_row_fires_just_above_its_threshold(table, row, long, short, bad, total, severity):
    at = bad / total
    above = (bad + 1) / total
    checks = evaluate_burn_rates(ratios(**{long: at, short: at}), 0.999, table)
    assert not checks[row].is_firing  # exactly at the threshold: not above it
    assert checks[row].long_burn_rate == pytest.approx(table[row].burn_rate_factor)
    assert firing_severities(checks) == ()

    checks = evaluate_burn_rates(ratios(**{long: above, short: above}), 0.999, table)
    assert checks[row].is_firing
    assert firing_severities(checks) == (severity,)

    # Both windows must exceed: a long burn that has already stopped does not fire.
    checks = evaluate_burn_rates(ratios(**{long: above, short: at}), 0.999, table)
    assert not checks[row].is_firing
    checks = evaluate_burn_rates(ratios(**{long: at, short: above}), 0.999, table)
    assert not checks[row].is_firing


def test_tables_are_the_workbook_factors() -> None:
    # The published numbers, exactly: Workbook table 5-8 for 30 d, Sloth's google-28d.yaml.
    assert [w.burn_rate_factor for w in SRE_WORKBOOK_30D] == [14.4, 6.0, 3.0, 1.0]
    assert [w.burn_rate_factor for w in SRE_WORKBOOK_28D] == [13.44, 5.6, 2.8, 14 / 15]
    for table, days in ((SRE_WORKBOOK_30D, 30), (SRE_WORKBOOK_28D, 28)):
        assert slo.burn_rate_windows(days) is table
        assert [(w.severity, w.budget_fraction) for w in table] == [
            ("page", 0.02),
            ("page", 0.05),
            ("ticket", 0.10),
            ("ticket", 0.10),
        ]
        for w in table:
            assert w.period_seconds == days * DAY
            assert w.short_window_seconds == w.long_window_seconds / 12
    with pytest.raises(slo.SLOError, match="28 or 30"):
        slo.burn_rate_windows(7)


def test_the_factor_is_derived_from_the_fraction_not_stored() -> None:
    # fraction * period / long window (Sloth's getBurnRateFactor); the row has no factor field.
    assert "burn_rate_factor" not in {f.name for f in dataclasses.fields(slo.BurnRateWindow)}
    assert slo.burn_rate_factor(0.02, 30 * DAY, HOUR) == 14.4
    assert slo.burn_rate_factor(0.10, 28 * DAY, 3 * DAY) == 14 / 15
    # A drill that compresses every duration by the same factor keeps the burn-rate factors.
    compressed = slo.burn_rate_table(
        [row._replace(long_window_seconds=row.long_window_seconds / 720,
                      short_window_seconds=row.short_window_seconds / 720)
         for row in slo.SRE_WORKBOOK_POLICY],
        30 * DAY / 720,
    )  # fmt: skip
    assert [w.burn_rate_factor for w in compressed] == pytest.approx([14.4, 6.0, 3.0, 1.0])
    assert compressed[0].long_window_seconds == 5.0


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"long_window_seconds": 0.0}, "long_window_seconds must be positive, got 0.0"),
        ({"short_window_seconds": math.nan}, "short_window_seconds must be positive, got nan"),
        ({"period_seconds": math.inf}, "period_seconds must be positive, got inf"),
        ({"short_window_seconds": 2 * HOUR}, "must not exceed the long one"),
        ({"budget_fraction": 0.0}, "budget_fraction must be in (0, 1], got 0.0"),
        ({"budget_fraction": 1.5}, "budget_fraction must be in (0, 1], got 1.5"),
    ],
)
def test_a_row_refuses_impossible_windows_and_fractions(changes, message) -> None:
    with pytest.raises(slo.SLOError) as caught:
        dataclasses.replace(SRE_WORKBOOK_30D[0], **changes)
    assert message in str(caught.value)
    assert str(caught.value).startswith("page row: ")


def test_a_full_outage_at_90_percent_never_pages_on_the_1h_row() -> None:
    # burn 10 spends only 10 / 720 ≈ 1.4 % of a 30-day budget per hour: less than the 2 % row.
    assert slo.budget_spent_fraction(slo.burn_rate(1.0, 0.9), HOUR, 30 * DAY) == pytest.approx(
        10 / 720
    )
    checks = evaluate_burn_rates(dict.fromkeys(ALL_WINDOWS, 1.0), 0.9)
    assert not checks[0].is_firing and checks[1].is_firing


def test_time_to_exhaustion() -> None:
    period = 30 * DAY
    budget = slo.error_budget(0.999)
    assert slo.time_to_exhaustion_seconds(1, period) == period
    assert slo.time_to_exhaustion_seconds(2, period) == 15 * DAY
    assert slo.time_to_exhaustion_seconds(10, period) == 3 * DAY
    assert slo.time_to_exhaustion_seconds(1000, period) / 60 == pytest.approx(43.2)
    assert slo.time_to_exhaustion_seconds(0, period) == math.inf
    outage = slo.burn_rate(1.0, 0.99999)
    assert slo.time_to_exhaustion_seconds(outage, period) == pytest.approx(25.92, rel=1e-6)
    assert budget == pytest.approx(0.001)


def test_budget_remaining() -> None:
    assert slo.budget_remaining(0, 0, 0.99) == 1.0
    assert slo.budget_remaining(50, 10_000, 0.99) == pytest.approx(0.5)
    assert slo.budget_remaining(300, 10_000, 0.99) == pytest.approx(-2.0)  # overspent 3x


def test_error_ratio_edges() -> None:
    assert math.isnan(slo.error_ratio(0, 0))
    with pytest.raises(slo.SLOError, match="bad <= total"):
        slo.error_ratio(3, 2)
    with pytest.raises(slo.SLOError, match=r"\(0, 1\)"):
        slo.error_budget(1.0)


def test_no_traffic_never_fires_and_missing_windows_are_named() -> None:
    checks = evaluate_burn_rates(dict.fromkeys(ALL_WINDOWS, math.nan), 0.999)
    assert not any(c.is_firing for c in checks)
    with pytest.raises(slo.SLOError, match="3600 s window"):
        evaluate_burn_rates({300.0: 0.5}, 0.999)


def test_exact_threshold_does_not_fire_when_one_minus_target_rounds_down() -> None:
    # 1 - 0.9999 is 9.999999999998899e-05 in binary: 14.4 B falls just under 0.00144.
    assert 14.4 * (1 - 0.9999) < 144 / 100_000
    at = 144 / 100_000
    checks = evaluate_burn_rates(ratios(w1h=at, w5m=at), 0.9999)
    assert not checks[0].is_firing
    above = 145 / 100_000
    assert evaluate_burn_rates(ratios(w1h=above, w5m=above), 0.9999)[0].is_firing
