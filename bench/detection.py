"""Detection (issue 22): how often the built-in rules catch an incident they were not built
with, how soon, whether triage names its cause, and how often they page on a benign run.

``python -m bench detection [--seed S ...] [--count N] [--workers W] [--json FILE]`` draws
``N`` scenarios per seed from the generator (``loadgen.generate``: incidents of the six
kinds and benign changes, with drawn magnitudes, shares, fleets, GPUs, loads and onsets)
and runs each on the virtual fleet (``loadgen.virtual.drill.run_virtual_drill``: simulated
replicas, the collector's parser and store, the real evaluator and triage on one virtual
clock). For every run it records:

- whether anything fired while the incident lasted, which alert first, and its severity;
- the delay: evaluation intervals from the first evaluation at which the rule that should
  catch the kind (the first alert when it did not fire) could have fired on a clear signal
  (once its window lies wholly in the incident at its full magnitude and its ``for:`` has
  passed: the perturbation phase's start + window + ``for:``; a ramp's steps before it are
  the incident building up) to when it did (0 when it fired sooner);
- the rank of the true cause in triage as it read when that alert fired;
- the incidents opened during the incident (one cause should open one);
- for a benign run, every page at all.

It prints recall, AC@1, AC@3, delay p50/p95 and incidents opened per incident by kind and
by the magnitude the signal really moved (measured from the engines' own metrics between
the baseline and perturbation phases, not the drawn one), false pages per benign
fleet-hour, and the issue's targets checked. Fleet-hours are production-equivalent: virtual
seconds over the window scale. A run whose incident was too short for its rule's window and
``for:`` to see (the generator says so) is reported, not counted. The default seeds are
ones the test suite never uses.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from bench._report import nearest_rank, print_table

#: Seeds no test judges detection on and no rule or triage change was tuned on: 8301-8303,
#: chosen before the ITL tail rule weighed the load (the change the benign page on 8201
#: prompted) and before any run on them. Development used 9001-9005, 9101-9199, 9160-9162
#: and 9461; 7001-7003, 8001-8003, 8101-8103 and then 8201-8203 were earlier held-out
#: measurements, and the changes after each saw their misses, so they are development seeds
#: now (docs/benchmarks.md, section 14, gives them). The tests run fixed small seeds and
#: hypothesis-drawn ones for the generator's own checks, never a detection outcome.
DEFAULT_SEEDS = (8301, 8302, 8303)
DEFAULT_COUNT = 60
#: The benchmark's clock: production's 5 m windows and 30 s scrapes and evaluations
#: (kube-prometheus's default interval) at a tenth, the generated phases as drawn.
TIMING_WINDOW_SCALE = 0.1
TIMING_INTERVAL_SECONDS = 3.0
#: Signals whose move is a fall (baseline / perturbation is the move).
FALLING = ("prefix_hit_rate",)
#: Signals that are already a ratio against the rest of the fleet (~1 when alike).
SKEWS = ("e2e_p50_skew",)
#: Kinds whose target recall holds from a 1.5x move (hit-rate drops, per-replica skew).
LOW_BAR_KINDS = ("prefix-break", "prefix-scatter", "slow-replica")
BINS = ((0.0, 1.5, "< 1.5x"), (1.5, 2.0, "1.5-2x"), (2.0, 3.0, "2-3x"), (3.0, 5.0, "3-5x"))
PAGE = "page"


@dataclass
class Outcome:
    """One run's figures (JSON-able)."""

    name: str
    kind: str
    benign: bool
    cause: str | None
    expected_alert: str | None
    magnitude_drawn: float
    signal: str
    baseline: float
    perturbation: float
    moved: float  # the signal's move as a factor >= 0 (inf: from zero)
    long_enough: bool
    replicas: int
    model: str
    window_scale: float
    evaluation_interval_seconds: float
    virtual_seconds: float
    cpu_seconds: float
    fired: list[dict[str, Any]] = field(default_factory=list)  # every firing, in order
    detected: bool = False
    first_alert: str | None = None
    first_severity: str | None = None
    delay_evaluations: float | None = None
    cause_rank: int | None = None
    incidents_opened: int = 0
    early_pages: int = 0  # pages before the incident began (incident runs)
    pages: int = 0  # every page (benign runs: all false)


def _move(signal: str, baseline: float, perturbation: float) -> float:
    if signal in SKEWS:
        return perturbation if math.isfinite(perturbation) else math.nan
    if signal in FALLING:
        if not (math.isfinite(baseline) and math.isfinite(perturbation)):
            return math.nan
        return math.inf if perturbation <= 0 and baseline > 0 else baseline / perturbation
    if not (math.isfinite(baseline) and math.isfinite(perturbation)):
        return math.nan
    if baseline <= 0:
        return math.inf if perturbation > 0 else 1.0
    return perturbation / baseline


