"""Generated scenarios: a seed in, concrete incident and benign scenarios out.

``generate(seed, count)`` draws ``count`` scenarios from the kinds table (``kinds.py``),
each a mapping ``loadgen.scenario.parse_scenario`` accepts, with a ``generated:`` block that
records the draws; ``write_scenarios`` writes them as YAML files. Deterministic for a seed.
See docs/loadgen.md, "Generated scenarios".
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from loadgen.errors import WorkloadError
from loadgen.generate.assemble import build_scenario
from loadgen.generate.capacity import GPU_CHOICES, GpuChoice, replica_capacity_rps
from loadgen.generate.kinds import KINDS, Kind
from loadgen.generate.write import write_scenarios
from loadgen.virtual.drill import VirtualTiming

#: The most scenarios one call generates (a benchmark runs hundreds; millions is a typo).
MAX_COUNT = 10_000

__all__ = [
    "GPU_CHOICES",
    "KINDS",
    "MAX_COUNT",
    "GpuChoice",
    "Kind",
    "generate",
    "parse_kinds",
    "replica_capacity_rps",
    "write_scenarios",
]


def parse_kinds(names: Sequence[str] | None) -> list[Kind]:
    """The kinds named (all when ``None``); ``WorkloadError`` naming an unknown one."""
    if names is None:
        return list(KINDS.values())
    chosen = [name.strip() for name in names if name.strip()]
    if not chosen:
        raise WorkloadError("kinds", f"names no kind; known: {sorted(KINDS)}")
    unknown = [name for name in chosen if name not in KINDS]
    if unknown:
        raise WorkloadError("kinds", f"unknown kind {unknown[0]!r}; known: {sorted(KINDS)}")
    return [KINDS[name] for name in dict.fromkeys(chosen)]


def generate(
    seed: int,
    count: int,
    kinds: Sequence[str] | None = None,
    timing: VirtualTiming | None = None,
    *,
    benign_share: float = 0.5,
) -> list[dict[str, Any]]:
    """``count`` scenario mappings for ``seed`` (named ``gen-<seed>-<nn>-<kind>``), of
    ``kinds`` (all by default), a ``benign_share`` of them benign where both classes are
    among the kinds, timed for ``timing`` (the virtual drill's default). Scenario ``i`` is
    the same whatever ``count`` is. ``WorkloadError`` naming the argument for a bad one."""
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise WorkloadError("seed", f"must be an integer, got {seed!r}")
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_COUNT:
        raise WorkloadError("count", f"must be an integer from 1 to {MAX_COUNT}, got {count!r}")
    if (
        isinstance(benign_share, bool)
        or not isinstance(benign_share, int | float)
        or not (0 <= benign_share <= 1)
    ):
        raise WorkloadError("benign_share", f"must be a fraction in [0, 1], got {benign_share!r}")
    chosen = parse_kinds(kinds)
    timing = timing or VirtualTiming()
    return [build_scenario(seed, i, chosen, timing, benign_share) for i in range(count)]
