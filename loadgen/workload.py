"""The workload: what to send and when, turned into a fixed schedule by one seed.

A workload is validated once (``parse_workload`` for YAML/CLI mappings) into a frozen
``Workload``; ``build_schedule`` turns it into ``ScheduledRequest``s ahead of the run, so
the same seed gives the same requests at the same offsets whatever the server does.

Prompts are token ids (lowercase ASCII letters, valid in any vocabulary): sent as ids to
``/v1/completions`` their length is exact on any server; sent as text to
``/v1/chat/completions`` it is exact on byte-level tokenizers and approximate elsewhere.
"""

from __future__ import annotations

import random
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from loadgen.arrivals import Arrivals
from loadgen.distributions import Fixed, LengthDistribution, Replay, load_replay, parse_length
from loadgen.errors import WorkloadError

_LETTERS = range(ord("a"), ord("z") + 1)
_DIGITS = range(ord("0"), ord("9") + 1)
# NOTE: a "timestamp" this long always spans the first KV block, so a salted prompt
# shares no full block with any other (prefix hashes chain over full blocks only).
SALT_TOKENS = 16


@dataclass(frozen=True)
class SharedPrefix:
    """A share of requests start with one of ``num_groups`` system prompts of ``tokens``.

    ``salt_per_request`` puts a per-request "timestamp" in front of the system prompt:
    the prompt change that breaks prefix caching.
    """

    num_groups: int = 0
    share: float = 0.0
    tokens: int = 0
    salt_per_request: bool = False


@dataclass(frozen=True)
class StructuredShare:
    """A share of requests ask for structured output: a JSON schema, one of ``num_schemas``
    per stream (so the engine's compiled-grammar cache sees misses, then hits)."""

    share: float = 0.0
    num_schemas: int = 1


def schema_of(stream: str, index: int) -> dict[str, Any]:
    """The JSON schema number ``index`` of a stream's structured requests (a fixed small
    object schema, told apart by its title: each one compiles, and caches, on its own)."""
    return {
        "title": f"{stream}-{index}",
        "type": "object",
        "properties": {"answer": {"type": "string"}, "score": {"type": "integer"}},
        "required": ["answer"],
    }


@dataclass(frozen=True)
class Workload:
    arrivals: Arrivals = field(default_factory=Arrivals)
    duration_seconds: float = 10.0
    prompt_tokens: LengthDistribution = field(default_factory=lambda: Fixed(128))
    output_tokens: LengthDistribution = field(default_factory=lambda: Fixed(64))
    replay: Replay | None = None
    prefix: SharedPrefix = field(default_factory=SharedPrefix)
    tenants: tuple[tuple[str, float], ...] = ()
    priorities: tuple[tuple[int, float], ...] = ()
    seed: int = 0
    name: str = "default"
    structured: StructuredShare = field(default_factory=StructuredShare)
    #: the ``model`` each request asks for, by weight (LoRA adapters); empty: none asked
    models: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class ScheduledRequest:
    index: int
    at_seconds: float
    prompt_token_ids: tuple[int, ...]
    max_tokens: int
    tenant: str | None
    priority: int | None
    prefix_group: int | None
    stream: str
    #: the replica index this request must go to (``Router``'s ``assigned`` policy: a
    #: replay's as-recorded or round-robin assignment); None: the router chooses
    replica: int | None = None
    #: the ``model`` it asks for (a LoRA adapter's name selects the adapter); None: the
    #: model the target serves
    model: str | None = None
    #: the index of its stream's JSON schema (``schema_of``) when it asks for structured
    #: output; None: it does not
    schema: int | None = None


def build_schedule(
    workloads: Sequence[Workload], offset_seconds: float = 0.0
) -> list[ScheduledRequest]:
    """Every request of ``workloads`` merged in time order, starting at ``offset_seconds``."""
    items: list[ScheduledRequest] = []
    for workload in workloads:
        rng = random.Random(workload.seed)
        for at in workload.arrivals.times(workload.duration_seconds, rng):
            items.append(_request(workload, offset_seconds + at, rng))
    items.sort(key=lambda r: r.at_seconds)
    return [replace(r, index=i) for i, r in enumerate(items)]


def _request(workload: Workload, at: float, rng: random.Random) -> ScheduledRequest:
    if workload.replay is not None:
        num_prompt, num_output = workload.replay.sample(rng)
    else:
        num_prompt = workload.prompt_tokens.sample(rng)
        num_output = workload.output_tokens.sample(rng)
    tenant = _weighted(workload.tenants, rng)
    priority = _weighted(workload.priorities, rng)
    prefix = workload.prefix
    group: int | None = None
    head: list[int] = []
    if prefix.num_groups and rng.random() < prefix.share:
        group = rng.randrange(prefix.num_groups)
        group_rng = random.Random(zlib.crc32(f"{workload.name}/{group}".encode()))
        head = [group_rng.choice(_LETTERS) for _ in range(prefix.tokens)]
        if prefix.salt_per_request:
            head = [rng.choice(_DIGITS) for _ in range(SALT_TOKENS)] + head
    head = head[: num_prompt - 1]
    tail = [rng.choice(_LETTERS) for _ in range(num_prompt - len(head))]
    schema = None
    structured = workload.structured
    # NOTE: draws only when asked, so a workload without it keeps its schedule for a seed
    if structured.share and rng.random() < structured.share:
        schema = rng.randrange(structured.num_schemas)
    model = _weighted(workload.models, rng)  # NOTE: no draw without models: seeds keep
    return ScheduledRequest(
        0, at, tuple(head + tail), num_output, tenant, priority, group, workload.name,
        model=model, schema=schema,
    )  # fmt: skip


