"""``tailwatch up`` with no SLOs configured (``tailwatch.up_slos``): the decision to propose,
wait or give up, the configuration rewrite, the store's history adopted at once, the
calibration on a seeded store at given times (no sleeping), the collector restarted in its
place, and the demo's first baseline lengthened for it."""

from __future__ import annotations

import asyncio
import re
import sys
import time
from pathlib import Path

import pytest
import yaml

from collectors import canonical as c
from collectors.config import ConfigError
from collectors.slo_proposals import IndicatorProposal, ProposalReport
from collectors.store import Store, sqlite_url
from loadgen.replay_options import parse_time
from slo import LatencyMetric, LatencyProposal
from tailwatch import up_demo
from tailwatch.config import load_config, parse_config
from tailwatch.processes import Stack
from tailwatch.up import UpOptions, collector_config
from tailwatch.up_demo import (
    CALIBRATION_BASELINE_SECONDS,
    CYCLE_ENV,
    SETTLE_AFTER_CALIBRATION_SECONDS,
    Demo,
    first_baseline_left,
)
from tailwatch.up_slos import (
    HISTORY_SECONDS,
    CalibrationPlan,
    OwnSLOs,
    Verdict,
    calibration_verdict,
    config_text,
    copied_config,
    has_slos,
    history_report,
    write_atomically,
)
from tests.collectors.latency_store import (
    INTERVAL_SECONDS,
    ITL_STEP,
    START,
    TTFT_BOUNDS,
    TTFT_STEP,
    per_bucket,
    scrapes,
)

BOTH = {c.TTFT_SECONDS: TTFT_STEP, c.ITL_SECONDS: ITL_STEP}
URLS = ["http://127.0.0.1:8000"]


def _indicator(name: str, *, proposed: bool, short: bool = False) -> IndicatorProposal:
    proposal = LatencyProposal(0.25, 0.99, 0.998, 0.997, 1000.0, 0.99, 0.2) if proposed else None
    reason = "" if proposed else ("40 observations" if short else "p99 beyond the last bucket")
    return IndicatorProposal(name, "tiny", LatencyMetric.TTFT, proposal, reason, 1000.0, short)


def _report(*indicators: IndicatorProposal) -> ProposalReport:
    return ProposalReport(START, START + 60, 0.005, indicators)


DEMO = CalibrationPlan.for_demo(START, 90.0)
LIVE = CalibrationPlan.for_live_traffic(START)
BOTH_PROPOSED = _report(_indicator("a", proposed=True), _indicator("b", proposed=True))
ONE_SHORT = _report(_indicator("a", proposed=True), _indicator("b", proposed=False, short=True))
ONE_REFUSED = _report(_indicator("a", proposed=True), _indicator("b", proposed=False))
NONE_PROPOSED = _report(_indicator("a", proposed=False, short=True))


@pytest.mark.parametrize(
    ("report", "now", "plan", "verdict"),
    [
        # Everything proposed (or refused for good): propose at once, window open or not.
        (BOTH_PROPOSED, START + 30, DEMO, Verdict.PROPOSE),
        (ONE_REFUSED, START + 30, LIVE, Verdict.PROPOSE),
        # One latency still short of observations: wait while the window is open ...
        (ONE_SHORT, START + 30, DEMO, Verdict.WAIT),
        (ONE_SHORT, START + 30, LIVE, Verdict.WAIT),
        # ... and once it closed, propose what there is.
        (ONE_SHORT, START + 90, DEMO, Verdict.PROPOSE),
        (ONE_SHORT, START + 600, LIVE, Verdict.PROPOSE),
        # Nothing to propose: the demo gives up when its clean window ends (drills follow);
        # live traffic keeps waiting, over the last hour, for traffic to come.
        (None, START + 30, DEMO, Verdict.WAIT),
        (None, START + 90, DEMO, Verdict.GIVE_UP),
        (NONE_PROPOSED, START + 90, DEMO, Verdict.GIVE_UP),
        (None, START + 10_000, LIVE, Verdict.WAIT),
        (NONE_PROPOSED, START + 10_000, LIVE, Verdict.WAIT),
    ],
)
def test_the_verdict_waits_for_every_latency_until_the_window_closes(
    report, now, plan, verdict
) -> None:
    assert calibration_verdict(report, now, plan) is verdict


def test_the_demo_window_ends_before_the_first_drill_and_a_live_one_slides() -> None:
    assert DEMO.window(START + 30) == (START, START + 30)
    assert DEMO.window(START + 500) == (START, START + 90)  # never into the perturbation
    assert LIVE.window(START + 30) == (START, START + 30)
    later = START + 5 * HISTORY_SECONDS
    assert LIVE.window(later) == (later - HISTORY_SECONDS, later)


