"""The incident scenarios: each, on the virtual fleet, moves the engine signal it names;
and bad scenario files are clear errors."""

from __future__ import annotations

import math
import re

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from alerts import AlertName, Cause
from loadgen.client import _retry_after_seconds
from loadgen.drill import DrillResult
from loadgen.errors import WorkloadError
from loadgen.replicas import bundled_replicas
from loadgen.runner import RunState
from loadgen.scenario import builtin_names, load_scenario, load_scenario_file, parse_scenario

#: What each drill must raise and what triage must conclude (docs/loadgen.md's table).
EXPECTED = {
    "long-prompt-surge": (AlertName.TAIL_LATENCY_INCIDENT, Cause.PREFILL_INTERFERENCE),
    "kv-pressure": (AlertName.KV_SATURATION, Cause.KV_EXHAUSTION),
    "prefix-break": (AlertName.PREFIX_HIT_DROP, Cause.PREFIX_BREAK),
    "overload": (AlertName.QUEUE_GROWTH, Cause.OVERLOAD),
    "scale-out-round-robin": (AlertName.PREFIX_HIT_DROP, Cause.PREFIX_SCATTER),
    "slow-replica": (AlertName.REPLICA_IMBALANCE, Cause.SLOW_REPLICA),
    "adapter-thrash": (AlertName.TAIL_LATENCY_INCIDENT, Cause.ADAPTER_THRASH),
    "cold-start": (AlertName.TAIL_LATENCY_INCIDENT, Cause.COLD_START),
    "structured-truncation": (AlertName.TRUNCATION_RISE, Cause.STRUCTURED_TRUNCATION),
    "output-length-shift": (AlertName.QUEUE_GROWTH, Cause.OUTPUT_LENGTH_SHIFT),
    "noisy-tenant": (AlertName.QUEUE_GROWTH, Cause.NOISY_TENANT),
    "busy-idle-gpu": (AlertName.QUEUE_GROWTH, Cause.BUSY_IDLE_GPU),
    "spec-not-paying": (AlertName.TAIL_LATENCY_INCIDENT, Cause.SPEC_NOT_PAYING),
    "client-gap": (AlertName.CLIENT_GAP, Cause.CLIENT_GAP),
}
REQUIRED = set(EXPECTED)


def test_the_six_required_scenarios_are_built_in_and_complete():
    assert set(builtin_names()) >= REQUIRED
    for name in REQUIRED:
        scenario = load_scenario(name)
        names = [phase.name for phase in scenario.phases]
        assert {"baseline", "perturbation", "recovery"} <= set(names), name
        assert scenario.description and scenario.teaches
        assert (scenario.expects.alert, scenario.expects.triage_cause) == EXPECTED[name]
        compressed = scenario.scaled(scenario.compressed_time_scale)
        # NOTE: every drill runs in the suite; scale-out's warm-up must fill 48 prefix groups
        # on one replica (30 s compressed), so its run is the one longer than 40 s
        longest = 62 if name == "scale-out-round-robin" else 40
        assert sum(p.duration_seconds for p in compressed.phases) <= longest, name


def compressed_run(name: str) -> DrillResult:
    """The scenario's one run of the session on the virtual fleet."""
    from tests.loadgen.drill_runs import drill_report

    return drill_report(name).drill


@pytest.mark.parametrize("name", sorted(REQUIRED))
def test_each_scenario_moves_its_signal(name):
    result = compressed_run(name)
    verdict = result.verdict()
    assert not math.isnan(verdict["baseline"]) and not math.isnan(verdict["perturbation"])
    assert verdict["moved"], {k: verdict[k] for k in ("signal", "factor", "phases", "requests")}
    # NOTE: only a scenario that bounds the queue may refuse (429, load shed); nothing fails
    sheds = "max_waiting_requests" in result.scenario.engine
    assert all(r.succeeded or (sheds and r.status == 429) for r in result.state.results), {
        r.error for r in result.state.results if not r.succeeded
    }


