"""Change events, as the store keeps them (revision 0008): one :class:`ChangeEvent` per
thing that changed on a target (or in the fleet's traffic), with when, before and after.
``collectors.changes`` finds them; triage, ``tailwatch changes list`` and the console read
them.

Four kinds (``docs/collectors.md``, "Change events"):

- ``config``: a label of an ``*_info`` gauge took another value (``vllm:cache_config_info``'s
  knobs after a restart, a model, version or quantisation label, a LoRA config);
- ``knob``: a live knob changed (``tailwatch:knob_changes_total`` moved); before and after
  come from the info gauge that carries the knob, when one does;
- ``target``: the set of targets changed: one was ``added``, ``removed`` or ``restarted``
  (a new instance id or start time, or its counters reset);
- ``traffic``: the traffic mix moved: a tenant's, a model's (a LoRA adapter is a model) or
  a route's share of the requests (``before``/``after`` are shares, ``0.250``).

An event's identity is ``(at_seconds, target, kind, source, subject)``: detecting the same
change twice stores it once. ``at_seconds`` is the first reading that showed the new state.
Plain data; nothing here reads a clock or a store. :func:`check_range` and
:func:`check_limit` are the reads' argument checks, shared by the SQL store and the memory one.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

#: The target of a change that is the fleet's, not one target's (the traffic mix).
FLEET_TARGET = ""
#: Longest text of an event's fields; longer label values are cut (a change of a 10 kB label
#: is still a change, and its first 512 characters say which).
MAX_TEXT_CHARS = 512


class ChangeKind(enum.StrEnum):
    CONFIG = "config"
    KNOB = "knob"
    TARGET = "target"
    TRAFFIC = "traffic"


class TargetChange(enum.StrEnum):
    """The ``subject`` of a ``target`` event."""

    ADDED = "added"
    REMOVED = "removed"
    RESTARTED = "restarted"


class MixDimension(enum.StrEnum):
    """The ``source`` of a ``traffic`` event: what the share is of."""

    TENANT = "tenant"
    MODEL = "model"
    ROUTE = "route"


class ChangeEventError(ValueError):
    """An event that cannot be kept exactly (a time that is not finite, a NUL in a name)."""


@dataclass(frozen=True)
class ChangeEvent:
    """One change: ``subject`` (a knob or label name, ``added``/``removed``/``restarted``, a
    tenant, model or route) of ``source`` (the family it was read from, or the traffic
    dimension) went from ``before`` to ``after`` at ``at_seconds`` (Unix seconds) on
    ``target`` (``""``: the fleet). ``before``/``after`` are ``""`` when not known (a knob
    no info gauge carries) or absent (a label that appeared)."""

    at_seconds: float
    target: str
    kind: ChangeKind
    subject: str
    before: str = ""
    after: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        if isinstance(self.at_seconds, bool) or not isinstance(self.at_seconds, int | float):
            raise ChangeEventError(f"at_seconds={self.at_seconds!r}: must be Unix seconds")
        if not math.isfinite(self.at_seconds):
            raise ChangeEventError(f"at_seconds={self.at_seconds!r}: must be finite")
        object.__setattr__(self, "at_seconds", float(self.at_seconds))
        object.__setattr__(self, "kind", ChangeKind(self.kind))
        for name in ("target", "subject", "before", "after", "source"):
            value = getattr(self, name)
            if not isinstance(value, str):
                raise ChangeEventError(f"{name}={value!r}: must be text")
            # NOTE: PostgreSQL text holds no NUL; the store keeps what it is given exactly
            object.__setattr__(self, name, value.replace("\x00", "\ufffd")[:MAX_TEXT_CHARS])

    @property
    def key(self) -> tuple[float, str, str, str, str]:
        """The event's identity (see the module docstring)."""
        return (self.at_seconds, self.target, self.kind.value, self.source, self.subject)

    @property
    def is_fleet(self) -> bool:
        return self.target == FLEET_TARGET


def share_text(share: float) -> str:
    """A traffic share as a ``traffic`` event keeps it: ``0.250``."""
    return f"{share:.3f}"


def _share(text: str) -> str:
    try:
        return f"{float(text):.0%}"
    except ValueError:
        return text or "?"


def describe_change(event: ChangeEvent) -> str:
    """What changed, without where or when: ``max_num_seqs 32 → 4``, ``quantization
    (vllm:model_info) none → int8``, ``restarted``, ``tenant batch 0% → 21% of requests``."""
    if event.kind is ChangeKind.TRAFFIC:
        return f"{event.source} {event.subject} {_share(event.before)} → {_share(event.after)} of requests"
    if event.kind is ChangeKind.TARGET:
        return event.subject
    values = ""
    if event.before or event.after:
        values = f" {event.before or '(none)'} → {event.after or '(none)'}"
    where = f" ({event.source})" if event.kind is ChangeKind.CONFIG and event.source else ""
    return f"{event.subject}{where}{values}"


def check_range(start: float, end: float) -> None:
    """A read's ``[start, end]``: numbers, not NaN (infinite ends are open)."""
    for name, value in (("start", start), ("end", end)):
        if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
            raise ValueError(f"{name}={value!r}: must be Unix seconds")


def check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"limit={limit!r}: must be a positive integer")


def newest(events: list[ChangeEvent], limit: int) -> list[ChangeEvent]:
    """The newest ``limit`` of ``events``, oldest first (the order every read returns)."""
    ordered = sorted(events, key=lambda e: e.key)
    return ordered[-limit:] if len(ordered) > limit else ordered
