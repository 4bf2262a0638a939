"""The workload and its schedule: pure, no server."""

from __future__ import annotations

import itertools
import json
import random
import statistics

import pytest

from loadgen import Arrivals, WorkloadError, build_schedule, load_replay, parse_workload
from loadgen.routing import Router
from loadgen.workload import SALT_TOKENS


def test_the_same_seed_gives_the_same_schedule_and_another_seed_does_not():
    raw = {
        "rate": 20,
        "duration": 5,
        "prompt_tokens": {"kind": "uniform", "min": 8, "max": 64},
        "tenants": {"a": 1, "b": 3},
        "priorities": {0: 1, 5: 1},
        "seed": 7,
    }
    first = build_schedule([parse_workload(raw)])
    assert first == build_schedule([parse_workload(raw)])
    assert first != build_schedule([parse_workload({**raw, "seed": 8})])
    assert [r.index for r in first] == list(range(len(first)))
    assert all(a.at_seconds <= b.at_seconds for a, b in itertools.pairwise(first))


@pytest.mark.parametrize(
    ("kind", "burstiness", "cv_low", "cv_high"),
    [("poisson", 1.0, 0.85, 1.15), ("gamma", 0.25, 1.6, 2.4), ("constant", 1.0, 0.0, 1e-9)],
)
def test_arrivals_have_the_rate_and_the_burstiness_asked_for(kind, burstiness, cv_low, cv_high):
    times = Arrivals(kind, 50.0, burstiness).times(200.0, random.Random(1))
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(times) / 200.0 == pytest.approx(50.0, rel=0.05)
    # coefficient of variation of a gamma(k) gap is 1/sqrt(k): 1 Poisson, 2 at k=0.25
    cv = statistics.pstdev(gaps) / statistics.mean(gaps)
    assert cv_low <= cv <= cv_high


def test_lengths_tenants_and_prefix_groups_follow_the_spec():
    raw = {
        "rate": 100,
        "duration": 10,
        "prompt_tokens": 40,
        "output_tokens": 5,
        "tenants": {"a": 1, "b": 3},
        "prefix": {"groups": 3, "share": 0.5, "tokens": 24},
    }
    schedule = build_schedule([parse_workload(raw)])
    assert {len(r.prompt_token_ids) for r in schedule} == {40}
    assert {r.max_tokens for r in schedule} == {5}
    share_b = sum(r.tenant == "b" for r in schedule) / len(schedule)
    assert share_b == pytest.approx(0.75, abs=0.05)
    grouped = [r for r in schedule if r.prefix_group is not None]
    assert len(grouped) / len(schedule) == pytest.approx(0.5, abs=0.06)
    for group in range(3):
        heads = {r.prompt_token_ids[:24] for r in grouped if r.prefix_group == group}
        assert len(heads) == 1
    assert len({r.prompt_token_ids[:24] for r in grouped}) == 3


def test_a_salted_prefix_differs_from_the_first_token_on():
    raw = {
        "rate": 50,
        "duration": 2,
        "prompt_tokens": 64,
        "prefix": {"groups": 1, "tokens": 40, "salt_per_request": True},
    }
    schedule = build_schedule([parse_workload(raw)])
    assert len({r.prompt_token_ids[:SALT_TOKENS] for r in schedule}) == len(schedule)
    assert len({r.prompt_token_ids[SALT_TOKENS : SALT_TOKENS + 40] for r in schedule}) == 1


