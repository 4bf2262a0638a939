"""``tailwatch scenario generate``: the files it writes are the generator's and load as
scenarios; any seed, count or kinds either writes them or is one ``error:`` line, exit 2,
with nothing written; and a generated scenario runs on the virtual fleet."""

from __future__ import annotations

import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from loadgen.generate import KINDS, MAX_COUNT, generate
from loadgen.generate.write import scenario_yaml
from loadgen.scenario import load_scenario_file
from loadgen.virtual.drill import VirtualTiming, run_virtual_drill
from tailwatch.cli import app

runner = CliRunner()


def _generate(*args: str):
    return runner.invoke(app, ["scenario", "generate", *args], env={"COLUMNS": "200"})


def test_it_writes_the_generators_files_and_prints_a_line_each(tmp_path):
    out = tmp_path / "gen"
    result = _generate("--seed", "7", "--count", "3", "--output-dir", str(out))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    for line, mapping in zip(lines, generate(7, 3), strict=True):
        path = out / f"{mapping['name']}.yaml"
        assert line.split()[:2] == [str(path), mapping["generated"]["kind"]]
        assert f"replicas {mapping['replicas']}" in line and mapping["engine"]["model"] in line
        assert path.read_text(encoding="utf-8") == scenario_yaml(mapping)
        assert load_scenario_file(path).generated == mapping["generated"]


def _one_error_line(result) -> None:
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr


KIND_TEXT = st.one_of(
    st.just(""),
    st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=3).map(",".join),
    st.text(min_size=1, max_size=30).filter(lambda s: "\x00" not in s),
)
COUNTS = st.one_of(
    st.integers(min_value=-(10**20), max_value=0),
    st.integers(min_value=1, max_value=3),
    st.integers(min_value=MAX_COUNT + 1, max_value=10**20),
)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    seed=st.integers(min_value=-(10**40), max_value=10**40),
    count=COUNTS,
    kinds=KIND_TEXT,
    share=st.one_of(st.floats(min_value=0, max_value=1), st.floats(allow_nan=True)),
)
def test_any_arguments_write_the_files_or_are_one_error_line(tmp_path, seed, count, kinds, share):
    out = tmp_path / f"out-{time.monotonic_ns()}"
    args = ["--seed", str(seed), "--count", str(count), "--benign-share", str(share)]
    result = _generate(*args, "--kinds", kinds, "--output-dir", str(out))
    if result.exit_code == 0:
        assert len(result.stdout.splitlines()) == count == len(list(out.glob("*.yaml")))
    else:
        _one_error_line(result)
        assert not out.exists()


def test_an_unwritable_folder_is_one_error_line_and_nothing_written(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    result = _generate("--seed", "1", "--count", "2", "--output-dir", str(blocker / "gen"))
    _one_error_line(result)
    assert f"error: --output-dir {blocker / 'gen'}: cannot write" in result.stderr
    result = _generate("--seed", "1", "--count", "0", "--output-dir", str(tmp_path / "x"))
    _one_error_line(result)
    assert result.stderr.startswith("error: --count: must be an integer from 1 to 10000")
    result = _generate("--seed", "1", "--count", "1", "--kinds", "overload,meltdown")
    _one_error_line(result)
    assert "error: --kinds: unknown kind 'meltdown'" in result.stderr


def _smallest(kind: str, timing: VirtualTiming) -> dict:
    """The first seed's ``kind`` with two replicas: the cheapest fleet to simulate."""
    return next(
        m for seed in range(200) for m in generate(seed, 1, [kind], timing) if m["replicas"] == 2
    )


def test_generated_scenarios_run_on_the_virtual_fleet(tmp_path):
    """Two generated scenarios (an incident and a restart) end to end, timed for short
    windows so the test stays small; what the alert rules make of them is the detection
    benchmark's to measure, not this test's."""
    timing = VirtualTiming(window_scale=0.02, settle_seconds=3.0)
    for mapping in (_smallest("overload", timing), _smallest("replica-restart", timing)):
        path = Path(tmp_path / f"{mapping['name']}.yaml")
        path.write_text(scenario_yaml(mapping), encoding="utf-8")
        scenario = load_scenario_file(path)
        drill = run_virtual_drill(scenario, timing)
        verdict = drill.report.drill.verdict()
        assert set(verdict["phases"]) == {p.name for p in scenario.phases}
        counts = verdict["requests"]
        baseline = counts["baseline"]
        assert (
            baseline["num_429"] == 0 and baseline["num_succeeded"] > 0.8 * baseline["num_scheduled"]
        )
        assert sum(c["num_scheduled"] for c in counts.values()) == drill.num_requests
        assert drill.virtual_seconds >= sum(p.duration_seconds for p in scenario.phases)
