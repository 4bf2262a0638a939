"""The SLO model: typed, validated once at the edge, loaded from the ``slos:`` section of
``tailwatch.yaml`` (a mapping already read) or from a YAML file.

.. code-block:: yaml

    slos:
      - name: chat-latency
        description: interactive chat on the 8B model   # optional
        selector: {model: llama-3-8b, tenant: acme, route: /v1/chat/completions}  # each optional
        objectives: {ttft_seconds: 0.5, tpot_seconds: 0.05}  # at least one of the four
        target: 0.99          # attainment target, a fraction in (0, 1)
        period_days: 28       # 28 or 30

Every error is an :class:`SLOSpecError` naming the SLO (its name, or ``slos[i]`` before the
name is known) and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import yaml

from slo.errors import SLOSpecError

SUPPORTED_PERIOD_DAYS = (28, 30)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
_TOP_LEVEL_FIELDS = {"name", "description", "selector", "objectives", "target", "period_days"}


@dataclass(frozen=True)
class Selector:
    """Which traffic an SLO covers; ``None`` matches anything."""

    model: str | None = None
    tenant: str | None = None
    route: str | None = None

    def matches(self, model: str | None, tenant: str | None, route: str | None) -> bool:
        """True when every field given here equals the request's."""
        return all(
            wanted is None or wanted == actual
            for wanted, actual in ((self.model, model), (self.tenant, tenant), (self.route, route))
        )


@dataclass(frozen=True)
class Objectives:
    """Latency thresholds in seconds; a request meets an objective when its measured value is
    ``<=`` the threshold (``vllm bench serve --goodput`` semantics). ``None`` = not an objective."""

    ttft_seconds: float | None = None
    tpot_seconds: float | None = None
    itl_seconds: float | None = None
    e2e_seconds: float | None = None

    def given(self) -> Iterator[tuple[str, float]]:
        """``(field name, threshold_seconds)`` for each objective that is set."""
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                yield f.name, value


@dataclass(frozen=True)
class SLOSpec:
    """One service level objective."""

    name: str
    selector: Selector
    objectives: Objectives
    target: float
    period_days: int
    description: str = ""

    @property
    def error_budget(self) -> float:
        """Allowed fraction of bad requests, ``1 - target``."""
        return 1.0 - self.target

    @property
    def period_seconds(self) -> float:
        return self.period_days * 86400.0


def load_slos(config: Mapping[str, Any]) -> tuple[SLOSpec, ...]:
    """Validate the ``slos:`` list of a parsed ``tailwatch.yaml``; no section → no SLOs."""
    raw = config.get("slos")
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise SLOSpecError("slos", "slos", f"must be a list of SLOs, got {type(raw).__name__}")
    specs: list[SLOSpec] = []
    seen: set[str] = set()
    for position, item in enumerate(raw):
        spec = parse_slo(item, f"slos[{position}]")
        if spec.name in seen:
            raise SLOSpecError(spec.name, "name", "is used by another SLO; names must be unique")
        seen.add(spec.name)
        specs.append(spec)
    return tuple(specs)


def load_slos_file(path: str | Path) -> tuple[SLOSpec, ...]:
    """Read a YAML file (``tailwatch.yaml`` or one holding only ``slos:``) and validate it."""
    text = Path(path).read_text(encoding="utf-8")
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise SLOSpecError(str(path), "slos", f"is not valid YAML: {exc}") from exc
    if document is None:
        return ()
    if not isinstance(document, Mapping):
        raise SLOSpecError(str(path), "slos", "the file must hold a mapping with an 'slos' key")
    return load_slos(document)


def parse_slo(item: Any, where: str) -> SLOSpec:
    """Validate one SLO mapping; ``where`` names it in errors until its name is known."""
    if not isinstance(item, Mapping):
        raise SLOSpecError(where, "slo", f"must be a mapping, got {type(item).__name__}")
    name = item.get("name")
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise SLOSpecError(
            where,
            "name",
            f"must be letters, digits and _ . : - (starting with one of the "
            f"first two), got {name!r}",
        )
    unknown = sorted(set(item) - _TOP_LEVEL_FIELDS)
    if unknown:
        raise SLOSpecError(name, unknown[0], f"unknown field; known: {sorted(_TOP_LEVEL_FIELDS)}")
    description = item.get("description", "")
    if not isinstance(description, str):
        raise SLOSpecError(name, "description", "must be a string")
    return SLOSpec(
        name=name,
        selector=_selector(name, {} if item.get("selector") is None else item["selector"]),
        objectives=_objectives(name, item.get("objectives")),
        target=_target(name, item.get("target")),
        period_days=_period(name, item.get("period_days")),
        description=description,
    )


def _selector(name: str, raw: Any) -> Selector:
    if not isinstance(raw, Mapping):
        raise SLOSpecError(name, "selector", f"must be a mapping, got {type(raw).__name__}")
    known = {f.name for f in fields(Selector)}
    values: dict[str, str] = {}
    for key, value in raw.items():
        if key not in known:
            raise SLOSpecError(name, f"selector.{key}", f"unknown field; known: {sorted(known)}")
        if not isinstance(value, str) or not value:
            raise SLOSpecError(
                name, f"selector.{key}", f"must be a non-empty string, got {value!r}"
            )
        values[key] = value
    return Selector(**values)


def _objectives(name: str, raw: Any) -> Objectives:
    known = [f.name for f in fields(Objectives)]
    if not isinstance(raw, Mapping) or not raw:
        raise SLOSpecError(name, "objectives", f"must map at least one of {known} to seconds")
    values: dict[str, float] = {}
    for key, value in raw.items():
        if key not in known:
            hint = " (thresholds are in seconds: write ttft_seconds: 0.5)" if key == "ttft" else ""
            raise SLOSpecError(
                name, f"objectives.{key}", f"unknown objective; known: {known}{hint}"
            )
        if not _is_number(value) or not (math.isfinite(value) and value > 0):
            raise SLOSpecError(
                name, f"objectives.{key}", f"must be a positive number of seconds, got {value!r}"
            )
        values[key] = float(value)
    return Objectives(**values)


def _target(name: str, raw: Any) -> float:
    if not _is_number(raw) or not 0 < raw < 1:
        hint = f"; write {raw / 100:g} for {raw:g} %" if _is_number(raw) and 1 < raw < 100 else ""
        raise SLOSpecError(name, "target", f"must be a fraction in (0, 1), got {raw!r}{hint}")
    return float(raw)


def _period(name: str, raw: Any) -> int:
    if isinstance(raw, bool) or raw not in SUPPORTED_PERIOD_DAYS:
        raise SLOSpecError(
            name, "period_days", f"must be one of {list(SUPPORTED_PERIOD_DAYS)}, got {raw!r}"
        )
    return int(raw)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
