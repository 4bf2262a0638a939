"""Where an adapter comes from: a local PEFT directory, or seeded random weights. No torch.

``--lora-modules name=path`` (vLLM's flag) names an adapter and its source; a source is a
directory holding PEFT's ``adapter_config.json`` and ``adapter_model.safetensors``, or
``random:rank=8,seed=3`` (optionally ``alpha=16``, ``targets=q_proj+v_proj``): a demo
adapter whose weights a seed fixes, so every replica of a fleet serves the same one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from engine.errors import ConfigError

RANDOM_PREFIX = "random:"
#: The projections of the bundled Llama an adapter may target (PEFT's module names).
TARGET_MODULES: tuple[str, ...] = (
    "q_proj",
    "k_proj",
    "v_proj",
    "o_proj",
    "gate_proj",
    "up_proj",
    "down_proj",
)
#: PEFT's default targets for Llama (``TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING``).
DEFAULT_TARGET_MODULES: tuple[str, ...] = ("q_proj", "v_proj")
#: A name is a model id in requests and a label value in /metrics: kept short and plain.
MAX_LORA_NAME_CHARS = 128
MAX_RANDOM_RANK = 512
MAX_SEED = 2**63 - 1


class LoRANotFoundError(ConfigError):
    """An adapter path that does not exist (vLLM's ``LoRAAdapterNotFoundError``: a 404)."""


@dataclass(frozen=True)
class PeftDirectory:
    """A local PEFT adapter directory (read when the adapter is loaded)."""

    path: str

    def __str__(self) -> str:
        return self.path


@dataclass(frozen=True)
class RandomAdapter:
    """Seeded random LoRA weights of ``rank`` on ``target_modules``, scaled ``alpha / rank``
    as PEFT scales them."""

    rank: int
    seed: int = 0
    alpha: float | None = None  # None: alpha = rank (scaling 1)
    target_modules: tuple[str, ...] = DEFAULT_TARGET_MODULES

    @property
    def scaling(self) -> float:
        return (self.rank if self.alpha is None else self.alpha) / self.rank

    def __str__(self) -> str:
        text = f"{RANDOM_PREFIX}rank={self.rank},seed={self.seed}"
        if self.alpha is not None:
            text += f",alpha={self.alpha:g}"
        if self.target_modules != DEFAULT_TARGET_MODULES:
            text += f",targets={'+'.join(self.target_modules)}"
        return text


LoRASource = PeftDirectory | RandomAdapter


def check_lora_name(name: object, where: str = "lora_name") -> str:
    """``name`` if it can name an adapter (a request's ``model``, a metric label value);
    ``ConfigError`` naming ``where`` otherwise."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{where}={name!r}: give the adapter a non-empty name")
    if len(name) > MAX_LORA_NAME_CHARS or not name.isprintable() or "," in name:
        raise ConfigError(
            f"{where}={name!r}: at most {MAX_LORA_NAME_CHARS} printable characters and no "
            "comma (vllm:lora_requests_info joins adapter names with commas)"
        )
    return name


def parse_lora_source(text: object, where: str = "lora_path") -> LoRASource:
    """A source from its text: a directory path, or ``random:rank=R[,seed=S][,alpha=A]
    [,targets=q_proj+v_proj]``. ``ConfigError`` naming ``where`` and the bad part."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}={text!r}: give a PEFT adapter directory or random:rank=R")
    if not text.startswith(RANDOM_PREFIX):
        return PeftDirectory(text)
    fields: dict[str, str] = {}
    for part in text[len(RANDOM_PREFIX) :].split(","):
        key, eq, value = part.partition("=")
        key = key.strip()
        if not eq or key not in ("rank", "seed", "alpha", "targets") or key in fields:
            raise ConfigError(
                f"{where}={text!r}: {part!r} is not one of rank=, seed=, alpha=, targets= "
                "(each once), e.g. random:rank=8,seed=3"
            )
        fields[key] = value.strip()
    if "rank" not in fields:
        raise ConfigError(f"{where}={text!r}: a random adapter needs rank=, e.g. random:rank=8")
    rank = _int(fields["rank"], where, text, "rank", 1, MAX_RANDOM_RANK)
    seed = _int(fields.get("seed", "0"), where, text, "seed", 0, MAX_SEED)
    alpha = None
    if "alpha" in fields:
        try:
            alpha = float(fields["alpha"])
        except ValueError:
            alpha = math.nan
        if not math.isfinite(alpha) or alpha <= 0:
            raise ConfigError(f"{where}={text!r}: alpha must be a positive number")
    targets = DEFAULT_TARGET_MODULES
    if "targets" in fields:
        targets = tuple(t.strip() for t in fields["targets"].split("+"))
        unknown = [t for t in targets if t not in TARGET_MODULES]
        if unknown or len(set(targets)) != len(targets) or not targets:
            raise ConfigError(
                f"{where}={text!r}: targets must be distinct names joined by '+' from "
                f"{', '.join(TARGET_MODULES)}"
            )
    return RandomAdapter(rank=rank, seed=seed, alpha=alpha, target_modules=targets)


def _int(value: str, where: str, text: str, key: str, low: int, high: int) -> int:
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if not low <= number <= high:
        raise ConfigError(f"{where}={text!r}: {key} must be an integer in [{low}, {high}]")
    return number


def parse_lora_module(text: object) -> tuple[str, LoRASource]:
    """``name=source`` (vLLM's ``--lora-modules`` form) as (name, source)."""
    if not isinstance(text, str) or "=" not in text:
        raise ConfigError(
            f"lora_modules={text!r}: write name=path (a PEFT directory) or "
            "name=random:rank=8,seed=3"
        )
    name, _, source = text.partition("=")
    return check_lora_name(name.strip(), "lora_modules"), parse_lora_source(
        source.strip(), f"lora_modules[{name.strip()}]"
    )