def test_the_engine_itl_signal_is_the_p99_of_the_phase_s_bucket_increase():
    """Δ buckets between the phase's boundary scrapes, summed over replicas, then
    histogram_quantile(0.99): what ``sum by (le) (increase(...[phase]))`` would read."""
    scenario = parse_scenario(
        {**BASE, "expects": {"signal": "engine_itl_p99_ms", "change": "rise"}}, "x"
    )

    def scrape(counts):
        return {
            ("vllm:inter_token_latency_seconds_bucket", frozenset({("le", le)})): float(c)
            for le, c in zip(("0.05", "0.1", "0.5", "+Inf"), counts, strict=True)
        }

    # the baseline: replica 0 adds 50 gaps under 50 ms (it had 100 before); replica 1 adds
    # 98 under 50 ms and 2 between 100 and 500 ms
    scrapes = [
        [scrape((100, 100, 100, 100)), scrape((0, 0, 0, 0))],
        [scrape((150, 150, 150, 150)), scrape((98, 98, 100, 100))],
        [scrape((150, 150, 150, 150)), scrape((98, 98, 100, 100))],
    ]
    result = DrillResult(
        scenario,
        ["http://a", "http://b"],
        RunState(),
        [("baseline", 0.0, 1.0), ("perturbation", 1.0, 2.0)],
        scrapes,
    )
    # 148 fast + 2 slow: rank 0.99 × 150 = 148.5 sits in (0.1, 0.5], 0.5 of its 2 gaps in
    assert result.signal("baseline") == pytest.approx((0.1 + 0.4 * 0.5 / 2) * 1000)
    assert math.isnan(result.signal("perturbation"))  # no gaps: no quantile, not 0


def test_overload_sheds_load_in_the_perturbation_and_recovers():
    result = compressed_run("overload")
    requests = result.verdict()["requests"]
    assert requests["baseline"]["num_429"] == 0, requests
    shed = requests["perturbation"]
    assert shed["num_429"] > 0 and shed["num_succeeded"] > 0, requests
    assert shed["num_429"] + shed["num_succeeded"] == shed["num_scheduled"]  # none lost
    refused = [r for r in result.state.results if r.status == 429]
    assert all(r.error == "max_num_queued_reqs" for r in refused)
    assert all(r.retry_after_seconds is not None and r.retry_after_seconds >= 1 for r in refused)
    # recovery: what the queue held at the switch drains (a few refusals at most, bounded
    # by max_waiting_requests worth of arrivals), then every request is served again
    recovery = result.phase_results("recovery")
    assert requests["recovery"]["num_429"] <= result.scenario.engine["max_waiting_requests"]
    assert recovery and recovery[-1].succeeded


def _write(tmp_path, document) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(document))
    return str(path)


