"""Canonical families onto the engine metric names a server holds, and back: the dialect table
(``collectors.dialect_rules``) read in reverse, so no engine name is typed twice.

A :class:`Source` is one dialect rule whose metric the server holds: the PromQL matchers that
select what a canonical label selector asks of it (``target`` is Prometheus's ``instance``,
``model`` vLLM's ``model_name``, a rule's ``match`` labels added, its ``set_labels`` checked),
and the canonical labels of a series it returns (as :func:`collectors.dialects.normalise` gives
them for a scrape).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from collectors import canonical as c
from collectors.canonical import Flag, Kind, Labels
from collectors.dialect_rules import (
    COMMON_RENAMES,
    PREFIXED_RULES,
    PREFIXES,
    UNPREFIXED_RULES,
    UNPREFIXED_TRTLLM_MIN,
    Rule,
)

#: Prometheus's label for the scraped target: Tailwatch's ``target``.
TARGET_LABEL = "instance"
#: The bundled engine's per-tenant families: selected only when ``tenant`` is named.
TENANT_FAMILY_PREFIX = "tailwatch:tenant_"

_LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")
_COLON_PREFIXES = tuple(prefix for prefix, _ in PREFIXES if prefix.endswith(":"))


@dataclass(frozen=True)
class Source:
    """One dialect rule whose metric the server holds, as the reader queries it.

    ``metric``: the stem of a histogram's ``_bucket``/``_sum`` series, or the sample name of a
    counter (``vllm:prompt_tokens_total``), a gauge, or a ``_sum`` read as a counter
    (``from_sum`` rules), in the spelling the server holds (Prometheus 2.x may hold
    ``vllm_…`` for ``vllm:…``)."""

    rule: Rule
    metric: str

    @property
    def kind(self) -> Kind:
        return c.FAMILIES[self.rule.family]

    @property
    def flags(self) -> frozenset[str]:
        """The rule's semantic flags, as the store keeps them on a series."""
        return frozenset(f.value for f in self.rule.flags if f in c.SEMANTIC_FLAGS)

    @property
    def is_renamed(self) -> bool:
        return Flag.RENAMED in self.rule.flags

    @property
    def scale(self) -> float:
        return self.rule.scale

    def matchers(self, selector: Mapping[str, str] | None, extra: str = "") -> str | None:
        """The matchers (``a="x",b="y"``, no braces) selecting what ``selector`` (canonical labels) asks of this
        source; ``None`` when the source cannot hold such series (a ``set_labels`` value that
        differs, a per-tenant family when no tenant is named)."""
        wanted = dict(selector or {})
        for name in wanted:
            if not isinstance(name, str) or not _LABEL_NAME.match(name):
                raise ValueError(
                    f"label selector: {name!r} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
                )
        is_tenant_family = self.rule.source.startswith(TENANT_FAMILY_PREFIX)
        if is_tenant_family and c.LABEL_TENANT not in wanted:
            return None  # NOTE: per-tenant series sit beside fleet-wide ones: never both
        inverse = {v: k for k, v in {**COMMON_RENAMES, **dict(self.rule.rename)}.items()}
        pairs: dict[str, str] = dict(self.rule.match)
        for name, value in wanted.items():
            if name in dict(self.rule.set_labels):
                if dict(self.rule.set_labels)[name] != value:
                    return None
                continue
            if name == c.LABEL_TARGET:
                pairs[TARGET_LABEL] = value
            else:
                pairs[inverse.get(name, name)] = value
        for name in c.BREAKDOWN_LABELS:
            if name not in wanted:
                pairs[name] = ""  # series without the breakdown label only
        text = ",".join(f"{k}={quote(v)}" for k, v in sorted(pairs.items()))
        # NOTE: the rule's match_prefix, "starts with, where the series carries the label"
        prefixes = ",".join(
            f"{k}=~{quote(re.escape(v) + '.*|')}" for k, v in sorted(self.rule.match_prefix)
        )
        return ",".join(x for x in (text, prefixes, extra) if x)

    def canonical(self, labels: Mapping[str, str]) -> Labels:
        """A returned series' labels as a scrape of it would be stored (``instance`` as
        ``target``, the model label renamed, the rule's match labels dropped)."""
        matched = {k for k, _ in self.rule.match}
        renames = {**COMMON_RENAMES, **dict(self.rule.rename)}
        out: dict[str, str] = {}
        for key, value in labels.items():
            if key in ("__name__", c.LABEL_LE, TARGET_LABEL) or key in matched:
                continue
            out[renames.get(key, key)] = value
        out.update(self.rule.set_labels)
        out[c.LABEL_TARGET] = labels.get(TARGET_LABEL, "")
        if self.rule.source.startswith(TENANT_FAMILY_PREFIX):
            out.setdefault(c.LABEL_TENANT, "")  # Prometheus keeps no empty label values
        return c.labels_key(out)


