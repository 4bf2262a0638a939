"""The options of a replay read into what it runs (:class:`ReplaySpec`: the window, the
:class:`loadgen.replay.ReplayPlan` and the tenant): ``tailwatch replay`` builds it from its
options and the console's *Start a replay* form from its fields, both with
:func:`build_replay_plan`, so each mistake is the same one line naming the option (a
``ValueError``) before anything is read or stored; :func:`check_window` then reads the window
to see that it holds something to replay."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import yaml

from alerts import RuleError
from alerts.rules import parse_duration
from collectors.store.protocols import RequestReader
from loadgen.errors import WorkloadError
from loadgen.load_options import check_url, options_with_defaults
from loadgen.replay import ReplayPlan, load_trace
from loadgen.replay_fleet import MAX_REPLICAS

_EPOCH = re.compile(r"[0-9]{1,12}(\.[0-9]+)?")
#: Option names for the fields of a ``WorkloadError``.
_OPTIONS = {"window": "--from/--to", "engine": "--engine", "speed": "--speed", "slo": "--slo"}
_COUNT = re.compile(r"\+?[0-9]+")
#: The options of ``tailwatch replay`` a plan is built from, at the command's defaults (all
#: but ``--from``, which has none); ``--db``, ``--json`` and ``--progress`` are the command's
#: own. ``tests/loadgen/test_replay_cli.py`` keeps them the command's.
REPLAY_DEFAULTS: Mapping[str, Any] = {
    "to": "now",
    "engine": None,
    "url": None,
    "replicas": None,
    "route": "as-recorded",
    "knob": None,
    "slo": "",
    "tenant": None,
    "speed": 1.0,
    "seed": 0,
    "name": "",
}


def parse_time(flag: str, text: str, now: float) -> float:
    """``now``, Unix seconds (``1767225600``), ISO 8601 (``2026-12-02T10:00:00Z``; UTC when
    no offset is given) or a time before ``now`` (``-15m``, ``-1h30m``), as epoch seconds;
    else a ``ValueError`` naming ``flag``."""
    raw = text.strip()
    if raw == "now":
        return now
    if raw.startswith("-"):
        return now - _ago(flag, text, raw[1:].strip())
    if _EPOCH.fullmatch(raw):
        return float(raw)
    if 0 < len(raw) <= 40:
        try:
            parsed = datetime.fromisoformat(raw.replace("Z", "+00:00"))
        except ValueError:
            parsed = None
        if parsed is not None:
            parsed = parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            return parsed.timestamp()
    raise ValueError(
        f"{flag} {text!r}: expected now, Unix seconds, ISO 8601 (2026-12-02T10:00:00Z) "
        "or a time before now (-15m, -1h)"
    )


def _ago(flag: str, text: str, raw: str) -> float:
    """The seconds of ``-15m`` (``raw`` is ``15m``), errors naming the whole ``text``."""
    try:
        seconds = float(raw) if _EPOCH.fullmatch(raw) else parse_duration(flag, flag, raw)
    except RuleError as error:
        raise ValueError(f"{flag} {text!r}: {error.problem}") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"{flag} {text!r}: a time before now needs a positive duration (-15m)")
    return seconds


def parse_knobs(values: list[str]) -> dict[str, Any]:
    """``--knob name=value`` (repeatable; the value read as YAML: 512, true, fcfs); a
    ``ValueError`` naming ``--knob`` for a mistake."""
    knobs: dict[str, Any] = {}
    for text in values:
        name, sep, raw = text.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise ValueError(
                f"--knob {text!r}: expected NAME=VALUE, e.g. max_num_batched_tokens=512"
            )
        if name in knobs:
            raise ValueError(f"--knob {name}: given twice")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError:
            value = raw
        if value is None or isinstance(value, list | dict):
            raise ValueError(f"--knob {text!r}: the value must be a number, true/false or a word")
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"--knob {text!r}: the value must be finite")
        knobs[name] = value
    return knobs


def _option(field: str) -> str:
    head, _, rest = field.partition(".")
    if head == "knob":
        return f"--knob {rest}" if rest else "--knob"
    return _OPTIONS.get(head, f"--{head}")


@dataclass(frozen=True)
class ReplaySpec:
    """What the options ask for: the window ``[start, end]`` (epoch seconds), the plan and
    the one tenant replayed (``None``: all)."""

    start: float
    end: float
    plan: ReplayPlan
    tenant: str | None


def replay_options(**given: Any) -> dict[str, Any]:
    """Every option of ``tailwatch replay`` a plan is built from, at its default, with
    ``given`` over them (the console's replay form builds its plan, and so its errors,
    exactly as the command does)."""
    options = options_with_defaults("replay", REPLAY_DEFAULTS, given, frozenset({"from_"}))
    if "from_" not in given:
        raise ValueError("--from: give the window's start (now, Unix seconds, ISO 8601, -15m)")
    return options


def build_replay_plan(options: Mapping[str, Any], now: float) -> ReplaySpec:
    """The replay ``options`` (``tailwatch replay``'s parameters, or :func:`replay_options`)
    describe, times read against ``now``; a ``ValueError`` naming the option for any mistake,
    before anything is read or stored (the window's records are checked by
    :func:`check_window`)."""
    from_, to = options["from_"], options["to"]
    start, end = parse_time("--from", from_, now), parse_time("--to", to, now)
    if not end > start:
        raise ValueError(f"--to {to!r}: must be after --from {from_!r}")
    engine, tenant = options["engine"], options["tenant"]
    urls = _urls(options["url"])
    if engine is not None and not engine.strip():
        raise ValueError("--engine '': give an engine (tiny, sim:<model>@<gpu>), or leave it out")
    if engine is not None and urls is not None:
        raise ValueError("--engine and --url: give one (an engine to start, or a running server)")
    if urls is not None:
        urls = tuple(check_url(one, "--url").rstrip("/") for one in urls)
    url = urls[0] if urls is not None and len(urls) == 1 else urls
    if tenant is not None and not tenant.strip():
        raise ValueError("--tenant '': give a tenant name, or leave --tenant out for all")
    plan = ReplayPlan(
        engine=None if url is not None else (engine or "tiny"),
        url=url,
        knobs=parse_knobs(options["knob"] or []),
        slo=options["slo"],
        speed=options["speed"],
        seed=options["seed"],
        name=options["name"],
        replicas=parse_replicas(options["replicas"]),
        route=options["route"],
    )
    try:
        plan.check()
    except WorkloadError as error:
        raise ValueError(workload_message(error)) from None
    return ReplaySpec(start, end, plan, tenant)


def _urls(value: Any) -> tuple[str, ...] | None:
    """``--url`` as given: None, one URL (the console's field) or the repeated option."""
    if value is None or isinstance(value, str):
        return None if value is None else (value,)
    urls = tuple(value)
    return urls or None


def parse_replicas(value: Any) -> Any:
    """``--replicas`` as a number (None: left out); text must be a whole number, the range is
    ``ReplayPlan.check``'s (a number from the console's form goes there as it is)."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    shown = repr(value if len(value) <= 20 else value[:20] + "…")
    if not _COUNT.fullmatch(text):
        raise ValueError(f"--replicas {shown}: expected a whole number of replicas (1 or more)")
    if len(text.lstrip("+0")) > len(str(MAX_REPLICAS)):  # NOTE: int() of 5,000 digits raises
        raise ValueError(f"--replicas {shown}: at most {MAX_REPLICAS} replicas")
    return int(text)


def check_window(reader: RequestReader, spec: ReplaySpec) -> None:
    """A ``ValueError`` (``--from/--to: no request records between …``, as the command
    says it) when the window holds nothing to replay, or nothing the plan's replicas and
    route can place (``--replicas: …``); reads the window, stores nothing."""
    try:
        trace = load_trace(reader, spec.start, spec.end, tenant=spec.tenant, seed=spec.plan.seed)
        spec.plan.fleet(trace)
    except WorkloadError as error:
        raise ValueError(workload_message(error)) from None


def workload_message(error: Any) -> str:
    """A ``WorkloadError`` as the option it is about: ``--knob max_num_seqs: …``."""
    return f"{_option(error.field)}: {_message(error)}"


def _message(error: Exception) -> str:
    text = str(error)
    field = getattr(error, "field", "")
    return text[len(field) + 2 :] if field and text.startswith(f"{field}: ") else text