BASE = {
    "name": "x",
    "description": "d",
    "teaches": "t",
    "workloads": [{"name": "chat", "rate": 1}],
    "phases": [{"name": "baseline", "duration": 1}, {"name": "perturbation", "duration": 1}],
    "expects": {"signal": "preemptions", "change": "rise"},
}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"expects": {"signal": "vibes", "change": "rise"}}, "expects.signal"),
        ({"phases": [{"name": "baseline", "duration": 1}]}, "'perturbation'"),
        ({"phases": [{"name": "baseline", "duration": 0}]}, "phases[0].duration"),
        ({"routing": "random"}, "routing"),
        (
            {"expects": {"signal": "preemptions", "change": "rise", "alert": "kv-pressure"}},
            "expects.alert: must be one of ['slo-burn-rate', ",
        ),
        (
            {"expects": {"signal": "preemptions", "change": "rise", "triage_cause": "KV full"}},
            "expects.triage_cause: must be one of ['prefill-interference', ",
        ),
        ({"expects": {"signal": "preemptions", "change": "rise", "alert": 3}}, "got 3"),
        ({"expects": ["preemptions"]}, "expects: must be a mapping"),
        (
            {"expects": {"signal": "engine_itl_p99_ms", "change": "rise", "stream": "chat"}},
            "expects.stream: engine_itl_p99_ms is read from the engines' /metrics",
        ),
        ({"workloads": [{"name": "chat", "rate": -2}]}, "arrivals.rate"),
        (
            {
                "phases": [
                    {"name": "baseline", "duration": 1},
                    {"name": "perturbation", "duration": 1, "change": {"batch": {}}},
                ]
            },
            "no workload named 'batch'",
        ),
        (
            {
                "phases": [
                    {"name": "baseline", "duration": 1},
                    {
                        "name": "perturbation",
                        "duration": 1,
                        "admin": [{"replica": 3, "patch": {"max_num_seqs": 1}}],
                    },
                ]
            },
            "admin[0].replica",
        ),
    ],
)
def test_a_bad_scenario_names_what_is_wrong(tmp_path, change, message):
    with pytest.raises(WorkloadError) as caught:
        load_scenario_file(_write(tmp_path, {**BASE, **change}))
    assert message in str(caught.value)


def test_an_unknown_scenario_lists_the_built_in_ones():
    with pytest.raises(WorkloadError, match="prefix-break"):
        load_scenario("no-such-scenario")


def test_scenario_cli_lists_the_catalogue_and_rejects_an_unknown_name():
    from typer.testing import CliRunner

    from tailwatch.cli import app

    listed = CliRunner().invoke(app, ["scenario", "list"])
    assert listed.exit_code == 0
    assert {line.split()[0] for line in listed.output.splitlines()} >= REQUIRED
    unknown = CliRunner().invoke(app, ["scenario", "run", "no-such-scenario"])
    assert unknown.exit_code == 2
    assert "no scenario 'no-such-scenario'" in unknown.output


@pytest.mark.parametrize(
    ("engine", "message"),
    [
        ({"model": "tiny", "max_waiting_request": 8}, "engine.max_waiting_request: is not an"),
        ({"model": "tiny", "max_waiting_requests": 0}, "max_waiting_requests=0"),
        ({"model": "tiny", "max_concurrency_per_tenant": True}, "max_concurrency_per_tenant"),
    ],
)
def test_a_bad_engine_knob_is_named_before_any_replica_serves(engine, message):
    with pytest.raises(WorkloadError, match=re.escape(message)), bundled_replicas(1, engine):
        pytest.fail("a replica started")


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.none(), st.text(max_size=12), st.floats().map(str), st.integers().map(str)))
def test_retry_after_is_recorded_as_seconds_or_none_never_a_guess(header):
    seconds = _retry_after_seconds(header)
    if seconds is not None:
        assert math.isfinite(seconds) and seconds >= 0 and seconds == float(header)


def test_retry_after_forms():
    assert _retry_after_seconds("3") == 3.0
    assert _retry_after_seconds(" 0 ") == 0.0
    assert _retry_after_seconds("Wed, 21 Oct 2015 07:28:00 GMT") is None  # HTTP-date: not ours
    assert _retry_after_seconds("-1") is None
    assert _retry_after_seconds("inf") is None


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["alert", "triage_cause"]),
    st.one_of(st.text(max_size=30), st.integers(), st.floats(), st.lists(st.text(max_size=3))),
)
def test_any_expects_name_outside_the_vocabulary_is_refused_naming_the_field(key, value):
    allowed = {n.value for n in (AlertName if key == "alert" else Cause)}
    expects = {"signal": "preemptions", "change": "rise", key: value}
    if isinstance(value, str) and value in allowed:
        assert getattr(parse_scenario({**BASE, "expects": expects}, "s").expects, key) == value
        return
    with pytest.raises(WorkloadError) as caught:
        parse_scenario({**BASE, "expects": expects}, "s")
    assert caught.value.field == f"s.expects.{key}"
