"""What ``tailwatch sweep`` runs (:class:`SweepPlan`), built from the command's options by
:func:`build_sweep_plan` and so checked before anything runs (the console's sweep form builds
it the same way, from :func:`sweep_options`); ``loadgen.lab_sweep`` runs it."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loadgen.lab_knobs import check_engine, check_values, parse_engine_knobs, parse_knob_option
from loadgen.load_options import (
    check_url,
    endpoint_route,
    options_with_defaults,
    parse_rates_option,
    workload_from_options,
)
from loadgen.summary import parse_slo
from loadgen.workload import Workload
from slo import Objectives

#: Per-request figures kept per point, of each of ttft_ms, e2e_ms and itl_ms.
MAX_SAMPLES = 5000
#: The options of ``tailwatch sweep`` a plan is built from, at the command's defaults (all
#: but ``--knob`` and ``--rates``, which have none); ``--db``, ``--config`` and ``--progress``
#: are the command's own. ``tests/loadgen/test_lab_cli.py`` keeps them the command's.
SWEEP_DEFAULTS: Mapping[str, Any] = {
    "engine": None,
    "url": None,
    "engine_knobs": "",
    "repeats": 1,
    "duration": 60.0,
    "arrivals": "poisson",
    "burstiness": 1.0,
    "prompt_tokens": "128",
    "output_tokens": "64",
    "replay": None,
    "prefix_groups": 0,
    "prefix_share": 1.0,
    "prefix_tokens": 0,
    "tenants": "",
    "priorities": "",
    "seed": 0,
    "slo": "",
    "target": 0.9,
    "name": "",
    "endpoint": "completions",
    "max_in_flight": 256,
}


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep, validated by :func:`build_sweep_plan`. ``engine`` (a model: ``sim:...`` or ``tiny``) or
    ``url``; ``engine_knobs``: what every point shares (engine targets only);
    ``workload_options``: the traffic as the CLI took it (stored with the run)."""

    knob: str
    values: tuple[Any, ...]
    rates: tuple[float, ...]
    workload: Workload
    objectives: Objectives
    engine: str | None = None
    url: str | None = None
    repeats: int = 1
    engine_knobs: Mapping[str, Any] = field(default_factory=dict)
    workload_options: Mapping[str, Any] = field(default_factory=dict)
    name: str = ""
    target_attainment: float = 0.9
    route: str = "/v1/completions"
    max_in_flight: int = 256
    admin_token: str | None = None
    max_samples: int = MAX_SAMPLES

    @property
    def num_planned_points(self) -> int:
        return len(self.values) * len(self.rates) * self.repeats

    @property
    def is_simulated_offline(self) -> bool:
        from engine.sim.target import is_simulated

        return self.engine is not None and is_simulated(self.engine)


def parse_sweep_slo(text: str) -> str:
    """``ttft:500,itl:50`` or ``ttft=500,itl=50`` → loadgen's ``KEY=MS`` form."""
    return ",".join(p.replace(":", "=", 1) if "=" not in p else p for p in text.split(","))


def sweep_options(**given: Any) -> dict[str, Any]:
    """Every option of ``tailwatch sweep`` a plan is built from, at its default, with ``given``
    over them (the console's sweep form builds its plan, and so its errors, exactly as the
    command does)."""
    return options_with_defaults("sweep", SWEEP_DEFAULTS, given, frozenset({"knob", "rates"}))


def build_sweep_plan(options: Mapping[str, Any]) -> SweepPlan:
    """The sweep ``options`` (``tailwatch sweep``'s parameters, or :func:`sweep_options`)
    describe; a ``ValueError`` or ``LoadgenError`` naming the option for any mistake, before
    anything runs."""
    engine, url = options["engine"], options["url"]
    if (engine is None) == (url is None):
        raise ValueError("--engine / --url: give exactly one (a model to start, or a server)")
    if url is not None and options["engine_knobs"]:
        raise ValueError("--engine-knobs: only with --engine (a running engine keeps its own)")
    if not (math.isfinite(options["target"]) and 0 < options["target"] <= 1):
        raise ValueError(f"--target {options['target']!r}: an SLO attainment in (0, 1]")
    if not (math.isfinite(options["duration"]) and options["duration"] > 0):
        raise ValueError(f"--duration {options['duration']!r}: must be > 0 seconds")
    if options["repeats"] < 1:
        raise ValueError(f"--repeats {options['repeats']}: must be >= 1")
    if url is not None:
        check_url(url, "--url")
    knob, values = parse_knob_option(options["knob"], live_only=url is not None)
    rates = parse_rates_option(options["rates"])
    if not rates:
        raise ValueError(f"--rates {options['rates']!r}: give at least one rate > 0")
    shared = parse_engine_knobs(options["engine_knobs"], knob)
    if engine is not None:
        check_engine(engine, "--engine")
        check_values(engine, shared, knob, values)
    keys = ("duration", "arrivals", "burstiness", "prompt_tokens", "output_tokens",
            "replay", "prefix_groups", "prefix_share", "prefix_tokens", "tenants",
            "priorities", "seed")  # fmt: skip
    workload = workload_from_options(1.0, *(options[k] for k in keys))
    slo = parse_sweep_slo(options["slo"])
    objectives = parse_slo(slo)
    route = endpoint_route(options["endpoint"])
    stored = {k: str(options[k]) if k == "replay" else options[k] for k in keys}
    return SweepPlan(
        knob=knob,
        values=tuple(values),
        rates=tuple(rates),
        workload=workload,
        objectives=objectives,
        engine=engine,
        url=url,
        repeats=options["repeats"],
        engine_knobs=shared,
        workload_options={**stored, "slo": slo},
        name=options["name"],
        target_attainment=options["target"],
        route=route,
        max_in_flight=options["max_in_flight"],
    )
