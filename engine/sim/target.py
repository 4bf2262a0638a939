"""``sim:<model>@<gpu>``: the model name that selects the simulated forward pass."""

from __future__ import annotations

from dataclasses import dataclass

from engine.errors import ConfigError
from engine.sim.specs import GPUS, SIM_MODELS, GpuSpec, SimModel

SIM_PREFIX = "sim:"


def is_simulated(model: str) -> bool:
    """Whether a ``--model`` value asks for the simulator (then ``parse_target`` must pass)."""
    return isinstance(model, str) and model.startswith(SIM_PREFIX)


@dataclass(frozen=True)
class SimTarget:
    """A model shape on a GPU, as named by ``sim:<model>@<gpu>``."""

    model: SimModel
    gpu: GpuSpec

    @property
    def name(self) -> str:
        return f"{SIM_PREFIX}{self.model.name}@{self.gpu.name}"


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
    if not at or "@" in gpu_name:
        raise ConfigError(f"model={model!r}: write sim:<model>@<gpu>; {_known()}")
    sim_model = SIM_MODELS.get(model_name.strip().lower())
    if sim_model is None:
        raise ConfigError(f"model={model!r}: unknown simulated model {model_name!r}; {_known()}")
    gpu = GPUS.get(gpu_name.strip().lower())
    if gpu is None:
        raise ConfigError(f"model={model!r}: unknown GPU {gpu_name!r}; {_known()}")
    return SimTarget(sim_model, gpu)
