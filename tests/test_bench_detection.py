"""bench/detection.py's arithmetic: how a run's signal move is read, which incidents the
recall target counts, and the targets' figures; on plain outcome records (the runs
themselves are the virtual drill's, tested in tests/loadgen)."""

from __future__ import annotations

import math

import pytest

from bench import detection as d


def _outcome(**fields):
    base = {
        "name": "x",
        "kind": "overload",
        "benign": False,
        "cause": "overload",
        "moved": 10.0,
        "long_enough": True,
        "detected": True,
        "cause_rank": 1,
        "delay_evaluations": 0.0,
        "incidents_opened": 1,
        "early_pages": 0,
        "pages": 1,
        "fired": [],
        "virtual_seconds": 360.0,
        "window_scale": 0.1,
    }
    return {**base, **fields}


@pytest.mark.parametrize(
    ("signal", "baseline", "perturbation", "moved"),
    [
        ("queue_time_mean_ms", 10.0, 40.0, 4.0),
        ("preemptions", 0.0, 7.0, math.inf),
        ("preemptions", 0.0, 0.0, 1.0),
        ("prefix_hit_rate", 0.6, 0.3, 2.0),
        ("prefix_hit_rate", 0.6, 0.0, math.inf),
        ("e2e_p50_skew", 1.0, 1.7, 1.7),
    ],
)
def test_a_move_is_the_factor_the_signal_went_in_its_bad_direction(
    signal, baseline, perturbation, moved
):
    assert d._move(signal, baseline, perturbation) == moved


def test_recall_counts_clear_incidents_long_enough_to_be_seen():
    runs = [
        _outcome(),
        _outcome(moved=1.8, detected=False),  # under 2x: not counted
        _outcome(kind="slow-replica", moved=1.6, detected=False),  # 1.5x bar: counted, missed
        _outcome(moved=5.0, long_enough=False, detected=False),  # too short: not counted
        _outcome(benign=True, kind="diurnal", pages=0, virtual_seconds=720.0),
        _outcome(benign=True, kind="diurnal", pages=1, virtual_seconds=720.0),
    ]
    summary = d.summarize(runs)
    assert summary["clear_incidents"] == 2
    assert summary["recall"] == 0.5
    assert summary["benign_with_a_page"] == 1
    assert summary["benign_fleet_hours"] == pytest.approx(2 * 720 / 0.1 / 3600)
    assert summary["false_pages_per_fleet_hour"] == pytest.approx(1 / 4.0)


def test_ac_is_over_the_detected_and_bins_name_the_move():
    runs = [_outcome(cause_rank=1), _outcome(cause_rank=3), _outcome(cause_rank=None)]
    summary = d.summarize(runs)
    assert summary["ac1"] == pytest.approx(1 / 3)
    assert summary["ac3"] == pytest.approx(2 / 3)
    assert [d._bin(x) for x in (1.2, 1.5, 2.9, 4.0, math.inf, math.nan)] == [
        "< 1.5x",
        "1.5-2x",
        "2-3x",
        "3-5x",
        ">= 5x",
        "unknown",
    ]


def test_options_reach_the_benchmark():
    args = d.parse_args(["--seed", "5", "--seed", "6", "--count", "3", "--kinds", "overload"])
    assert (args.seed, args.count, args.kinds) == ([5, 6], 3, "overload")
    assert d.parse_args([]).seed is None  # then DEFAULT_SEEDS
