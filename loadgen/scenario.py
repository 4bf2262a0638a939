"""Incident scenarios: YAML files under ``loadgen/scenarios/``, validated into ``Scenario``.

A scenario is a list of phases (a warm-up, a baseline, a perturbation, a recovery), the
traffic each carries and what changes at its start: a traffic-shape change (a workload's
fields, an extra stream), an admin knob or fault on one replica, or the set of replicas
traffic is routed to, or replicas that restart (``restart``: the virtual fleet only).
``expects`` names, for tests, the engine signal the perturbation must move (compared
between the ``baseline`` and ``perturbation`` phases), the alert it should raise and the
cause triage should name (both ``None`` for a benign run, whose signal is still measured).
``generated`` keeps, verbatim, what ``loadgen.generate`` drew for a generated scenario.
"""

from __future__ import annotations

import copy
import enum
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml

from alerts import AlertName, Cause
from loadgen.errors import WorkloadError
from loadgen.routing import POLICIES
from loadgen.workload import Workload, parse_workload

N = TypeVar("N", bound=enum.StrEnum)

#: The signals read from /metrics counters: an engine knows no client stream.
SERVER_SIGNALS = frozenset(
    {
        "prefix_hit_rate",
        "preemptions",
        "queue_share_of_ttft",
        "queue_time_mean_ms",
        "engine_itl_p99_ms",
        "engine_ttft_p99_ms",
        "structured_length_share",
        "output_tokens_mean",
    }
)
SIGNALS = (
    "prefix_hit_rate",  # Δ prefix-cache hits / Δ queries (tokens), server side
    "preemptions",  # Δ vllm:num_preemptions_total, server side
    "queue_share_of_ttft",  # Δ queue-time sum / Δ TTFT sum, server side
    "queue_time_mean_ms",  # Δ queue-time sum / Δ queue-time count, server side
    "itl_p99_ms",  # client side, over the named stream
    "engine_itl_p99_ms",  # histogram_quantile(0.99) of Δ ITL buckets, server side
    "e2e_p50_ms",  # client side, over the named replica
    "e2e_p50_skew",  # client side: the named replica's e2e p50 over the others' p50
    "engine_ttft_p99_ms",  # histogram_quantile(0.99) of Δ TTFT buckets, server side
    "structured_length_share",  # Δ structured finishes with reason length / Δ all, server side
    "output_tokens_mean",  # Δ vllm:request_generation_tokens sum / Δ count, server side
    "ttft_p95_ms",  # client side: the first token as the client saw it (through any gateway)
)


@dataclass(frozen=True)
class AdminChange:
    replica: int
    patch: Mapping[str, Any]


@dataclass(frozen=True)
class Phase:
    name: str
    duration_seconds: float
    workloads: tuple[Workload, ...]
    admin: tuple[AdminChange, ...] = ()
    active_replicas: tuple[int, ...] | None = None  # None: all
    #: replicas that restart at the phase's start: a fresh engine (counters at zero, a cold
    #: prefix cache, a new instance id, the scenario's knobs); their in-flight requests fail
    restart: tuple[int, ...] = ()
    #: the virtual gateway's added first-token delay from this phase on (``gateway:
    #: {delay_seconds: ...}``; None: unchanged). Virtual fleet only: a real drill's clients
    #: reach the replicas directly
    gateway_delay_seconds: float | None = None


@dataclass(frozen=True)
class Expectation:
    signal: str
    change: str  # "rise" | "fall"
    factor: float  # rise: perturbation >= factor × baseline; fall: <= factor × baseline
    stream: str | None = None
    replica: int | None = None
    alert: AlertName | None = None  # None: a scenario that names no alert (a user's own)
    triage_cause: Cause | None = None


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    teaches: str
    replicas: int
    engine: Mapping[str, Any]
    routing: str
    phases: tuple[Phase, ...]
    compressed_time_scale: float
    expects: Expectation
    #: ``virtual:`` — how the virtual fleet drills it when no timing is given
    #: (``time_scale``, ``window_scale``; see ``loadgen.virtual.drill.VirtualTiming``)
    virtual: Mapping[str, float] = field(default_factory=dict)
    #: what the generator drew (kind, magnitude, share, …), kept verbatim; None: hand-written
    generated: Mapping[str, Any] | None = None

    @property
    def has_gateway(self) -> bool:
        """Whether a phase sets a gateway in front of the replicas (virtual fleet only)."""
        return any(p.gateway_delay_seconds is not None for p in self.phases)

    def scaled(self, time_scale: float) -> Scenario:
        """The same scenario with every phase ``time_scale`` times as long."""
        phases = tuple(
            replace(
                p,
                duration_seconds=p.duration_seconds * time_scale,
                workloads=tuple(
                    replace(w, duration_seconds=w.duration_seconds * time_scale)
                    for w in p.workloads
                ),
            )
            for p in self.phases
        )
        return replace(self, phases=phases)