def _onset(phase_bounds: Sequence[tuple[str, float, float]]) -> tuple[float, float]:
    """(start of the first phase after the baseline, end of the last non-recovery phase)."""
    names = [n for n, _, _ in phase_bounds]
    after = names.index("baseline") + 1
    start = phase_bounds[after][1]
    end = max(e for n, _, e in phase_bounds[after:] if not n.startswith("recovery"))
    return start, end


def run_one(mapping: dict[str, Any]) -> dict[str, Any]:
    """Run one generated scenario on the virtual fleet; its :class:`Outcome` as a dict."""
    from alerts import SEVERITY, AlertState
    from engine.sim.offline import VIRTUAL_EPOCH
    from loadgen.scenario import parse_scenario
    from loadgen.virtual.drill import VirtualTiming, run_virtual_drill

    generated = mapping["generated"]
    scenario = parse_scenario(mapping, mapping["name"])
    t = generated["timing"]
    timing = VirtualTiming(
        window_scale=t["window_scale"],
        evaluation_interval_seconds=t["evaluation_interval_seconds"],
        scrape_interval_seconds=t["scrape_interval_seconds"],
        scenario_time_scale=1.0,
    )
    started = time.process_time()
    drill = run_virtual_drill(scenario, timing)
    cpu = time.process_time() - started
    report = drill.report
    verdict = report.drill.verdict()
    e = scenario.expects
    onset, end = _onset(report.drill.phase_bounds)
    onset_at, end_at = VIRTUAL_EPOCH + onset, VIRTUAL_EPOCH + end
    outcome = Outcome(
        name=scenario.name,
        kind=generated["kind"],
        benign=bool(generated["benign"]),
        cause=None if e.triage_cause is None else e.triage_cause.value,
        expected_alert=None if e.alert is None else e.alert.value,
        magnitude_drawn=float(generated["magnitude"]),
        signal=e.signal,
        baseline=float(verdict["baseline"]),
        perturbation=float(verdict["perturbation"]),
        moved=_move(e.signal, float(verdict["baseline"]), float(verdict["perturbation"])),
        long_enough=bool(generated.get("long_enough", True)),
        replicas=scenario.replicas,
        model=str(generated.get("model", "")),
        window_scale=timing.window_scale,
        evaluation_interval_seconds=timing.evaluation_interval_seconds,
        virtual_seconds=drill.virtual_seconds,
        cpu_seconds=cpu,
    )
    rules = {r.name: r for r in _rules()}
    firing = [t for t in report.transitions if t.to_state is AlertState.FIRING]
    for t in firing:
        outcome.fired.append(
            {
                "alert": t.alert.name,
                "severity": t.alert.labels.get(SEVERITY, ""),
                "at_seconds": round(t.at_seconds - VIRTUAL_EPOCH, 3),
                "labels": dict(t.alert.labels),
            }
        )
    pages = [t for t in firing if t.alert.labels.get(SEVERITY) == PAGE]
    outcome.pages = len(pages)
    if outcome.benign:
        return asdict(outcome)
    outcome.early_pages = sum(t.at_seconds < onset_at for t in pages)
    # NOTE: an alert that fires after the incident ends (settle included) still counts when
    # its condition began inside it: a ticket's for: may outlast a short incident
    during = [
        t
        for t in firing
        if t.alert.active_at_seconds is not None
        and onset_at <= t.alert.active_at_seconds <= end_at + timing.window_scale * 300
    ]
    # NOTE: one incident per group: alerts triage explained by one cause join one incident
    outcome.incidents_opened = len({t.alert.group for t in during})
    if not during:
        return asdict(outcome)
    first = min(during, key=lambda t: t.at_seconds)
    outcome.detected = True
    outcome.first_alert = first.alert.name
    outcome.first_severity = first.alert.labels.get(SEVERITY, "")
    # NOTE: the delay is the expected rule's when it fired (a side effect that shows later,
    # such as an ITL tail behind a broken prefix's longer prefills, is not the rule's delay)
    timed = next((t for t in during if t.alert.name == outcome.expected_alert), first)
    rule = _rule_of(timed.alert, rules.values())
    # NOTE: a ramp reaches its drawn magnitude at the phase named perturbation: the delay
    # counts from there (from the first ramp step, a rule whose threshold the ramp crosses
    # halfway would count the ramp's own length as its delay); a step starts there anyway
    full = next(s for n, s, _ in report.drill.phase_bounds if n == "perturbation")
    onset_at = VIRTUAL_EPOCH + full
    # NOTE: the first evaluation at which the rule could fire on a clear signal: once its
    # window lies wholly in the incident, and its for: has passed
    window = 0.0 if rule is None else rule.lookback_seconds() * timing.window_scale
    for_seconds = 0.0 if rule is None else rule.for_seconds * timing.window_scale
    earliest = onset_at + window + for_seconds
    late = (timed.at_seconds - earliest) / timing.evaluation_interval_seconds
    outcome.delay_evaluations = max(0.0, math.ceil(late - 1e-9))
    page = next((p for p in drill.pages if p.at_seconds == first.at_seconds), None)
    if page is not None and page.triage is not None and outcome.cause is not None:
        causes = [h.cause.value for h in page.triage.hypotheses]
        if outcome.cause in causes:
            outcome.cause_rank = causes.index(outcome.cause) + 1
    return asdict(outcome)


