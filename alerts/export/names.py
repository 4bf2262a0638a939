"""Canonical families and labels → an engine's real metric and label names, from the dialect
table (``collectors/dialect_rules.py``), never typed twice; and which engines expose a set of
names. Also Prometheus's duration text.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from collectors import canonical as c
from collectors import dialect_rules as d
from collectors.dialect_rules import Dialect

#: Source families each engine's exposition holds. NOTE: the bundled engine serves vLLM's
#: names *and* its ``tailwatch:`` series (``engine/metric_names.py``), so its set is both.
EXPOSED: dict[Dialect, tuple[d.Rule, ...]] = {
    Dialect.VLLM: d.VLLM_RULES + d.VLLM_LORA_RULES,
    Dialect.TAILWATCH: d.VLLM_RULES + d.VLLM_LORA_RULES + d.TAILWATCH_RULES,
    Dialect.SGLANG: d.SGLANG_RULES,
    Dialect.TGI: d.TGI_RULES,
    Dialect.LLAMACPP: d.LLAMACPP_RULES,
    Dialect.TRTLLM: d.TRTLLM_RULES,
    Dialect.DYNAMO: d.DYNAMO_RULES,
    Dialect.TRITON: d.TRITON_RULES,
}
#: Engines the export writes names for: their counters end in ``_total`` on the wire
#: (prometheus_client), which the dialect table's family names drop.
EXPORT_DIALECTS = (Dialect.VLLM, Dialect.TAILWATCH)
#: Canonical label → the label a Prometheus scraping the engine stores. ``target`` is the
#: scrape's ``instance``; ``model`` is vLLM's ``model_name`` (``dialect_rules.COMMON_RENAMES``).
_LABELS = {
    c.LABEL_TARGET: "instance",
    **{canonical: source for source, canonical in d.COMMON_RENAMES.items()},
}
#: The bundled engine's per-tenant series (``engine/metric_names.py``).
TENANT_PREFIX = "tailwatch:tenant_"
_SUFFIX = {c.Kind.COUNTER: "_total", c.Kind.GAUGE: "", c.Kind.HISTOGRAM: ""}


@dataclass(frozen=True)
class EngineNames:
    """The names of one engine's exposition, as a Prometheus scraping it stores them."""

    dialect: Dialect

    def source(self, family: str) -> str | None:
        """The engine's family name for a canonical family (as the dialect table spells it,
        counters without ``_total``), or None when the engine has no plain equivalent."""
        for rule in EXPOSED[self.dialect]:
            is_plain = (
                rule.family == family
                and c.Flag.RENAMED not in rule.flags
                and not rule.match
                and not rule.from_sum
                and rule.scale == 1.0
                and not rule.source.startswith(TENANT_PREFIX)  # per-tenant breakdowns
            )
            if is_plain:
                return rule.source
        return None

    def matchers(self, family: str) -> dict[str, str]:
        """The regex matchers (keys ending in ``~``, as ``promql_text.selector`` takes them)
        that pick, of the plain source's series, those its rule maps (``match_prefix``):
        the label starts with the prefix, or is absent (``""`` matches an absent label), as
        the collector maps them. Empty when the rule maps every series."""
        source = self.source(family)
        for rule in EXPOSED[self.dialect]:
            if rule.source == source and rule.family == family:
                return {
                    self.label(k) + "~": re.escape(prefix) + ".*|"
                    for k, prefix in rule.match_prefix
                }
        return {}

    def tenant_source(self, family: str) -> str | None:
        """The engine's per-tenant breakdown of a family (the bundled engine's
        ``tailwatch:tenant_*`` series, labelled ``tenant``), or None."""
        for rule in EXPOSED[self.dialect]:
            if rule.family == family and rule.source.startswith(TENANT_PREFIX):
                return rule.source
        return None

    def metric(self, family: str, part: str = "", *, per_tenant: bool = False) -> str | None:
        """The stored series name: counters with ``_total``, histograms with ``part``
        (``_bucket``, ``_sum``, ``_count``); ``per_tenant``: of the per-tenant breakdown."""
        source = self.tenant_source(family) if per_tenant else self.source(family)
        if source is None:
            return None
        return source + _SUFFIX[c.FAMILIES[family]] + part

    @staticmethod
    def label(canonical: str) -> str:
        return _LABELS.get(canonical, canonical)


def engines_exposing(sources: Iterable[str]) -> tuple[str, ...]:
    """The engines (dialect values, sorted) whose exposition holds every source family."""
    wanted = set(sources)
    return tuple(
        sorted(
            dialect.value
            for dialect, rules in EXPOSED.items()
            if wanted <= {r.source for r in rules}
        )
    )