def _weighted(choices, rng: random.Random):
    if not choices:
        return None
    names, weights = zip(*choices, strict=True)
    return rng.choices(names, weights)[0]


_KEYS = {
    "name", "rate", "duration", "arrivals", "burstiness", "prompt_tokens", "output_tokens",
    "replay", "prefix", "tenants", "priorities", "seed", "structured", "models",
}  # fmt: skip


def parse_workload(raw: Mapping[str, Any], where: str = "workload") -> Workload:
    """Validate a mapping (a scenario's YAML, or the CLI's options) into a ``Workload``.

    Keys: ``rate`` (req/s), ``duration`` (s), ``arrivals`` (poisson | gamma | constant),
    ``burstiness``, ``prompt_tokens`` / ``output_tokens`` (see ``parse_length``),
    ``replay`` (JSONL path), ``prefix`` ({groups, share, tokens, salt_per_request}),
    ``tenants`` ({name: weight}), ``priorities`` ({int: weight}), ``seed``, ``name``,
    ``structured`` ({share, schemas}: that share of requests asks for JSON matching one of
    ``schemas`` schemas), ``models`` ({name: weight}: the model each request asks for, a
    LoRA adapter's name selecting the adapter).
    """
    if not isinstance(raw, Mapping):
        raise WorkloadError(where, f"must be a mapping, got {raw!r}")
    unknown = set(raw) - _KEYS
    if unknown:
        raise WorkloadError(where, f"unknown keys {sorted(unknown)}; known: {sorted(_KEYS)}")
    base = Workload()
    arrivals = Arrivals(
        raw.get("arrivals", "poisson"), raw.get("rate", 1.0), raw.get("burstiness", 1.0)
    )
    duration = raw.get("duration", base.duration_seconds)
    if isinstance(duration, bool) or not isinstance(duration, int | float) or not duration > 0:
        raise WorkloadError(f"{where}.duration", f"must be > 0 seconds, got {duration!r}")
    seed = raw.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise WorkloadError(f"{where}.seed", f"must be an integer, got {seed!r}")
    replay = load_replay(raw["replay"]) if raw.get("replay") else None
    return Workload(
        arrivals=arrivals,
        duration_seconds=float(duration),
        prompt_tokens=parse_length(f"{where}.prompt_tokens", raw.get("prompt_tokens", 128)),
        output_tokens=parse_length(f"{where}.output_tokens", raw.get("output_tokens", 64)),
        replay=replay,
        prefix=_parse_prefix(raw.get("prefix") or {}, f"{where}.prefix"),
        tenants=_parse_weights(raw.get("tenants") or {}, f"{where}.tenants", str),
        priorities=_parse_weights(raw.get("priorities") or {}, f"{where}.priorities", int),
        seed=seed,
        name=str(raw.get("name", base.name)),
        structured=_parse_structured(raw.get("structured") or {}, f"{where}.structured"),
        models=_parse_weights(raw.get("models") or {}, f"{where}.models", str),
    )


def _parse_structured(raw: Any, where: str) -> StructuredShare:
    if not isinstance(raw, Mapping):
        raise WorkloadError(where, f"must be a mapping {{share, schemas}}, got {raw!r}")
    unknown = set(raw) - {"share", "schemas"}
    if unknown:
        raise WorkloadError(where, f"unknown keys {sorted(unknown)}; known: ['schemas', 'share']")
    share, schemas = raw.get("share", 0.0), raw.get("schemas", 1)
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise WorkloadError(f"{where}.share", f"must be a fraction in [0, 1], got {share!r}")
    if isinstance(schemas, bool) or not isinstance(schemas, int) or not 1 <= schemas <= 10_000:
        raise WorkloadError(
            f"{where}.schemas", f"must be an integer in [1, 10000], got {schemas!r}"
        )
    return StructuredShare(float(share), schemas)


def _parse_prefix(raw: Any, where: str) -> SharedPrefix:
    if not isinstance(raw, Mapping):
        raise WorkloadError(where, f"must be a mapping, got {raw!r}")
    unknown = set(raw) - {"groups", "share", "tokens", "salt_per_request"}
    if unknown:
        raise WorkloadError(where, f"unknown keys {sorted(unknown)}")
    groups, share, tokens = raw.get("groups", 0), raw.get("share", 1.0), raw.get("tokens", 0)
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 0:
        raise WorkloadError(f"{where}.groups", f"must be an integer >= 0, got {groups!r}")
    if isinstance(share, bool) or not isinstance(share, int | float) or not 0 <= share <= 1:
        raise WorkloadError(f"{where}.share", f"must be a fraction in [0, 1], got {share!r}")
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise WorkloadError(f"{where}.tokens", f"must be an integer >= 0, got {tokens!r}")
    if groups and not tokens:
        raise WorkloadError(f"{where}.tokens", "must be > 0 when groups are given")
    return SharedPrefix(groups, float(share), tokens, bool(raw.get("salt_per_request", False)))


def _parse_weights(raw: Any, where: str, key_type: type) -> tuple:
    if not isinstance(raw, Mapping):
        raise WorkloadError(where, f"must be a mapping of name → weight, got {raw!r}")
    pairs = []
    for key, weight in raw.items():
        try:
            name = key_type(key)
        except (TypeError, ValueError):
            raise WorkloadError(where, f"key {key!r} must be {key_type.__name__}") from None
        if isinstance(weight, bool) or not isinstance(weight, int | float) or not weight > 0:
            raise WorkloadError(f"{where}.{key}", f"weight must be > 0, got {weight!r}")
        pairs.append((name, float(weight)))
    return tuple(pairs)
