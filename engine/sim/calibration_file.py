"""A calibration on disk: the fitted step model of one engine on one machine, as JSON.

``tailwatch engine calibrate`` writes it; ``sim:<model>@file:<path>`` loads it, so the
simulator of that model runs with the fitted ``Efficiency`` on a device spec of the
profiled machine (its measured peaks, or a datasheet's for a known GPU). The file holds
the model's own shape (the engine's ``ModelConfig``, so any preset or checkpoint is
expressible), the dtype it ran in, the grid and residuals of the fit and the engine
knobs and torch version it was measured with. Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.errors import ConfigError
from engine.model.config import ModelConfig, ModelConfigError, RopeScaling
from engine.sim.specs import SIM_DTYPES, GpuSpec, SimModel
from engine.sim.step_cost import Efficiency
from engine.sim.step_noise import StepNoise

FORMAT = "tailwatch-calibration/1"


@dataclass(frozen=True)
class DeviceSpec:
    """The profiled device: what the step model's roofline is drawn against."""

    type: str  # "cpu" or "cuda"
    description: str
    peak_flops_per_second: float  # in the calibrated dtype
    memory_bandwidth_bytes_per_second: float
    memory_bytes: int
    peak_source: str  # "measured: ..." or a datasheet
    # NOTE: the KV budget the torch engine gives itself on this device when no knob says
    # (256 MiB on a CPU); None on CUDA, where it is sized from memory as the engine does.
    default_kv_cache_memory_bytes: int | None = None
    torch_threads: int | None = None

    def gpu_spec(self, dtype: str) -> GpuSpec:
        return GpuSpec(
            name="local",
            description=self.description,
            peak_flops_per_second={dtype: self.peak_flops_per_second},
            memory_bandwidth_bytes_per_second=self.memory_bandwidth_bytes_per_second,
            memory_bytes=self.memory_bytes,
            source=self.peak_source,
        )


@dataclass(frozen=True)
class Calibration:
    model: str  # the engine's --model (a preset name or a checkpoint path)
    shape: ModelConfig
    dtype: str
    device: DeviceSpec
    efficiency: Efficiency
    engine_knobs: dict[str, Any]
    torch_version: str
    created: str
    fit: dict[str, Any] = field(default_factory=dict)  # method, residuals, notes
    grid: dict[str, Any] = field(default_factory=dict)  # the profiled batch shapes
    cells: list[dict[str, Any]] = field(default_factory=list)  # per-shape residuals
    validation: dict[str, Any] | None = None
    # NOTE: optional within format 1: a file written before it loads with no noise
    step_noise: StepNoise | None = None

    def sim_model(self) -> SimModel:
        return SimModel(
            name=self.model,
            description=f"{self.model} (calibrated, {self.dtype})",
            shape=self.shape,
            source="the engine's own ModelConfig",
        )

    def to_json(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["efficiency"] = dataclasses.asdict(self.efficiency)
        body["step_noise"] = None if self.step_noise is None else self.step_noise.to_json()
        return {"format": FORMAT, **body}


def save_calibration(calibration: Calibration, path: Path) -> None:
    """Write ``calibration`` to ``path`` (whole, via a temporary file: never half a file)."""
    text = json.dumps(calibration.to_json(), indent=2, sort_keys=False, allow_nan=False)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text + "\n", encoding="utf-8")
    partial.replace(path)


def _problem(path: Path, why: str) -> ConfigError:
    return ConfigError(f"calibration file {path}: {why}")