@pytest.mark.parametrize(
    ("config", "expected"),
    [({}, False), ({"slos": None}, False), ({"slos": []}, True), ({"slos": [{}]}, True)],
)
def test_only_a_missing_slos_section_asks_for_proposals(config, expected) -> None:
    assert has_slos(config) is expected


# -- the configuration rewrite -----------------------------------------------------------------


@pytest.fixture(scope="module")
def seeded(tmp_path_factory) -> str:
    """``tiny`` on two replicas, 40 scrape intervals of traffic from START."""
    url = sqlite_url(tmp_path_factory.mktemp("up-slos") / "store.db")
    store = Store(url)
    assert all(
        store.write_scrapes([*scrapes("r0", "tiny", 41, BOTH), *scrapes("r1", "tiny", 41, BOTH)])
    )
    store.close()
    return url


END = START + 40 * INTERVAL_SECONDS


def test_the_rewritten_config_keeps_everything_and_adds_the_commented_slos(seeded, tmp_path):
    mapping = collector_config(UpOptions(demo=True), URLS, seeded)
    report = history_report(seeded, END)  # the seeded traffic is within the hour before END
    assert report is not None
    text = config_text({**mapping, "slos": [{"stale": 1}]}, "written by\ntailwatch up", report)
    assert text.startswith("# written by\n# tailwatch up\n")
    assert "# tiny-ttft: 99.80% of 80,000 observations" in text
    path = tmp_path / "up.yaml"
    write_atomically(path, text)
    assert [p.name for p in tmp_path.iterdir()] == ["up.yaml"]  # no temporary file left
    config = load_config(path)
    assert [spec.name for spec in config.slos] == ["tiny-ttft", "tiny-itl"]
    assert config.alerts.window_scale == 0.05  # the demo clock is kept
    assert [t.url for t in config.collector.targets] == [f"{URLS[0]}/metrics"]
    assert {f"slo-burn-rate:{s.name}:page" for s in config.slos} <= {
        r.name for r in config.alerts.rules
    }


def test_a_config_that_would_not_load_is_never_written(seeded) -> None:
    with pytest.raises(ConfigError):
        config_text({"collector": {"scrape_interval_seconds": -1}}, "header", None)


def test_a_copied_config_still_finds_its_targets_file(tmp_path) -> None:
    folder = tmp_path / "conf"
    folder.mkdir()
    (folder / "targets.yaml").write_text("- targets: ['127.0.0.1:8000']\n")
    user = folder / "tailwatch.yaml"
    user.write_text("collector:\n  targets_file: targets.yaml\n")
    copy = copied_config(user)
    assert copy["collector"]["targets_file"] == str((folder / "targets.yaml").resolve())
    (tmp_path / "elsewhere").mkdir()
    moved = tmp_path / "elsewhere" / "up.yaml"
    moved.write_text(config_text(copy, "copy", None))
    assert load_config(moved).collector.targets_file == (folder / "targets.yaml").resolve()
    user.write_text("collector:\n  targets_file: /abs/targets.yaml\n")
    assert copied_config(user)["collector"]["targets_file"] == "/abs/targets.yaml"


def test_history_is_adopted_only_when_it_proposes_something(seeded, tmp_path) -> None:
    assert history_report(seeded, END + 2 * HISTORY_SECONDS) is None  # too old
    assert history_report(sqlite_url(tmp_path / "new.db"), END) is None  # no schema yet
    assert history_report("nosuchdriver://x", END) is None
    lines: list[str] = []
    own = OwnSLOs(tmp_path / "up.yaml", collector_config(UpOptions(), URLS, seeded), "h")
    assert load_config(own.path).slos == ()  # written at once, without SLOs
    assert own.adopt_history(seeded, END, lines.append)
    assert [s.name for s in load_config(own.path).slos] == ["tiny-ttft", "tiny-itl"]
    (line,) = lines
    assert line.startswith("SLOs proposed from the store's last hour (")
    assert "tiny-ttft (ttft <= 0.25 s, target 0.99), tiny-itl (itl <= 0.05 s, target 0.99)" in line
    assert "proposals to review" in line and "tailwatch slo propose --from" in line
    # the command to copy names the window as times a person reads, and it parses back
    hint = re.search(r"tailwatch slo propose --from (\S+) --to (\S+)`", line)
    assert hint is not None, line
    for text in hint.groups():
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", text), text
    assert parse_time("--to", hint.group(2), 0.0) == round(END)