def _rules():  # type: ignore[no-untyped-def]
    from alerts.rules import builtin_rule_set

    return builtin_rule_set()[0].rules


def _rule_of(alert, rules):  # type: ignore[no-untyped-def]
    from alerts import rule_of

    return rule_of(alert, rules)


# -- the tables ---------------------------------------------------------------------------


def _bin(moved: float) -> str:
    if math.isnan(moved):
        return "unknown"
    for low, high, label in BINS:
        if low <= moved < high:
            return label
    return ">= 5x"


def _is_clear(o: dict[str, Any]) -> bool:
    """An incident whose signal moved enough that the target recall applies to it."""
    bar = 1.5 if o["kind"] in LOW_BAR_KINDS else 2.0
    return o["long_enough"] and not math.isnan(o["moved"]) and o["moved"] >= bar


def _rate(hits: int, total: int) -> str:
    return "-" if not total else f"{hits / total:.2f} ({hits}/{total})"


def _row(label: str, runs: list[dict[str, Any]]) -> list[object]:
    seen = [o for o in runs if o["long_enough"]]
    detected = [o for o in seen if o["detected"]]
    ranked = [o for o in detected if o["cause"] is not None]
    delays = [o["delay_evaluations"] for o in detected if o["delay_evaluations"] is not None]
    opened = [o["incidents_opened"] for o in detected]
    return [
        label,
        len(runs),
        len(runs) - len(seen),
        _rate(len(detected), len(seen)),
        _rate(sum(o["cause_rank"] == 1 for o in ranked), len(ranked)),
        _rate(sum((o["cause_rank"] or 99) <= 3 for o in ranked), len(ranked)),
        "-" if not delays else f"{nearest_rank(delays, 50):g}",
        "-" if not delays else f"{nearest_rank(delays, 95):g}",
        "-" if not opened else f"{sum(opened) / len(opened):.2f}",
        sum(o["early_pages"] for o in runs),
    ]


HEADERS = (
    "group",
    "runs",
    "too short",
    "recall",
    "AC@1",
    "AC@3",
    "delay p50 (evals)",
    "delay p95",
    "incidents / incident",
    "early pages",
)


def fleet_hours(o: dict[str, Any]) -> float:
    """Production-equivalent hours of fleet time in a run (virtual seconds over the scale)."""
    return o["virtual_seconds"] / o["window_scale"] / 3600.0


