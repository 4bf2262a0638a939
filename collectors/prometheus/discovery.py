"""Which engines a Prometheus-compatible server holds: every metric name that the dialect table
maps onto a canonical family (read in reverse, as the reader resolves names), its series over
a range, grouped by target (``instance``) and model. ``tailwatch up --prometheus`` prints this
and runs on it; a server with none gets one line saying what was looked for
(:func:`nothing_found_line`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from collectors import canonical as c
from collectors.dialect_rules import PREFIXES, Dialect
from collectors.dialects import primary_dialect
from collectors.prometheus import queries as q
from collectors.prometheus.names import TARGET_LABEL, resolve
from collectors.prometheus.reader import PrometheusReader

#: What each dialect's names look like, as the no-engine line says.
LOOKED_FOR = (
    "vLLM (vllm:*, old and new names)",
    "SGLang (sglang:*)",
    "TGI (tgi_*)",
    "llama.cpp (llamacpp:*)",
    "TensorRT-LLM (trtllm_*, or its unprefixed names)",
    "Dynamo (dynamo_*)",
    "Triton (nv_*)",
    "the bundled engine (tailwatch:*)",
)


@dataclass(frozen=True)
class EngineTarget:
    """One target and model the server holds engine series of. ``dialect``: the one that
    names the target (the bundled engine over the vLLM names it also exports);
    ``num_series``: its engine series (each histogram bucket one)."""

    dialect: str
    instance: str
    model: str
    num_series: int


@dataclass(frozen=True)
class Discovery:
    """What :func:`discover` found over ``[start, end]`` (Unix seconds)."""

    url: str
    match: str
    start: float
    end: float
    targets: tuple[EngineTarget, ...]

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(sorted({t.model for t in self.targets if t.model}))


def dialect_of(source_name: str) -> Dialect:
    """The dialect of a dialect-table source name (unprefixed names are TensorRT-LLM's)."""
    return next((d for prefix, d in PREFIXES if source_name.startswith(prefix)), Dialect.TRTLLM)


def discover(reader: PrometheusReader, start: float, end: float) -> Discovery:
    """The engine targets the server at ``reader``'s URL (within its ``match``) holds series
    of in ``[start, end]``: one ``/api/v1/series`` per engine metric name it holds."""
    names = reader.metric_names()
    queried: dict[str, list] = {}
    for family in c.FAMILIES:
        for source in resolve(family, names):
            series_name = source.metric
            if source.rule.from_sum:
                series_name += "_sum"
            elif source.kind is c.Kind.HISTOGRAM:
                series_name += "_bucket"
            queried.setdefault(series_name, []).append(source)
    seen: dict[tuple[str, str], set[tuple[tuple[str, str], ...]]] = {}
    dialects: dict[tuple[str, str], set[Dialect]] = {}
    for series_name, sources in sorted(queried.items()):
        found = reader.api.series([q.selector(series_name, reader.match)], start, end)
        for labels in found:
            instance = labels.get(TARGET_LABEL, "")
            model = dict(sources[0].canonical(labels)).get(c.LABEL_MODEL, "")
            key = (instance, model)
            seen.setdefault(key, set()).add(tuple(sorted(labels.items())))
            dialects.setdefault(key, set()).update(dialect_of(s.rule.source) for s in sources)
    targets = []
    for key, series in sorted(seen.items()):
        dialect = primary_dialect(dialects[key])
        name = dialect.value if dialect is not None else "?"
        targets.append(EngineTarget(name, key[0], key[1], len(series)))
    return Discovery(reader.api.url, reader.match, start, end, tuple(targets))


def discovery_table(found: Discovery) -> str:
    """The targets as an aligned table: dialect, instance, model, series."""
    rows = [("dialect", "instance", "model", "series")]
    rows += [
        (t.dialect, t.instance or "-", t.model or "-", str(t.num_series)) for t in found.targets
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    lines = [
        "  ".join(
            cell.ljust(w) if i < 3 else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(r, widths, strict=True))
        )
        for r in rows
    ]
    return "\n".join(line.rstrip() for line in lines)


def nothing_found_line(found: Discovery) -> str:
    """One line: no engine series, where, within what, and which names were looked for."""
    within = f" matching {found.match}" if found.match else ""
    days = (found.end - found.start) / 86400
    span = f"the last {days:g} days" if math.isfinite(days) else "its whole history"
    return (
        f"error: {found.url} holds no engine series{within} over {span}: looked for the "
        f"metric names of {', '.join(LOOKED_FOR)} that Tailwatch maps (collectors/dialect_rules.py); "
        "check that Prometheus scrapes your engines, or widen --match"
    )
