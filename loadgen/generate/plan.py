"""What a kind of generated scenario makes of its draws: the traffic, the engine, and the
phase changes that take the fleet from its baseline to the perturbation and back.

A kind's plan is a function of one :class:`Draw` (kinds.py holds the table). Its
perturbation is a function of a level in (0, 1]: 1 is the full magnitude, and a ramp's
sub-phases ask for the levels in between. A fragment is what a scenario phase adds to its
name and duration (``change``, ``extra``, ``admin``, ``active_replicas``, ``restart``), as
``docs/loadgen.md`` describes them; since a ``change`` lasts until changed again and an
``extra`` stream only for its phase, a fragment states the whole perturbation at its level.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from random import Random
from typing import Any

from loadgen.generate.base import Base
from loadgen.generate.timing import RuleClock

Fragment = dict[str, Any]


@dataclass(frozen=True)
class Draw:
    """What every kind drew: the fleet and traffic, the magnitude and share (from the
    kind's ranges), the clock of the rule that should catch it, the number of ramp
    sub-phases before the perturbation (0: a step onset), and the generator's rng for what
    the kind draws itself."""

    rng: Random
    base: Base
    magnitude: float
    share: float
    clock: RuleClock
    num_ramp: int = 0


@dataclass(frozen=True)
class Plan:
    """A kind's scenario: ``workloads`` and ``engine`` for every phase, the fragment at a
    level (``at_level``) and the one that ends it (``recovery``), ``active`` replicas before
    the perturbation (None: all), the replica ``expects.replica`` names, the magnitude and
    share as realised (a draw may be bounded by the fleet: a whole replica, a minimum KV
    pool), what the rest of ``generated.details`` records, the warm-up it needs, and the
    ``expects.factor`` where the kind can bound it better than its magnitude does."""

    workloads: list[dict[str, Any]]
    engine: dict[str, Any]
    at_level: Callable[[float], Fragment]
    recovery: Fragment
    magnitude: float
    share: float
    details: dict[str, Any] = field(default_factory=dict)
    active: list[int] | None = None
    replica: int | None = None
    warmup_seconds: float | None = None
    factor: float | None = None
    #: merged into the warm-up phase: what is there from the start (a gateway's overhead)
    start: Fragment = field(default_factory=dict)
