"""``sim:<model>@<gpu>``: the model name that selects the simulated forward pass.

``sim:<model>@file:<path>`` selects a calibration (``engine.sim.calibration_file``): the
model's own shape on the profiled device, with the fitted efficiency factors.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError
from engine.sim.specs import GPUS, SIM_MODELS, GpuSpec, SimModel
from engine.sim.step_cost import Efficiency
from engine.sim.step_noise import StepNoise

SIM_PREFIX = "sim:"
FILE_PREFIX = "file:"


def is_simulated(model: str) -> bool:
    """Whether a ``--model`` value asks for the simulator (then ``parse_target`` must pass)."""
    return isinstance(model, str) and model.startswith(SIM_PREFIX)


@dataclass(frozen=True)
class SimTarget:
    """A model shape on a GPU, as named by ``sim:<model>@<gpu>``."""

    model: SimModel
    gpu: GpuSpec
    # NOTE: set by a calibration file: its fitted factors, the dtype it was measured in,
    # the torch engine's default KV budget on that device, the name as written, and its
    # step-to-step noise (None: every step exactly its predicted time).
    efficiency: Efficiency | None = None
    dtype: str | None = None
    default_kv_cache_memory_bytes: int | None = None
    written_name: str | None = None
    step_noise: StepNoise | None = None

    @property
    def name(self) -> str:
        return self.written_name or f"{SIM_PREFIX}{self.model.name}@{self.gpu.name}"


def _known() -> str:
    return (
        f"known models: {', '.join(SIM_MODELS)}; known GPUs: {', '.join(GPUS)} "
        f"(e.g. {SIM_PREFIX}llama-3.1-8b@h100)"
    )


def parse_target(model: str) -> SimTarget:
    """The ``SimTarget`` of ``sim:<model>@<gpu>`` (case-insensitive names); one
    ``ConfigError`` naming the value and listing the known models and GPUs otherwise."""
    if not is_simulated(model):
        raise ConfigError(f"model={model!r}: a simulated model is named sim:<model>@<gpu>")
    body = model[len(SIM_PREFIX) :]
    model_name, at, gpu_name = body.partition("@")
    if at and gpu_name.startswith(FILE_PREFIX):
        return _calibrated_target(model, model_name, gpu_name[len(FILE_PREFIX) :])
    if not at or "@" in gpu_name:
        raise ConfigError(f"model={model!r}: write sim:<model>@<gpu>; {_known()}")
    sim_model = SIM_MODELS.get(model_name.strip().lower())
    if sim_model is None:
        raise ConfigError(f"model={model!r}: unknown simulated model {model_name!r}; {_known()}")
    gpu = GPUS.get(gpu_name.strip().lower())
    if gpu is None:
        raise ConfigError(f"model={model!r}: unknown GPU {gpu_name!r}; {_known()}")
    return SimTarget(sim_model, gpu)


def _calibrated_target(model: str, model_name: str, path: str) -> SimTarget:
    """``sim:<model>@file:<path>``: the calibration in ``path``, which must be of ``model``."""
    from engine.sim.calibration_file import load_calibration

    if not path:
        raise ConfigError(f"model={model!r}: write sim:<model>@file:<calibration.json>")
    try:
        calibration = load_calibration(path)
    except ConfigError as error:
        raise ConfigError(f"model={model!r}: {error}") from None
    if model_name.strip().lower() != calibration.model.lower():
        raise ConfigError(
            f"model={model!r}: calibration file {path} is of model {calibration.model!r}, "
            f"not {model_name!r} (use sim:{calibration.model}@file:{path})"
        )
    return SimTarget(
        calibration.sim_model(),
        calibration.device.gpu_spec(calibration.dtype),
        efficiency=calibration.efficiency,
        dtype=calibration.dtype,
        default_kv_cache_memory_bytes=calibration.device.default_kv_cache_memory_bytes,
        written_name=model,
        step_noise=calibration.step_noise,
    )