def resolve(family: str, names: Iterable[str]) -> list[Source]:
    """The sources of canonical ``family`` among the metric ``names`` a server holds, in the
    dialect table's order (current names before renamed ones)."""
    held = set(names)
    rules = [r for rules in PREFIXED_RULES.values() for r in rules]
    unprefixed = [r for rules in UNPREFIXED_RULES.values() for r in rules]
    if sum(1 for r in unprefixed if _metric(r, held)) >= UNPREFIXED_TRTLLM_MIN:
        rules += unprefixed  # NOTE: names this generic count only when several are present
    out = []
    for rule in rules:
        if rule.family != family:
            continue
        metric = _metric(rule, held)
        if metric is not None:
            out.append(Source(rule, metric))
    return out


def raw_metrics(name: str, names: Iterable[str]) -> list[str]:
    """The spellings of the raw sample ``name`` (a raw family less ``RAW_PREFIX``) the server
    holds, the name as exposed first: ``tailwatch:knob_changes_total``, then the
    ``tailwatch_knob_changes_total`` Prometheus 2.x may hold for it."""
    held = set(names)
    return [s for s in _spellings(name) if s in held]


def raw_matchers(selector: Mapping[str, str] | None, extra: str = "") -> str:
    """The matchers selecting what ``selector`` asks of a raw family: the store keeps a raw
    series' labels as exposed plus ``target``, so only ``target`` becomes ``instance``; a
    breakdown label (``tenant``) must be named to select series that carry it, as the store's."""
    wanted = dict(selector or {})
    pairs: dict[str, str] = {}
    for name, value in wanted.items():
        if not isinstance(name, str) or not _LABEL_NAME.match(name):
            raise ValueError(
                f"label selector: {name!r} is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)"
            )
        pairs[TARGET_LABEL if name == c.LABEL_TARGET else name] = value
    for name in c.BREAKDOWN_LABELS:
        pairs.setdefault(name, "")
    text = ",".join(f"{k}={quote(v)}" for k, v in sorted(pairs.items()))
    return ",".join(x for x in (text, extra) if x)


def raw_labels(labels: Mapping[str, str]) -> Labels:
    """A returned series' labels as the store keeps a raw series' (the exposed labels, ``le``
    included, plus ``target``: the model label is not renamed, as the collector keeps it)."""
    out = {k: v for k, v in labels.items() if k not in ("__name__", TARGET_LABEL)}
    out[c.LABEL_TARGET] = labels.get(TARGET_LABEL, "")
    return c.labels_key(out)


def _metric(rule: Rule, held: set[str]) -> str | None:
    """The name of ``rule``'s series on the server (see :class:`Source`), or ``None``."""
    kind = c.FAMILIES[rule.family]
    for stem in _spellings(rule.source):
        if rule.from_sum:
            if stem + "_sum" in held:
                return stem
        elif kind is Kind.HISTOGRAM:
            if stem + "_bucket" in held:
                return stem
        elif kind is Kind.COUNTER:
            for name in (stem + "_total", stem):  # TGI's counters have no _total
                if name in held:
                    return name
        elif stem in held:
            return stem
    return None


def _spellings(stem: str) -> tuple[str, ...]:
    """``vllm:x`` and the ``vllm_x`` Prometheus 2.x stores for prometheus_client 0.26."""
    for prefix in _COLON_PREFIXES:
        if stem.startswith(prefix):
            return (stem, prefix[:-1] + "_" + stem.removeprefix(prefix))
    return (stem,)


def quote(value: str) -> str:
    """A PromQL string literal (Go's escapes; JSON's are a subset)."""
    return json.dumps(value)
