"""The SLO model: typed and validated once, at the edge, from the ``slos:`` section of an
already parsed ``tailwatch.yaml``. Reading the file is the application's job
(``tailwatch.config.load_config``); nothing in ``slo`` does I/O.

.. code-block:: yaml

    slos:
      - name: chat-ttft
        description: interactive chat on the 8B model   # optional
        selector: {model: llama-3-8b, tenant: acme, route: /v1/chat/completions}  # each optional
        indicator:                                      # exactly one kind
          latency: {metric: ttft, threshold_seconds: 0.5}   # ttft, tpot, itl or e2e
        target: 0.99          # a fraction in (0, 1)
        period_days: 28       # 28 or 30
      - name: chat-availability
        indicator:
          errors: {source: requests}   # or http_responses; count_load_shedding, count_aborts
        target: 0.999
        period_days: 30

The older ``objectives: {ttft_seconds: 0.5}`` with exactly one threshold still reads as a
latency indicator; with several it is refused with the rewrite (one SLO per threshold).

Every error is an :class:`SLOSpecError` naming the SLO (its name, or ``slos[i]`` before the
name is known) and the field.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from slo.errors import SLOSpecError
from slo.indicators import (
    ErrorRatioIndicator,
    ErrorSource,
    Indicator,
    LatencyIndicator,
    LatencyMetric,
)
from slo.objectives import Objectives

SUPPORTED_PERIOD_DAYS = (28, 30)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]*")
_TOP_LEVEL_FIELDS = {"name", "description", "selector", "indicator", "target", "period_days"}
_LEGACY_OBJECTIVES = "objectives"  # the one-threshold form from before indicators had kinds


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
class SLOSpec:
    """One service level objective: what it measures (``indicator``, exactly one kind), over
    which traffic (``selector``), how often it must be good (``target``), over what period."""

    name: str
    selector: Selector
    indicator: Indicator
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
    unknown = sorted(map(str, set(item) - _TOP_LEVEL_FIELDS - {_LEGACY_OBJECTIVES}))
    if unknown:
        raise SLOSpecError(name, unknown[0], f"unknown field; known: {sorted(_TOP_LEVEL_FIELDS)}")
    description = item.get("description", "")
    if not isinstance(description, str):
        raise SLOSpecError(name, "description", "must be a string")
    return SLOSpec(
        name=name,
        selector=_selector(name, {} if item.get("selector") is None else item["selector"]),
        indicator=_indicator_of(name, item),
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


_LATENCY_EXAMPLE = "indicator: {latency: {metric: ttft, threshold_seconds: 0.5}}"
_ERRORS_EXAMPLE = "indicator: {errors: {source: requests}}"
_INDICATOR_KINDS = ("latency", "errors")
_LATENCY_FIELDS = ("metric", "threshold_seconds")
_ERRORS_FIELDS = ("source", "count_load_shedding", "count_aborts")


def _indicator_of(name: str, item: Mapping[str, Any]) -> Indicator:
    if "indicator" in item and _LEGACY_OBJECTIVES in item:
        raise SLOSpecError(
            name,
            _LEGACY_OBJECTIVES,
            "give indicator or objectives, not both (objectives is the older spelling of "
            "indicator: {latency: ...})",
        )
    if _LEGACY_OBJECTIVES in item:
        return _legacy_objectives(name, item[_LEGACY_OBJECTIVES])
    raw = item.get("indicator")
    if not isinstance(raw, Mapping) or len(raw) != 1:
        got = sorted(map(str, raw)) if isinstance(raw, Mapping) else repr(raw)
        raise SLOSpecError(
            name,
            "indicator",
            f"must hold exactly one kind, {' or '.join(_INDICATOR_KINDS)}, got {got} (e.g. "
            f"{_LATENCY_EXAMPLE} or {_ERRORS_EXAMPLE}; one SLO per indicator)",
        )
    ((kind, body),) = raw.items()
    if kind == "latency":
        return _latency(name, body, "indicator.latency")
    if kind == "errors":
        return _errors(name, body, "indicator.errors")
    raise SLOSpecError(
        name, f"indicator.{kind}", f"unknown indicator kind; known: {list(_INDICATOR_KINDS)}"
    )


def _latency(name: str, raw: Any, where: str) -> LatencyIndicator:
    body = _fields(name, raw, where, _LATENCY_FIELDS)
    metrics = [m.value for m in LatencyMetric]
    metric = body.get("metric")
    if metric not in metrics:
        hint = ""
        if isinstance(metric, str) and metric.removesuffix("_seconds") in metrics:
            hint = f" (write metric: {metric.removesuffix('_seconds')})"
        raise SLOSpecError(
            name, f"{where}.metric", f"must be one of {metrics}, got {metric!r}{hint}"
        )
    threshold = body.get("threshold_seconds")
    _check_seconds(name, f"{where}.threshold_seconds", threshold)
    return LatencyIndicator(LatencyMetric(metric), float(threshold))


def _errors(name: str, raw: Any, where: str) -> ErrorRatioIndicator:
    body = _fields(name, raw, where, _ERRORS_FIELDS)
    sources = [s.value for s in ErrorSource]
    source = body.get("source")
    if source not in sources:
        raise SLOSpecError(
            name,
            f"{where}.source",
            f"must be one of {sources}, got {source!r}: requests counts finished requests by "
            "finished_reason (vLLM, TGI, TensorRT-LLM, Dynamo), http_responses counts responses "
            "by status code (SGLang, the bundled engine)",
        )
    flags: dict[str, bool] = {}
    for key in ("count_load_shedding", "count_aborts"):
        if key in body:
            if not isinstance(body[key], bool):
                raise SLOSpecError(
                    name, f"{where}.{key}", f"must be true or false, got {body[key]!r}"
                )
            flags[key] = body[key]
    return ErrorRatioIndicator(ErrorSource(source), **flags)


def _legacy_objectives(name: str, raw: Any) -> LatencyIndicator:
    known = [f.name for f in fields(Objectives)]
    if not isinstance(raw, Mapping) or not raw:
        raise SLOSpecError(
            name,
            _LEGACY_OBJECTIVES,
            f"must map one of {known} to seconds; or write {_LATENCY_EXAMPLE}",
        )
    for key, value in raw.items():
        if key not in known:
            hint = " (thresholds are in seconds: write ttft_seconds: 0.5)" if key == "ttft" else ""
            raise SLOSpecError(
                name, f"{_LEGACY_OBJECTIVES}.{key}", f"unknown objective; known: {known}{hint}"
            )
        _check_seconds(name, f"{_LEGACY_OBJECTIVES}.{key}", value)
    if len(raw) > 1:
        rewrite = "; ".join(
            f"indicator: {{latency: {{metric: {key.removesuffix('_seconds')}, "
            f"threshold_seconds: {value:g}}}}}"
            for key, value in raw.items()
        )
        raise SLOSpecError(
            name,
            _LEGACY_OBJECTIVES,
            f"gives {len(raw)} thresholds, but an SLO's indicator judges one metric: write one "
            f"SLO per threshold ({rewrite})",
        )
    ((key, value),) = raw.items()
    return LatencyIndicator(LatencyMetric(key.removesuffix("_seconds")), float(value))


def _fields(name: str, raw: Any, where: str, known: tuple[str, ...]) -> Mapping[str, Any]:
    if not isinstance(raw, Mapping):
        raise SLOSpecError(name, where, f"must be a mapping of {list(known)}, got {raw!r}")
    for key in raw:
        if key not in known:
            raise SLOSpecError(name, f"{where}.{key}", f"unknown field; known: {list(known)}")
    return raw


def _check_seconds(name: str, field: str, value: Any) -> None:
    # NOTE: float(), not math.isfinite(value): an int past float range (YAML reads 1e400
    # written as digits as an int) raises OverflowError there instead of being refused.
    seconds = _as_float(value)
    if seconds is None or not (math.isfinite(seconds) and seconds > 0):
        raise SLOSpecError(name, field, f"must be a positive number of seconds, got {value!r}")


def _as_float(value: Any) -> float | None:
    """A YAML number as a float (``inf`` past float range); ``None`` for anything else."""
    if not _is_number(value):
        return None
    try:
        return float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf


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