def test_a_calibration_proposes_once_every_latency_has_enough_observations(seeded, tmp_path):
    lines: list[str] = []
    own = OwnSLOs(tmp_path / "up.yaml", collector_config(UpOptions(), URLS, seeded), "h")
    own.start(START, None, seeded, lines.append)
    assert lines == [
        "no SLOs configured: proposing TTFT and ITL SLOs once the store holds enough "
        "observations (checked every 15 s)"
    ]
    assert not own.poll(START + 14, lines.append)  # before the first check: nothing read
    assert load_config(own.path).slos == ()
    # One scrape interval: 2,000 first tokens and 2,000 gaps, enough for both latencies.
    assert own.calibrating
    assert own.poll(START + 15, lines.append)  # written: the caller restarts the collector
    assert not own.calibrating
    assert [s.name for s in load_config(own.path).slos] == ["tiny-ttft", "tiny-itl"]
    assert lines[-1].startswith("SLOs proposed from the traffic since the stack came up")
    assert not own.poll(START + 600, lines.append)  # once only


def test_a_demo_calibration_with_too_little_traffic_gives_up_saying_why(tmp_path) -> None:
    url = sqlite_url(tmp_path / "rare.db")
    store = Store(url)
    few = {c.TTFT_SECONDS: per_bucket(TTFT_BOUNDS, {0.1: 1}), c.ITL_SECONDS: [0] * 20}
    assert all(store.write_scrapes(scrapes("r0", "tiny", 7, few)))  # 6 first tokens
    store.close()
    lines: list[str] = []
    own = OwnSLOs(tmp_path / "up.yaml", collector_config(UpOptions(demo=True), URLS, url), "h")
    own.start(START, 90.0, url, lines.append)
    assert "before its first drill, which waits for them (at most 90 s)" in lines[0]
    assert not own.poll(START + 30, lines.append)  # waiting: too few, window open
    assert own.calibrating
    assert not own.poll(START + 91, lines.append)  # closed with nothing: gives up
    assert not own.calibrating  # the demo's first drill may start
    assert lines[-1].startswith("no SLOs proposed from the demo's traffic before its first drill: ")
    assert "tiny-ttft: 6 observations in the window" in lines[-1]
    assert load_config(own.path).slos == ()
    assert not own.poll(START + 200, lines.append) and len(lines) == 2


def test_the_config_up_runs_on_when_the_given_one_has_no_slos(seeded, tmp_path, monkeypatch):
    from tailwatch import up

    monkeypatch.chdir(tmp_path)
    lines: list[str] = []
    with_slos = tmp_path / "with.yaml"
    with_slos.write_text("slos: []\n")
    assert up._config(UpOptions(config=with_slos), URLS, seeded, lines.append) == (with_slos, None)
    without = tmp_path / "without.yaml"
    without.write_text("alerts: {rules: {queue-growth: {for: 1m}}}\n")
    # The seeded traffic is older than an hour: the stack will calibrate on live traffic.
    path, own = up._config(UpOptions(config=without), URLS, seeded, lines.append)
    assert path == Path(".tailwatch/up.yaml") and own is not None
    copy = yaml.safe_load(path.read_text())
    assert copy["alerts"] == {"rules": {"queue-growth": {"for": "1m"}}}
    assert "without.yaml" in path.read_text().splitlines()[0]
    assert lines == []
    parse_config(copy)


def test_history_is_adopted_at_once_except_by_the_demo(tmp_path, monkeypatch) -> None:
    """A demo's history holds its own drills: the demo calibrates on a clean baseline."""
    from tailwatch import up

    monkeypatch.chdir(tmp_path)
    url = sqlite_url(tmp_path / "recent.db")
    store = Store(url)
    recent = time.time() - 20 * INTERVAL_SECONDS  # a previous run, minutes ago
    assert all(store.write_scrapes(scrapes("r0", "tiny", 11, BOTH, start=recent)))
    store.close()
    lines: list[str] = []
    path, own = up._config(UpOptions(demo=True), URLS, url, lines.append)
    assert own is not None and lines == [] and load_config(path).slos == ()
    path, own = up._config(UpOptions(demo=False), URLS, url, lines.append)
    assert own is None
    assert [s.name for s in load_config(path).slos] == ["tiny-ttft", "tiny-itl"]
    (line,) = lines
    assert line.startswith("SLOs proposed from the store's last hour")


# -- the collector restarted in its place ------------------------------------------------------