@pytest.mark.parametrize(
    ("raw", "field", "value"),
    [
        ({"rate": 0}, "arrivals.rate", "0"),
        ({"arrivals": "pareto"}, "arrivals.kind", "pareto"),
        ({"arrivals": "gamma", "burstiness": -1}, "arrivals.burstiness", "-1"),
        ({"prompt_tokens": 0}, "workload.prompt_tokens", "0"),
        (
            {"prompt_tokens": {"kind": "uniform", "min": 10, "max": 5}},
            "workload.prompt_tokens",
            "5",
        ),
        (
            {"output_tokens": {"kind": "lognormal", "median": 10, "max": 50}},
            "workload.output_tokens",
            "sigma",
        ),
        (
            {"output_tokens": {"kind": "lognormal", "median": 10, "sigma": 0, "max": 9}},
            "output_tokens.sigma",
            "0",
        ),
        ({"prefix": {"groups": 2, "share": 1.5, "tokens": 8}}, "prefix.share", "1.5"),
        ({"tenants": {"a": 0}}, "tenants.a", "0"),
        ({"rat": 3}, "workload", "rat"),
    ],
)
def test_bad_parameters_name_the_field_and_the_value(raw, field, value):
    with pytest.raises(WorkloadError) as caught:
        parse_workload(raw)
    assert field in str(caught.value)
    assert value in str(caught.value)


def test_replay_draws_the_recorded_pairs(tmp_path):
    path = tmp_path / "trace.jsonl"
    rows = [{"prompt_tokens": 11, "output_tokens": 3}, {"prompt_tokens": 50, "output_tokens": 1}]
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    schedule = build_schedule([parse_workload({"rate": 50, "duration": 2, "replay": str(path)})])
    pairs = {(len(r.prompt_token_ids), r.max_tokens) for r in schedule}
    assert pairs == {(11, 3), (50, 1)}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"prompt_tokens": 5, "output_tokens": 2}\nnot json\n', ":2"),
        ('{"prompt_tokens": 5}\n', ":1.output_tokens"),
        ('{"prompt_tokens": -3, "output_tokens": 2}\n', "-3"),
        ("[1, 2]\n", "JSON object"),
        ("\n", "no (prompt_tokens, output_tokens) pairs"),
    ],
)
def test_a_malformed_replay_file_says_where(tmp_path, text, expected):
    path = tmp_path / "bad.jsonl"
    path.write_text(text)
    with pytest.raises(WorkloadError, match="replay") as caught:
        load_replay(path)
    assert expected in str(caught.value)


def test_routing_policies():
    schedule = build_schedule(
        [
            parse_workload(
                {
                    "rate": 50,
                    "duration": 1,
                    "prefix": {"groups": 4, "tokens": 8},
                    "prompt_tokens": 16,
                }
            )
        ]
    )
    rr = Router(["a", "b", "c"])
    assert [rr.pick(r) for r in schedule[:6]] == [0, 1, 2, 0, 1, 2]
    least = Router(["a", "b"], "least-outstanding")
    least.started(0)
    assert least.pick(schedule[0]) == 1
    affinity = Router(["a", "b", "c"], "prefix-affinity")
    by_group: dict[int, set[int]] = {}
    for r in schedule:
        by_group.setdefault(r.prefix_group, set()).add(affinity.pick(r))
    assert all(len(replicas) == 1 for replicas in by_group.values())
    with pytest.raises(WorkloadError, match="routing"):
        Router(["a"], "random")


def test_models_are_drawn_by_weight_and_a_workload_without_them_keeps_its_schedule():
    spec = {"rate": 50, "duration": 20, "seed": 3, "prompt_tokens": 16, "output_tokens": 4}
    plain = build_schedule([parse_workload(spec)])
    mixed = build_schedule([parse_workload({**spec, "models": {"hot": 3, "rare": 1}})])
    assert {r.model for r in plain} == {None}
    counts = {m: sum(r.model == m for r in mixed) for m in ("hot", "rare")}
    assert sum(counts.values()) == len(mixed) and 2.0 < counts["hot"] / counts["rare"] < 4.5
    # NOTE: the model is drawn last, so the arrivals and prompts before it are the plain ones'
    assert [r.at_seconds for r in mixed[:5]] == [r.at_seconds for r in plain[:5]]
    assert mixed[0].prompt_token_ids == plain[0].prompt_token_ids
    with pytest.raises(WorkloadError, match=r"models\.rare"):
        parse_workload({**spec, "models": {"rare": 0}})