def summarize(outcomes: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The targets' figures over ``outcomes`` (see the module docstring)."""
    incidents = [o for o in outcomes if not o["benign"]]
    benign = [o for o in outcomes if o["benign"]]
    clear = [o for o in incidents if _is_clear(o)]
    detected = [o for o in clear if o["detected"]]
    ranked = [o for o in detected if o["cause_rank"] is not None or o["cause"]]
    delays = [o["delay_evaluations"] for o in detected if o["delay_evaluations"] is not None]
    opened = [o["incidents_opened"] for o in detected]
    hours = sum(fleet_hours(o) for o in benign)
    false_pages = sum(o["pages"] for o in benign)
    return {
        "incidents": len(incidents),
        "clear_incidents": len(clear),
        "recall": len(detected) / len(clear) if clear else math.nan,
        "ac1": sum(o["cause_rank"] == 1 for o in ranked) / len(ranked) if ranked else math.nan,
        "ac3": (
            sum((o["cause_rank"] or 99) <= 3 for o in ranked) / len(ranked) if ranked else math.nan
        ),
        "delay_p50": nearest_rank(delays, 50) if delays else math.nan,
        "delay_p95": nearest_rank(delays, 95) if delays else math.nan,
        "incidents_per_incident": sum(opened) / len(opened) if opened else math.nan,
        "benign_runs": len(benign),
        "benign_with_a_page": sum(o["pages"] > 0 for o in benign),
        "false_pages": false_pages,
        "benign_fleet_hours": hours,
        "false_pages_per_fleet_hour": false_pages / hours if hours else math.nan,
    }


TARGETS = (
    ("recall (signal >= 2x; >= 1.5x for hit-rate drops and skew)", "recall", ">=", 0.95),
    ("AC@1", "ac1", ">=", 0.9),
    ("benign runs with a page", "benign_with_a_page", "<=", 0),
    ("incidents opened per incident", "incidents_per_incident", "<=", 1.1),
    ("delay p95 (evaluations after the window could see it)", "delay_p95", "<=", 2),
)


def print_report(outcomes: Sequence[dict[str, Any]], title: str) -> dict[str, Any]:
    incidents = [o for o in outcomes if not o["benign"]]
    benign = [o for o in outcomes if o["benign"]]
    print(f"\n{title}: {len(incidents)} incidents, {len(benign)} benign runs")
    kinds = sorted({o["kind"] for o in incidents})
    rows = [_row(kind, [o for o in incidents if o["kind"] == kind]) for kind in kinds]
    rows.append(_row("all incidents", incidents))
    print("\nBy kind (recall over runs long enough to be seen; AC over those detected)")
    print_table(HEADERS, rows)
    labels = [label for _, _, label in BINS] + [">= 5x", "unknown"]
    rows = [
        _row(label, [o for o in incidents if _bin(o["moved"]) == label])
        for label in labels
        if any(_bin(o["moved"]) == label for o in incidents)
    ]
    print("\nBy how far the signal moved (baseline to perturbation, the engines' own metrics)")
    print_table(HEADERS, rows)
    kinds = sorted({o["kind"] for o in benign})
    rows = []
    for kind in kinds:
        runs = [o for o in benign if o["kind"] == kind]
        hours = sum(fleet_hours(o) for o in runs)
        pages = sum(o["pages"] for o in runs)
        tickets = sum(f["severity"] != PAGE for o in runs for f in o["fired"])
        rows.append(
            [
                kind,
                len(runs),
                pages,
                f"{pages / hours:.2f}" if hours else "-",
                tickets,
                f"{hours:.1f}",
            ]
        )
    print("\nBenign runs (fleet-hours: production-equivalent)")
    print_table(("kind", "runs", "pages", "pages / fleet-hour", "tickets", "fleet-hours"), rows)
    summary = summarize(outcomes)
    print("\nTargets")
    rows = []
    for what, key, op, goal in TARGETS:
        value = summary[key]
        met = not math.isnan(value) and (value >= goal if op == ">=" else value <= goal)
        rows.append([what, f"{value:.3g}", f"{op} {goal:g}", "met" if met else "MISSED"])
    print_table(("target", "measured", "goal", ""), rows)
    return summary


def run_all(mappings: Iterable[dict[str, Any]], workers: int) -> list[dict[str, Any]]:
    items = list(mappings)
    if workers <= 1:
        return [run_one(m) for m in items]
    with ProcessPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(run_one, items, chunksize=1))


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench detection", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--seed", type=int, action="append", help=f"repeatable; default {DEFAULT_SEEDS}"
    )
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT, help="scenarios per seed")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--kinds", default="", help="comma-separated generator kinds")
    parser.add_argument("--json", default="", help="also write every run's figures here")
    return parser.parse_args(list(argv))


def main(argv: Sequence[str] | None = None) -> None:
    from loadgen.generate import generate
    from loadgen.virtual.drill import VirtualTiming

    timing = VirtualTiming(
        window_scale=TIMING_WINDOW_SCALE,
        evaluation_interval_seconds=TIMING_INTERVAL_SECONDS,
        scrape_interval_seconds=TIMING_INTERVAL_SECONDS,
        scenario_time_scale=1.0,
    )
    args = parse_args(argv or [])
    seeds = tuple(args.seed or DEFAULT_SEEDS)
    kinds = [k for k in args.kinds.split(",") if k.strip()] or None
    started = time.perf_counter()
    all_outcomes = []
    for seed in seeds:
        mappings = generate(seed, args.count, kinds, timing)
        outcomes = run_all(mappings, args.workers)
        all_outcomes.extend(outcomes)
        print_report(outcomes, f"seed {seed}")
    if len(seeds) > 1:
        print_report(all_outcomes, f"seeds {', '.join(map(str, seeds))}")
    cpu = sum(o["cpu_seconds"] for o in all_outcomes)
    print(
        f"\n{len(all_outcomes)} runs in {time.perf_counter() - started:.0f} s wall, "
        f"{cpu:.0f} CPU s of drills ({args.workers} workers)"
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(all_outcomes, out, indent=1, default=str)


if __name__ == "__main__":
    main(sys.argv[1:])