def test_restart_replaces_the_child_in_its_place_and_keeps_its_log(tmp_path) -> None:
    sleeper = [sys.executable, "-c", "import time; print('started', flush=True); time.sleep(60)"]
    stack = Stack(tmp_path)
    lines: list[str] = []

    def started(name: str, times: int):
        """Healthy once the child's log says it started ``times`` times."""
        return lambda: (tmp_path / f"{name}.log").read_text().count("started") >= times

    try:
        for name in ("engine-0", "collector", "console"):
            stack.start(name, sleeper, {}, started(name, 1))
        first = stack.children[1]
        second = stack.restart("collector", sleeper, {}, started("collector", 2), lines.append)
        assert first.process.poll() is not None  # stopped
        assert [child.name for child in stack.children] == ["engine-0", "collector", "console"]
        assert stack.children[1] is second and second.pid != first.pid
        assert lines == ["collector: stopped (code -15)"]
        assert [c.name for c in stack.stop_order()] == ["console", "engine-0", "collector"]
    finally:
        stack.stop_all(lambda line: None)
    log = (tmp_path / "collector.log").read_text()
    assert log.count("started") == 2, log  # the first run's log kept


# -- the demo's first baseline -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("cycle", "longer", "first"),
    [
        ("", 0.0, 60.0),
        ("", CALIBRATION_BASELINE_SECONDS, 90.0),
        ("10,20,10", CALIBRATION_BASELINE_SECONDS, 90.0),
        ("120,20,10", CALIBRATION_BASELINE_SECONDS, 120.0),
    ],
)
def test_only_the_first_baseline_is_lengthened_for_the_calibration(
    cycle, longer, first, monkeypatch, tmp_path
) -> None:
    monkeypatch.setenv(CYCLE_ENV, cycle)
    demo = Demo(URLS, "token", lambda line: None, tmp_path / "demo.log",
                min_first_baseline_seconds=longer)  # fmt: skip
    assert demo.first_baseline_seconds == first
    assert demo.cycle_durations(1) == (first, *demo.durations[1:])
    assert demo.cycle_durations(2) == demo.durations


@pytest.mark.parametrize(
    ("elapsed", "baseline", "left"),
    [
        (50.0, 60.0, SETTLE_AFTER_CALIBRATION_SECONDS),  # proposed at 50 s: drill at 60 s
        (30.0, 60.0, 30.0),  # proposed early: the cycle's own baseline still holds
        (50.0, 10.0, SETTLE_AFTER_CALIBRATION_SECONDS),  # a short cycle: the settle
        (80.0, 10.0, SETTLE_AFTER_CALIBRATION_SECONDS),  # never proposed: 90 s in all
    ],
)
def test_the_first_drill_starts_a_settle_after_the_calibration(elapsed, baseline, left) -> None:
    assert first_baseline_left(elapsed, baseline) == left


def test_the_demo_calibration_traffic_stops_when_the_calibration_ends(monkeypatch, tmp_path):
    """The first baseline's traffic is cancelled once ``up`` says the calibration ended, not
    after its longest 80 s; what is left of the first cycle's baseline is the settle."""
    ran: list[tuple[str, float]] = []

    async def traffic(scenario, urls, *, admin_token=None):  # type: ignore[no-untyped-def]
        ran.append((scenario.phases[0].name, scenario.phases[0].duration_seconds))
        await asyncio.sleep(scenario.phases[0].duration_seconds)

    monkeypatch.setattr(up_demo, "run_drill", traffic)
    monkeypatch.delenv(CYCLE_ENV, raising=False)
    demo = Demo(URLS, "token", lambda line: None, tmp_path / "demo.log",
                min_first_baseline_seconds=CALIBRATION_BASELINE_SECONDS)  # fmt: skip

    async def calibrate() -> float | None:
        running = asyncio.create_task(demo._calibration_traffic(up_demo.INCIDENTS[0]))
        while not ran:
            await asyncio.sleep(0.01)
        demo.calibration_ended()
        return await asyncio.wait_for(running, timeout=60)

    left = asyncio.run(calibrate())
    assert ran == [("calibration", CALIBRATION_BASELINE_SECONDS - SETTLE_AFTER_CALIBRATION_SECONDS)]
    # Ended at once (within a 0.5 s poll): about the cycle's whole 60 s baseline remains, not
    # the settle that follows a calibration that took the longest.
    assert SETTLE_AFTER_CALIBRATION_SECONDS < left <= up_demo.BASELINE_SECONDS
    assert re.search(r"calibration: over after \d+ s", (tmp_path / "demo.log").read_text())


def test_without_a_calibration_the_demo_sends_no_calibration_traffic(tmp_path) -> None:
    demo = Demo(URLS, "token", lambda line: None, tmp_path / "demo.log")
    assert asyncio.run(demo._calibration_traffic(up_demo.INCIDENTS[0])) is None
