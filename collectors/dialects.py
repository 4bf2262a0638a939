"""Dialect detection and normalisation: parsed ``prometheus_client`` families in, canonical
samples and histograms out (``collectors.canonical``), unknown families kept raw.

Parse with ``prometheus_client.parser.text_string_to_metric_families`` (text 0.0.4) or
``prometheus_client.openmetrics.parser.text_string_to_metric_families`` (exemplars), then
call :func:`normalise`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from prometheus_client.metrics_core import Metric
from prometheus_client.samples import Sample

from collectors import canonical as c
from collectors.canonical import (
    CanonicalHistogram,
    CanonicalSample,
    Exemplar,
    Flag,
    Kind,
    Labels,
    Normalised,
    RawSample,
)
from collectors.dialect_rules import (
    COMMON_RENAMES,
    GAPS,
    PREFIXED_RULES,
    PREFIXES,
    UNPREFIXED_RULES,
    UNPREFIXED_TRTLLM_MIN,
    Dialect,
    Rule,
)
from slo import ClassicHistogram, SLOError, parse_le

_HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count", "_created")
_CHILD_SUFFIXES = (*_HISTOGRAM_SUFFIXES, "_total")
_UNTYPED = ("unknown", "untyped")
#: When a dialect is present, which others' rules may also fire in the same exposition.
_PRIORITY = (
    Dialect.TAILWATCH, Dialect.DYNAMO, Dialect.VLLM, Dialect.SGLANG, Dialect.TRTLLM,
    Dialect.TGI, Dialect.LLAMACPP, Dialect.TRITON,
)  # fmt: skip


def detect_dialects(families: Iterable[Metric]) -> frozenset[Dialect]:
    """Every dialect whose families appear. The bundled engine shows as ``TAILWATCH`` plus
    ``VLLM``; a Dynamo worker passing TensorRT-LLM metrics through as ``DYNAMO`` plus
    ``TRTLLM``; unprefixed TensorRT-LLM only when enough of its names are present."""
    names = [_canonical_spelling(f.name) for f in _repair_escaped_colons(list(families))]
    return _detect(names)


def primary_dialect(dialects: Iterable[Dialect]) -> Dialect | None:
    """The dialect that names the target: ``TAILWATCH`` over ``VLLM``, ``DYNAMO`` over the
    engine it fronts; ``None`` when nothing was recognised."""
    present = set(dialects)
    return next((d for d in _PRIORITY if d in present), None)


def normalise(
    families: Iterable[Metric],
    target: str,
    default_labels: Mapping[str, str] | None = None,
) -> Normalised:
    """Map parsed families onto canonical families for one scrape of ``target``.

    Every output series carries ``target``; the engine's model label becomes ``model``; other
    source labels are kept verbatim so no two source series collapse into one.
    ``default_labels`` (e.g. ``{"model": …}`` for TGI, which has no model label) fill labels
    the source lacks. Histogram bounds and sums are scaled to seconds where a dialect uses ms.
    Families no rule maps, series a rule's label match leaves out, and families whose
    ``# TYPE`` contradicts the rule come back in ``raw`` with a note; ``_created`` samples
    of mapped families are dropped (they are exporter bookkeeping, §8.6).
    """
    family_list = _repair_escaped_colons(list(families))
    names = [_canonical_spelling(f.name) for f in family_list]
    dialects = _detect(names)
    rules_by_source = dict(PREFIXED_RULES)
    if Dialect.TRTLLM in dialects and _has_unprefixed_trtllm(names):
        rules_by_source.update(UNPREFIXED_RULES)
    base = {c.LABEL_TARGET: target}
    defaults = dict(default_labels or {})

    out = _Output(target)
    for family, name in zip(family_list, names, strict=True):
        rules = rules_by_source.get(name)
        if not rules:
            out.keep_raw(family.samples, family.type)
            continue
        used: set[int] = set()
        for rule in rules:
            used |= _apply(rule, family, base, defaults, out)
        leftover = [s for i, s in enumerate(family.samples) if i not in used and not _is_created(s)]
        out.keep_raw(leftover, family.type)
    samples, histograms = _prefer_current_names(out)
    notes = list(out.notes)
    for dialect in sorted(dialects, key=_PRIORITY.index):
        notes.extend(GAPS.get(dialect, ()))
    return Normalised(
        dialects=frozenset(d.value for d in dialects),
        samples=samples,
        histograms=histograms,
        raw=tuple(out.raw),
        notes=tuple(notes),
    )


class _Output:
    def __init__(self, target: str) -> None:
        self.target = target
        self.samples: list[CanonicalSample] = []
        self.histograms: list[CanonicalHistogram] = []
        self.raw: list[RawSample] = []
        self.notes: list[str] = []

    def keep_raw(self, samples: Iterable[Sample], family_type: str) -> None:
        self.raw.extend(
            RawSample(
                s.name,
                c.labels_key({**s.labels, c.LABEL_TARGET: self.target}),
                float(s.value),
                family_type,
            )
            for s in samples
        )


def _apply(
    rule: Rule, family: Metric, base: dict[str, str], defaults: dict[str, str], out: _Output
) -> set[int]:
    """Apply one rule; return the indices of the samples it consumed."""
    kind = c.FAMILIES[rule.family]
    wants_histogram = kind is Kind.HISTOGRAM or rule.from_sum
    flags = set(rule.flags)
    if wants_histogram and family.type != "histogram":
        out.notes.append(
            f"{family.name}: expected a histogram for {rule.family}, got {family.type!r}; kept raw"
        )
        return set()
    if not wants_histogram and family.type != kind.value:
        if family.type not in _UNTYPED:
            out.notes.append(
                f"{family.name}: expected a {kind.value} for {rule.family}, got "
                f"{family.type!r}; kept raw"
            )
            return set()
        flags.add(Flag.TYPE_ASSUMED)
    selected = [(i, s) for i, s in enumerate(family.samples) if rule.selects(s.labels)]
    frozen_flags = frozenset(flags)
    if not wants_histogram:
        for _, s in selected:
            if _is_created(s):
                continue
            out.samples.append(
                CanonicalSample(
                    rule.family,
                    _labels(rule, s.labels, base, defaults),
                    float(s.value) * rule.scale,
                    kind,
                    frozen_flags,
                    family.name,
                )
            )
        return {i for i, _ in selected}
    groups: dict[Labels, list[tuple[int, Sample]]] = {}
    for i, s in selected:
        key = c.labels_key({k: v for k, v in s.labels.items() if k != c.LABEL_LE})
        groups.setdefault(key, []).append((i, s))
    consumed: set[int] = set()
    for key, members in groups.items():
        histogram = _histogram(rule, family.name, [s for _, s in members], out)
        if histogram is None:
            continue
        upper_bounds, counts, sum_value, count, exemplars = histogram
        labels = _labels(rule, dict(key), base, defaults)
        if rule.from_sum:
            if sum_value is not None:
                out.samples.append(
                    CanonicalSample(rule.family, labels, sum_value, kind, frozen_flags, family.name)
                )
        else:
            out.histograms.append(
                CanonicalHistogram(
                    rule.family,
                    labels,
                    upper_bounds,
                    counts,
                    sum_value,
                    count,
                    frozen_flags,
                    family.name,
                    exemplars,
                )
            )
        consumed |= {i for i, _ in members}
    return consumed


def _prefer_current_names(
    out: _Output,
) -> tuple[tuple[CanonicalSample, ...], tuple[CanonicalHistogram, ...]]:
    """Drop a series read from a renamed name when the current name gives the same series.

    vLLM exposes both spellings while a name is deprecated but not hidden (0.9.2 to 0.10 for
    ``gpu_cache_usage_perc``); keeping both would store one series twice per scrape."""

    def keep(items: list) -> tuple:
        current = {(i.family, i.labels) for i in items if Flag.RENAMED not in i.flags}
        kept = []
        for item in items:
            if Flag.RENAMED in item.flags and (item.family, item.labels) in current:
                out.notes.append(
                    f"{item.source}: same series as its current name gives; the current name wins"
                )
                continue
            kept.append(item)
        return tuple(kept)

    return keep(out.samples), keep(out.histograms)


def _histogram(
    rule: Rule, name: str, samples: list[Sample], out: _Output
) -> tuple[tuple[float, ...], tuple[float, ...], float | None, float, tuple[Exemplar, ...]] | None:
    buckets: list[tuple[float, float]] = []
    exemplars: list[Exemplar] = []
    sum_value: float | None = None
    count: float | None = None
    for s in samples:
        if s.name.endswith("_bucket"):
            bound = parse_le(s.labels.get(c.LABEL_LE, ""))
            if bound is None:
                out.notes.append(f"{name}: bucket le={s.labels.get(c.LABEL_LE)!r} unparsable")
                continue
            scaled = bound * rule.scale if math.isfinite(bound) else bound
            buckets.append((scaled, float(s.value)))
            if s.exemplar is not None:
                exemplars.append(
                    Exemplar(
                        scaled,
                        float(s.exemplar.value) * rule.scale,
                        c.labels_key(s.exemplar.labels),
                        None if s.exemplar.timestamp is None else float(s.exemplar.timestamp),
                    )
                )
        elif s.name.endswith("_sum"):
            sum_value = float(s.value) * rule.scale
        elif s.name.endswith("_count"):
            count = float(s.value)
    try:
        classic = ClassicHistogram.from_buckets(buckets, sum_value)
    except SLOError as error:
        out.notes.append(f"{name}: not a usable histogram ({error}); kept raw")
        return None
    total = classic.total_count if count is None else count
    return classic.upper_bounds, classic.cumulative_counts, sum_value, total, tuple(exemplars)


def _labels(
    rule: Rule, source: Mapping[str, str], base: dict[str, str], defaults: dict[str, str]
) -> Labels:
    matched = {k for k, _ in rule.match}
    renames = {**COMMON_RENAMES, **dict(rule.rename)}
    labels = dict(defaults)
    for key, value in source.items():
        if key not in matched:
            labels[renames.get(key, key)] = value
    labels.update(rule.set_labels)
    labels.update(base)
    return c.labels_key(labels)


def _detect(names: list[str]) -> frozenset[Dialect]:
    found = {d for name in names for prefix, d in PREFIXES if name.startswith(prefix)}
    if _has_unprefixed_trtllm(names):
        found.add(Dialect.TRTLLM)
    return frozenset(found)


def _has_unprefixed_trtllm(names: list[str]) -> bool:
    return len(set(names) & set(UNPREFIXED_RULES)) >= UNPREFIXED_TRTLLM_MIN


def _canonical_spelling(name: str) -> str:
    # Older Dynamo documentation shows TensorRT-LLM metrics as trtllm:…
    return "trtllm_" + name.removeprefix("trtllm:") if name.startswith("trtllm:") else name


def _is_created(sample: Sample) -> bool:
    return sample.name.endswith("_created")


def _repair_escaped_colons(families: list[Metric]) -> list[Metric]:
    """Re-attach samples that ``prometheus_client`` 0.26 served with ``:`` escaped to ``_``
    under a ``# TYPE`` line that kept the colon (§8.9; client_python #1177). The parser then
    yields an empty typed family plus one untyped family per sample suffix."""
    typed_empty = {f.name.replace(":", "_"): f for f in families if ":" in f.name and not f.samples}
    if not typed_empty:
        return families
    adopted: dict[str, list[Sample]] = {name: [] for name in typed_empty}
    kept: list[Metric] = []
    for family in families:
        escaped = None
        if family.type in _UNTYPED:
            stem = next(
                (family.name.removesuffix(x) for x in _CHILD_SUFFIXES if family.name.endswith(x)),
                family.name,
            )
            escaped = stem if stem in typed_empty else None
        if escaped is None:
            kept.append(family)
        else:
            adopted[escaped].extend(family.samples)
    repaired: list[Metric] = []
    for family in kept:
        escaped = family.name.replace(":", "_")
        if family.samples or escaped not in typed_empty:
            repaired.append(family)
            continue
        copy = Metric(family.name, family.documentation, family.type, family.unit)
        copy.samples = [
            s._replace(name=family.name + s.name.removeprefix(escaped)) for s in adopted[escaped]
        ]
        repaired.append(copy)
    return repaired
