"""The knobs of a sweep: ``--knob NAME=V1,V2,...`` and ``--engine-knobs K=V,...`` parsed into
typed values (by the type of the ``EngineConfig`` field), and each value checked as
``EngineConfig`` checks it, before anything runs.

A running engine (``--url``) can only change its live knobs (``engine.config.LIVE_KNOBS``,
through ``PATCH /admin/config``); a bundled or simulated one, started per value, can sweep
any field but ``model`` (the target itself).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from loadgen.errors import WorkloadError

_INT = re.compile(r"[+-]?\d+")
_TRUE, _FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
#: ``EngineConfig`` fields a sweep cannot vary: the engine is the target.
FIXED_KNOBS = ("model",)
#: Live knobs that are no ``EngineConfig`` field (the engine's KV pool share).
_EXTRA_LIVE = {"num_usable_gpu_blocks": "int"}


def check_engine(engine: str, field: str = "engine") -> None:
    """A ``sim:`` name the simulator knows, a bundled preset, or a checkpoint directory;
    else a ``WorkloadError`` naming ``field`` (``tailwatch sweep`` and ``replay``)."""
    from pathlib import Path

    from engine.errors import ConfigError
    from engine.sim.target import is_simulated, parse_target

    if is_simulated(engine):
        try:
            parse_target(engine)
        except ConfigError as error:
            raise WorkloadError(field, str(error)) from None
        return
    from engine.model.presets import PRESETS

    if engine not in PRESETS and not (engine.strip() and Path(engine).is_dir()):
        raise WorkloadError(
            field,
            f"{engine!r} is neither a bundled preset ({', '.join(sorted(PRESETS))}), a "
            "checkpoint directory, nor sim:<model>@<gpu>",
        )


def knob_types() -> dict[str, str]:
    """``EngineConfig`` field → its annotation (``"int"``, ``"int | None"``, ``"bool"``, ...)."""
    from engine.config import EngineConfig

    return {f.name: str(f.type) for f in fields(EngineConfig)}


def parse_value(knob: str, kind: str, text: str, flag: str) -> Any:
    """``text`` as a value of a knob of type ``kind``; a ``WorkloadError`` naming ``flag``."""
    raw = text.strip()
    if "None" in kind and raw.lower() in ("none", "null"):
        return None
    if kind.startswith("int"):
        if not _INT.fullmatch(raw):
            raise WorkloadError(flag, f"{knob}={text!r}: expected a whole number")
        return int(raw)
    if kind == "bool":
        if raw.lower() in _TRUE:
            return True
        if raw.lower() in _FALSE:
            return False
        raise WorkloadError(flag, f"{knob}={text!r}: expected true or false")
    if kind == "float":
        try:
            value = float(raw)
        except ValueError:
            raise WorkloadError(flag, f"{knob}={text!r}: expected a number") from None
        if not math.isfinite(value):
            raise WorkloadError(flag, f"{knob}={text!r}: expected a finite number")
        return value
    if not raw:
        raise WorkloadError(flag, f"{knob}={text!r}: expected a value")
    return raw


def _known(live_only: bool) -> dict[str, str]:
    types = knob_types()
    if live_only:
        from engine.config import LIVE_KNOBS

        return {k: types.get(k) or _EXTRA_LIVE[k] for k in LIVE_KNOBS}
    return {k: v for k, v in types.items() if k not in FIXED_KNOBS}


def parse_knob_option(text: str, *, live_only: bool = False) -> tuple[str, list[Any]]:
    """``"max_num_batched_tokens=512,4096"`` → (name, typed values, in order). Repeated values,
    an unknown knob (for a running engine: one that cannot change live) or a bad value are
    a ``WorkloadError`` naming ``--knob``."""
    name, sep, values = text.partition("=")
    name = name.strip()
    known = _known(live_only)
    if name not in known:
        where = "a live knob of a running engine" if live_only else "an engine knob"
        raise WorkloadError("--knob", f"{name!r} is not {where}; known: {', '.join(known)}")
    parts = [p for p in (p.strip() for p in values.split(",")) if p]
    if not sep or not parts:
        raise WorkloadError("--knob", f"{text!r}: give its values, e.g. {name}=512,1024,4096")
    typed = [parse_value(name, known[name], p, "--knob") for p in parts]
    if len(set(map(repr, typed))) != len(typed):
        raise WorkloadError("--knob", f"{text!r}: a value is repeated")
    return name, typed


def parse_engine_knobs(text: str, sweep_knob: str | None = None) -> dict[str, Any]:
    """``"max_model_len=8192,enable_prefix_caching=false"`` → the knobs every point shares
    (``EngineConfig`` fields, typed); a ``WorkloadError`` naming ``--engine-knobs``."""
    types = _known(live_only=False)
    knobs: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, sep, value = (s.strip() for s in part.partition("="))
        if not sep or name not in types:
            raise WorkloadError(
                "--engine-knobs", f"{part!r}: expected KNOB=VALUE, KNOB one of {', '.join(types)}"
            )
        if name == sweep_knob or name in knobs:
            raise WorkloadError("--engine-knobs", f"{name!r} is given twice (or is --knob's)")
        knobs[name] = parse_value(name, types[name], value, "--engine-knobs")
    return knobs


def check_values(
    model: str, base: Mapping[str, Any], knob: str, values: list[Any], flag: str = "--knob"
) -> None:
    """Each ``EngineConfig(model, **base, knob=value)`` must be valid (as the engine would
    check it at start); the first that is not is a ``WorkloadError`` naming ``flag``."""
    from engine.config import EngineConfig
    from engine.errors import ConfigError

    types = knob_types()
    shared = {k: v for k, v in base.items() if k in types}
    for value in values:
        if knob not in types:  # a live-only knob (num_usable_gpu_blocks)
            if value < 1:
                raise WorkloadError(flag, f"{knob}={value!r}: must be a positive integer")
            continue
        try:
            EngineConfig(**{**shared, "model": model, knob: value})
        except ConfigError as error:
            raise WorkloadError(flag, str(error)) from None
        except TypeError as error:  # NOTE: a value the dataclass cannot even compare
            raise WorkloadError(flag, f"{knob}={value!r}: {error}") from None
