"""The simulator's speculative decoding and structured outputs: rates and costs, not models.

A simulated engine has no distribution to draft from nor grammar to match, so both features
are priced from a few knobs (``SimFeatureKnobs``), which an ``/admin/config`` patch (or a
scenario's ``admin:`` step) changes while it runs:

- ``spec_decode_acceptance_rate``: each draft token is accepted with this probability given
  the ones before it were (so ``vllm:spec_decode_num_accepted_tokens_per_pos`` falls off
  geometrically along the positions). The drafts are the tokens the simulator is about to
  sample (``SimDrafter``), so speculation never changes a simulated output, only how many
  tokens a step yields; a step is priced for every token it verifies (``engine/sim/runner``).
- ``structured_output_compile_seconds``: what a grammar compile costs on a cache miss, spent
  when the request joins the engine, as the torch engine compiles then.
- ``structured_output_mask_seconds``: what filling one structured request's token mask adds
  to a step.
- ``structured_output_truncation_share``: the share of structured outputs whose grammar would
  need more than ``max_tokens``: they end with ``length`` (and invalid JSON); the rest
  complete their grammar at their ``max_tokens``-th token and end with ``stop``.

NOTE: the defaults are orders of magnitude, not measurements: xgrammar compiles a JSON schema
against a 128k vocabulary in tens of milliseconds and fills a mask in tens of microseconds
(``tailwatch bench structured-outputs`` measures the byte vocabulary here).
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from engine.errors import ConfigError
from engine.request import Request
from engine.sim.runner import SimRunner, pseudo_random_tokens

# name -> (lowest, highest) accepted value
_BOUNDS: dict[str, tuple[float, float]] = {
    "spec_decode_acceptance_rate": (0.0, 1.0),
    "structured_output_compile_seconds": (0.0, 60.0),
    "structured_output_mask_seconds": (0.0, 1.0),
    "structured_output_truncation_share": (0.0, 1.0),
}


@dataclass(frozen=True)
class SimFeatureKnobs:
    spec_decode_acceptance_rate: float = 0.7
    structured_output_compile_seconds: float = 0.05
    structured_output_mask_seconds: float = 0.00005
    structured_output_truncation_share: float = 0.05

    def __post_init__(self) -> None:
        for knob, (low, high) in _BOUNDS.items():
            value = getattr(self, knob)
            if (
                isinstance(value, bool)
                or not isinstance(value, int | float)
                or not math.isfinite(value)
                or not low <= value <= high
            ):
                raise ConfigError(f"{knob}={value!r}: must be a number in [{low:g}, {high:g}]")
            object.__setattr__(self, knob, float(value))

    def changed(self, changes: Mapping[str, Any]) -> SimFeatureKnobs:
        """These knobs with ``changes`` applied (validated whole; ``ConfigError`` naming
        the knob for a bad value, and nothing changed)."""
        return replace(self, **changes)


SIM_FEATURE_KNOBS: tuple[str, ...] = tuple(f.name for f in fields(SimFeatureKnobs))


class SimFeatures:
    """The knobs in force, replaced whole between steps (shared by the runner, the drafter
    and the structured-output stand-in)."""

    def __init__(self, knobs: SimFeatureKnobs | None = None) -> None:
        self.knobs = knobs or SimFeatureKnobs()


def request_draw(seed: int, request_id: str, what: str) -> float:
    """A number in [0, 1) fixed by the engine's seed and the request id."""
    return zlib.crc32(f"{seed}:{what}:{request_id}".encode()) / float(1 << 32)


class SimDrafter:
    """Drafts the tokens the simulator will sample at those positions (a ``DraftProposer``),
    so every draft is "right"; ``spec_decode_acceptance_rate`` decides how many the step
    keeps."""

    def __init__(self, runner: SimRunner) -> None:
        self.runner = runner

    def propose(self, request: Request, max_drafts: int) -> list[int]:
        key = self.runner.request_key(request.request_id, request.sampling_params.seed)
        return pseudo_random_tokens(key, request.num_tokens, max_drafts)
