"""SLOs proposed from a stored window (``collectors.slo_proposals``): per model, a TTFT and an
ITL objective summed over the model's targets; the YAML loads as ``tailwatch.yaml``; what
cannot be proposed is in the report with its reason. On the in-memory reader, whose
agreement with the SQL store ``test_reader_contract.py`` proves."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import yaml

from collectors import canonical as c
from collectors.slo_proposals import (
    ProposalError,
    latency_models,
    proposals_yaml,
    propose_slos,
)
from collectors.store.fake import FakeMetricsReader
from slo import LatencyIndicator, LatencyMetric, Selector
from tailwatch.config import parse_config
from tests.collectors.latency_store import (
    INTERVAL_SECONDS,
    ITL_BOUNDS,
    ITL_STEP,
    START,
    TTFT_BOUNDS,
    TTFT_STEP,
    per_bucket,
    scrapes,
)

BOTH = {c.TTFT_SECONDS: TTFT_STEP, c.ITL_SECONDS: ITL_STEP}
#: 40 intervals after the first scrape: the window's histograms are 40 steps' worth.
END = START + 40 * INTERVAL_SECONDS


def _reader(*groups: list) -> FakeMetricsReader:
    return FakeMetricsReader([record for group in groups for record in group])


def test_each_model_gets_a_ttft_and_an_itl_slo_summed_over_its_replicas() -> None:
    reader = _reader(
        scrapes("replica-0", "tiny", 41, BOTH),
        scrapes("replica-1", "tiny", 41, BOTH),
        scrapes("big-0", "llama-3-8b", 41, BOTH),
    )
    report = propose_slos(reader, START, END)
    assert [(i.name, i.model, i.metric) for i in report.indicators] == [
        ("llama-3-8b-ttft", "llama-3-8b", LatencyMetric.TTFT),
        ("llama-3-8b-itl", "llama-3-8b", LatencyMetric.ITL),
        ("tiny-ttft", "tiny", LatencyMetric.TTFT),
        ("tiny-itl", "tiny", LatencyMetric.ITL),
    ]
    tiny_ttft = report.indicators[2].proposal
    # 2 replicas x 40 steps x 1000 first tokens, 99.8 % of them within 0.25 s.
    assert tiny_ttft is not None and tiny_ttft.num_observations == 80_000
    assert (tiny_ttft.threshold_seconds, tiny_ttft.target) == (0.25, 0.99)
    assert tiny_ttft.attainment == 0.998
    tiny_itl = report.indicators[3].proposal
    assert tiny_itl is not None and tiny_itl.num_observations == 80_000
    assert (tiny_itl.threshold_seconds, tiny_itl.target) == (0.05, 0.99)


def test_the_yaml_loads_as_tailwatch_yaml_with_a_comment_per_slo() -> None:
    reader = _reader(scrapes("replica-0", "tiny", 41, BOTH))
    text = proposals_yaml(propose_slos(reader, START, END))
    config = parse_config(yaml.safe_load(text))
    by_name = {spec.name: spec for spec in config.slos}
    assert sorted(by_name) == ["tiny-itl", "tiny-ttft"]
    ttft = by_name["tiny-ttft"]
    assert ttft.indicator == LatencyIndicator(LatencyMetric.TTFT, 0.25)
    assert ttft.selector == Selector(model="tiny")
    assert (ttft.target, ttft.period_days) == (0.99, 28)
    # Each SLO gets its burn-rate rules from the same file.
    burn = {r.name for r in config.alerts.rules if r.name.startswith("slo-burn-rate:")}
    assert "slo-burn-rate:tiny-ttft:page" in burn and "slo-burn-rate:tiny-itl:ticket" in burn
    comments = [line.strip() for line in text.splitlines() if line.strip().startswith("# tiny")]
    assert comments == [
        "# tiny-ttft: 99.80% of 40,000 observations at or below 0.25 s in the window "
        "(95% lower bound 99.76%; p99 0.238 s)",
        "# tiny-itl: 99.80% of 40,000 observations at or below 0.05 s in the window "
        "(95% lower bound 99.76%; p99 0.048 s)",
    ]
    assert "2026-01-01T00:00:00.000Z" in text and "2026-01-01T00:10:00.000Z" in text


def test_model_selects_one_and_an_unknown_one_names_the_stored_ones() -> None:
    reader = _reader(scrapes("a", "tiny", 41, BOTH), scrapes("b", "llama", 41, BOTH))
    report = propose_slos(reader, START, END, model="llama")
    assert {i.model for i in report.indicators} == {"llama"}
    with pytest.raises(ProposalError, match=r"'nope'.*llama, tiny"):
        propose_slos(reader, START, END, model="nope")


@pytest.mark.parametrize(
    ("start", "end", "words"),
    [
        (END + 60, END + 3600, "no TTFT or ITL observations"),  # after the traffic
        (START - 3600, START, "no TTFT or ITL observations"),  # before it
        (END, START, "must end after it starts"),
        (START, START, "must end after it starts"),
    ],
)
def test_an_empty_or_inverted_window_is_an_error(start, end, words) -> None:
    reader = _reader(scrapes("a", "tiny", 41, BOTH))
    with pytest.raises(ProposalError, match=words):
        propose_slos(reader, start, end)


def test_a_store_without_latency_series_is_an_error_saying_so() -> None:
    with pytest.raises(ProposalError, match="no ttft_seconds or itl_seconds series"):
        propose_slos(FakeMetricsReader(), START, END)


def test_too_few_observations_and_a_p99_in_inf_are_reported_not_proposed() -> None:
    few_ttft = per_bucket(TTFT_BOUNDS, {0.1: 1})  # 40 first tokens in the window
    slow_itl = per_bucket(ITL_BOUNDS, {0.05: 90, math.inf: 10})  # 10 % past the last edge
    reader = _reader(scrapes("a", "tiny", 41, {c.TTFT_SECONDS: few_ttft, c.ITL_SECONDS: slow_itl}))
    report = propose_slos(reader, START, END)
    assert report.proposed == ()
    ttft, itl = report.indicators
    assert ttft.is_short_of_data and "40 observations" in ttft.reason
    assert not itl.is_short_of_data and "beyond the last finite bucket" in itl.reason
    text = proposals_yaml(report)
    assert parse_config(yaml.safe_load(text)).slos == ()  # `slos: []`, with the reasons
    assert "# tiny-ttft: no proposal: 40 observations" in text


def test_series_without_a_model_label_get_one_fleet_wide_slo_per_latency() -> None:
    reader = _reader(scrapes("a", "", 41, BOTH))  # an empty label is no label
    assert latency_models(reader) == []
    report = propose_slos(reader, START, END)
    assert [(i.name, i.model) for i in report.indicators] == [("ttft", None), ("itl", None)]
    spec = parse_config(yaml.safe_load(proposals_yaml(report))).slos[0]
    assert spec.selector == Selector()


def test_model_names_become_valid_unique_slo_names_and_hostile_ones_stay_data() -> None:
    hostile = "evil\n# slos: []\nmodel"
    reader = _reader(
        scrapes("a", "meta-llama/Llama-3.1-8B", 41, BOTH),
        scrapes("b", "meta-llama Llama-3.1-8B", 41, BOTH),
        scrapes("c", hostile, 41, BOTH),
    )
    report = propose_slos(reader, START, END)
    text = proposals_yaml(report)
    specs = parse_config(yaml.safe_load(text)).slos
    names = [s.name for s in specs]
    assert len(set(names)) == len(names) == 6
    assert "meta-llama-Llama-3.1-8B-ttft" in names and "meta-llama-Llama-3.1-8B-ttft-2" in names
    assert {s.selector.model for s in specs} == {
        "meta-llama/Llama-3.1-8B",
        "meta-llama Llama-3.1-8B",
        hostile,
    }


def test_series_whose_layouts_differ_are_that_models_reason_not_a_failure() -> None:
    odd_layout = (0.5, 1.0, math.inf)
    odd = [  # the same model on a replica whose ITL histogram has other buckets
        replace(
            record,
            histograms=tuple(
                replace(h, upper_bounds=odd_layout, cumulative_counts=(h.count,) * 3)
                for h in record.histograms
            ),
        )
        for record in scrapes("b", "tiny", 41, {c.ITL_SECONDS: ITL_STEP})
    ]
    reader = _reader(scrapes("a", "tiny", 41, BOTH), scrapes("ok", "llama", 41, BOTH), odd)
    report = propose_slos(reader, START, END)
    tiny_itl = next(i for i in report.indicators if i.name == "tiny-itl")
    assert tiny_itl.proposal is None and not tiny_itl.is_short_of_data
    assert "layout" in tiny_itl.reason or "bounds" in tiny_itl.reason, tiny_itl.reason
    assert {i.name for i in report.proposed} == {"llama-ttft", "llama-itl", "tiny-ttft"}