def _get(body: dict[str, Any], key: str, kind: type | tuple[type, ...], path: Path) -> Any:
    if key not in body:
        raise _problem(path, f"missing {key!r}")
    value = body[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise _problem(path, f"{key}={value!r}: expected {_kind_name(kind)}")
    return value


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    return " or ".join(k.__name__ for k in _kinds(kind))


def _positive(body: dict[str, Any], key: str, path: Path) -> float:
    value = _get(body, key, (int, float), path)
    if not (math.isfinite(value) and value > 0):
        raise _problem(path, f"{key}={value!r}: must be a finite number > 0")
    return float(value)


def _shape(body: dict[str, Any], path: Path) -> ModelConfig:
    fields = dict(body)
    try:
        scaling = fields.pop("rope_scaling", None)
        if scaling is not None:
            if not isinstance(scaling, dict):
                raise _problem(path, f"shape.rope_scaling={scaling!r}: expected an object")
            fields["rope_scaling"] = RopeScaling(**scaling)
        eos = fields.get("eos_token_ids")
        if isinstance(eos, list):
            fields["eos_token_ids"] = tuple(eos)
        return ModelConfig(**fields)
    except (ModelConfigError, TypeError) as error:
        raise _problem(path, f"shape: {error}") from None


def load_calibration(path: str | Path) -> Calibration:
    """The calibration in ``path``; a ``ConfigError`` naming the path and the problem
    (missing, unreadable, not JSON, not a calibration, a missing or bad field)."""
    path = Path(path).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _problem(path, "no such file (write one with `tailwatch engine calibrate`)") from None
    except IsADirectoryError:
        raise _problem(path, "is a directory") from None
    except (OSError, UnicodeDecodeError) as error:
        raise _problem(path, f"cannot be read: {error}") from None
    try:
        body = json.loads(text)
    except json.JSONDecodeError as error:
        raise _problem(path, f"not JSON ({error})") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        found = body.get("format") if isinstance(body, dict) else type(body).__name__
        raise _problem(path, f"format={found!r}: not a {FORMAT} file")
    dtype = _get(body, "dtype", str, path)
    if dtype not in SIM_DTYPES:
        raise _problem(path, f"dtype={dtype!r}: must be one of {', '.join(SIM_DTYPES)}")
    device = _get(body, "device", dict, path)
    efficiency = _get(body, "efficiency", dict, path)
    try:
        fitted = Efficiency(
            compute=_get(efficiency, "compute", (int, float), path),
            bandwidth=_get(efficiency, "bandwidth", (int, float), path),
            step_overhead_seconds=_get(efficiency, "step_overhead_seconds", (int, float), path),
            request_overhead_seconds=_get(
                efficiency, "request_overhead_seconds", (int, float), path
            ),
        )
    except ConfigError as error:
        raise _problem(path, f"efficiency: {error}") from None
    kv_default = device.get("default_kv_cache_memory_bytes")
    if kv_default is not None and (
        isinstance(kv_default, bool) or not isinstance(kv_default, int) or kv_default < 1
    ):
        raise _problem(path, f"device.default_kv_cache_memory_bytes={kv_default!r}: must be > 0")
    threads = device.get("torch_threads")
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)):
        raise _problem(path, f"device.torch_threads={threads!r}: expected an integer or null")
    spec = DeviceSpec(
        type=_get(device, "type", str, path),
        description=_get(device, "description", str, path),
        peak_flops_per_second=_positive(device, "peak_flops_per_second", path),
        memory_bandwidth_bytes_per_second=_positive(
            device, "memory_bandwidth_bytes_per_second", path
        ),
        memory_bytes=int(_positive(device, "memory_bytes", path)),
        peak_source=_get(device, "peak_source", str, path),
        default_kv_cache_memory_bytes=kv_default,
        torch_threads=threads,
    )
    validation = body.get("validation")
    noise = body.get("step_noise")
    try:
        step_noise = None if noise is None else StepNoise.from_json(noise)
    except ConfigError as error:
        raise _problem(path, str(error)) from None
    return Calibration(
        model=_get(body, "model", str, path),
        shape=_shape(_get(body, "shape", dict, path), path),
        dtype=dtype,
        device=spec,
        efficiency=fitted,
        engine_knobs=_get(body, "engine_knobs", dict, path),
        torch_version=_get(body, "torch_version", str, path),
        created=_get(body, "created", str, path),
        fit=_get(body, "fit", dict, path),
        grid=_get(body, "grid", dict, path),
        cells=_get(body, "cells", list, path),
        validation=validation if isinstance(validation, dict) else None,
        step_noise=step_noise,
    )