def _merge(base: Mapping[str, Any], change: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in change.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def parse_scenario(raw: Any, where: str) -> Scenario:
    if not isinstance(raw, Mapping):
        raise WorkloadError(where, "a scenario must be a mapping")
    for key in ("name", "description", "teaches", "workloads", "phases", "expects"):
        if key not in raw:
            raise WorkloadError(f"{where}.{key}", "is missing")
    replicas = raw.get("replicas", 1)
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise WorkloadError(f"{where}.replicas", f"must be a positive integer, got {replicas!r}")
    routing = raw.get("routing", "round-robin")
    if routing not in POLICIES:
        raise WorkloadError(f"{where}.routing", f"must be one of {list(POLICIES)}, got {routing!r}")
    base = {w.get("name", "default"): w for w in raw["workloads"]}
    phases = []
    current = dict(base)
    for i, item in enumerate(raw["phases"]):
        at = f"{where}.phases[{i}]"
        duration = item.get("duration")
        if isinstance(duration, bool) or not isinstance(duration, int | float) or duration <= 0:
            raise WorkloadError(f"{at}.duration", f"must be > 0 seconds, got {duration!r}")
        # NOTE: changes persist into later phases until a later phase changes them back,
        # like a real deploy; `extra` streams last for their phase only.
        for name, change in (item.get("change") or {}).items():
            if name not in current:
                raise WorkloadError(f"{at}.change", f"no workload named {name!r}")
            current[name] = _merge(current[name], change)
        raws = [*current.values(), *(item.get("extra") or [])]
        # NOTE: each phase and stream gets its own seed, so streams are not in lockstep.
        workloads = tuple(
            parse_workload({**w, "duration": duration, "seed": w.get("seed", 0) + 1000 * i + j}, at)
            for j, w in enumerate(raws)
        )
        admin = tuple(
            _admin(change, f"{at}.admin[{j}]", replicas)
            for j, change in enumerate(item.get("admin") or [])
        )
        active = item.get("active_replicas")
        if active is not None and (not active or any(not 0 <= r < replicas for r in active)):
            raise WorkloadError(
                f"{at}.active_replicas", f"must index 0..{replicas - 1}, got {active!r}"
            )
        phases.append(
            Phase(
                str(item.get("name", f"phase{i}")),
                float(duration),
                workloads,
                admin,
                tuple(active) if active is not None else None,
                _restart(item.get("restart"), f"{at}.restart", replicas),
                _gateway(item.get("gateway"), f"{at}.gateway"),
            )
        )
    names = {p.name for p in phases}
    if not {"baseline", "perturbation"} <= names:
        raise WorkloadError(f"{where}.phases", "needs phases named 'baseline' and 'perturbation'")
    expects = raw["expects"]
    if not isinstance(expects, Mapping):
        raise WorkloadError(f"{where}.expects", f"must be a mapping, got {expects!r}")
    if expects.get("signal") not in SIGNALS:
        raise WorkloadError(
            f"{where}.expects.signal",
            f"must be one of {list(SIGNALS)}, got {expects.get('signal')!r}",
        )
    if expects.get("stream") is not None and expects["signal"] in SERVER_SIGNALS:
        raise WorkloadError(
            f"{where}.expects.stream",
            f"{expects['signal']} is read from the engines' /metrics, which know no client "
            "stream; drop stream, or name a client-side signal (itl_p99_ms)",
        )
    generated = raw.get("generated")
    if generated is not None and not isinstance(generated, Mapping):
        raise WorkloadError(f"{where}.generated", f"must be a mapping, got {generated!r}")
    if expects.get("change") not in ("rise", "fall"):
        raise WorkloadError(
            f"{where}.expects.change", f"must be rise or fall, got {expects.get('change')!r}"
        )
    return Scenario(
        name=str(raw["name"]),
        description=str(raw["description"]).strip(),
        teaches=str(raw["teaches"]).strip(),
        replicas=replicas,
        engine=dict(raw.get("engine") or {}),
        routing=routing,
        phases=tuple(phases),
        compressed_time_scale=float((raw.get("compressed") or {}).get("time_scale", 1.0)),
        virtual=_virtual(raw.get("virtual"), f"{where}.virtual"),
        expects=Expectation(
            signal=expects["signal"],
            change=expects["change"],
            factor=float(expects.get("factor", 1.0)),
            stream=expects.get("stream"),
            replica=expects.get("replica"),
            alert=_vocabulary(expects, "alert", AlertName, where),
            triage_cause=_vocabulary(expects, "triage_cause", Cause, where),
        ),
        generated=copy.deepcopy(dict(generated)) if generated is not None else None,
    )


def _gateway(raw: Any, where: str) -> float | None:
    """A phase's ``gateway: {delay_seconds: s}``: the seconds the virtual gateway adds to
    every first token from the phase on (None: no change)."""
    if raw is None:
        return None
    if not isinstance(raw, Mapping) or set(raw) != {"delay_seconds"}:
        raise WorkloadError(where, f"must be a mapping {{delay_seconds: s}}, got {raw!r}")
    value = raw["delay_seconds"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < 600:
        raise WorkloadError(f"{where}.delay_seconds", f"must be 0..600 seconds, got {value!r}")
    return float(value)


#: The keys of a scenario's ``virtual:`` block.
VIRTUAL_KEYS = ("time_scale", "window_scale")


def _virtual(raw: Any, where: str) -> dict[str, float]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise WorkloadError(where, f"must be a mapping of {list(VIRTUAL_KEYS)}, got {raw!r}")
    out = {}
    for key, value in raw.items():
        if key not in VIRTUAL_KEYS:
            raise WorkloadError(f"{where}.{key}", f"unknown key; known: {list(VIRTUAL_KEYS)}")
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < 1e6:
            raise WorkloadError(f"{where}.{key}", f"must be a number > 0, got {value!r}")
        out[key] = float(value)
    return out


def _vocabulary(expects: Mapping[str, Any], key: str, names: type[N], where: str) -> N | None:
    """``expects.alert`` / ``expects.triage_cause`` as the shared name (alerts.vocabulary),
    so a drill names exactly what the evaluator raises and triage concludes."""
    value = expects.get(key)
    if value is None:
        return None
    allowed = [n.value for n in names]
    if not isinstance(value, str) or value not in allowed:
        raise WorkloadError(f"{where}.expects.{key}", f"must be one of {allowed}, got {value!r}")
    return names(value)


def _admin(raw: Any, where: str, replicas: int) -> AdminChange:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("patch"), Mapping):
        raise WorkloadError(where, "must be {replica: N, patch: {knob: value}}")
    replica = raw.get("replica", 0)
    if not isinstance(replica, int) or not 0 <= replica < replicas:
        raise WorkloadError(f"{where}.replica", f"must index 0..{replicas - 1}, got {replica!r}")
    return AdminChange(replica, dict(raw["patch"]))


def _restart(raw: Any, where: str, replicas: int) -> tuple[int, ...]:
    """A phase's ``restart:`` list: distinct replica indexes (an empty list or none: ())."""
    if raw is None:
        return ()
    if not isinstance(raw, list) or any(
        isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < replicas for r in raw
    ):
        raise WorkloadError(
            where, f"must be a list of replica indexes 0..{replicas - 1}, got {raw!r}"
        )
    if len(set(raw)) != len(raw):
        raise WorkloadError(where, f"names a replica twice: {raw!r}")
    return tuple(raw)


def load_scenario_file(path: str | Path) -> Scenario:
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise WorkloadError(str(path), f"is not valid YAML: {error}") from None
    except UnicodeDecodeError as error:
        raise WorkloadError(str(path), f"is not UTF-8 text: {error.reason}") from None
    except OSError as error:
        # NOTE: a missing file, a directory or no permission is a user mistake: one line.
        reason = error.strerror or type(error).__name__
        raise WorkloadError(str(path), f"cannot read the scenario file: {reason}") from None
    return parse_scenario(raw, path.name)


def builtin_names() -> list[str]:
    folder = resources.files("loadgen") / "scenarios"
    return sorted(
        p.name.removesuffix(".yaml") for p in folder.iterdir() if p.name.endswith(".yaml")
    )


def load_scenario(name: str) -> Scenario:
    """A built-in scenario by name, or a YAML file by path."""
    if name.endswith((".yaml", ".yml")) or "/" in name:
        return load_scenario_file(name)
    if name not in builtin_names():
        raise WorkloadError("scenario", f"no scenario {name!r}; built in: {builtin_names()}")
    with resources.as_file(resources.files("loadgen") / "scenarios" / f"{name}.yaml") as path:
        return load_scenario_file(path)
