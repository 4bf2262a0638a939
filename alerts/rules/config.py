"""The ``alerts:`` section of ``tailwatch.yaml``, validated into a :class:`AlertsConfig`.

.. code-block:: yaml

    alerts:
      window_scale: 1.0              # every window and for: times this (drills: 0.01)
      evaluation_interval: 15s       # how often the rules are evaluated
      in_collector: false            # true: tailwatch collect evaluates them too
      rules:
        queue-growth: {for: 1m, waiting_min: 16}       # override a built-in's fields
        gpu-health: {enabled: false}                   # disable a built-in
        slo-burn-rate: {runbook: https://wiki/slo}     # every SLO's burn-rate rules
        e2e-tail:                                      # a new rule: kind + its fields
          kind: tail-latency
          alert: tail-latency-incident
          metric: e2e
          threshold_seconds: 30
          median_max_seconds: 5
      notifiers:
        - webhook: http://127.0.0.1:9000/hook
        - alertmanager: http://127.0.0.1:9093
          timeout_seconds: 5

Durations (``for``, ``keep_firing_for``, every ``*window_seconds``) are seconds or a
Prometheus duration (``90s``, ``5m``, ``1h30m``). Silences are not configuration (``tailwatch
alerts silence``). Every error is a :class:`alerts.errors.RuleError` naming the rule and the
field, or a ``ValueError`` naming ``notifiers[i]``; ``collectors.config`` prefixes ``alerts:``.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

from alerts.errors import AlertsError, NotifierConfigError, RuleError
from alerts.notify.notifiers import AlertmanagerNotifier, Notifier, WebhookNotifier
from alerts.rules.base import MAX_DURATION_SECONDS
from alerts.rules.builtin import RuleSet, builtin_rule_set, with_rules
from alerts.rules.types import RULE_KINDS, BurnRateRule, Rule, check_number, config_key
from alerts.vocabulary import AlertName
from slo import ErrorRatioIndicator, ErrorSource, LatencyMetric, SLOSpec

SECTION_KEYS = ("window_scale", "evaluation_interval", "in_collector", "rules", "notifiers")
#: Prometheus's default ``evaluation_interval`` is 1m; 15 s pages a quarter-minute sooner.
DEFAULT_EVALUATION_INTERVAL_SECONDS = 15.0
NOTIFIER_KINDS = ("webhook", "alertmanager")
_NOTIFIER_KEYS = (*NOTIFIER_KINDS, "timeout_seconds")
#: Fields no config sets: identity, and what the SLOs decide for burn-rate rules.
_FIXED_FIELDS = {"name", "slo", "sli", "target", "windows", "selector", "checked_families"}
_DURATION = re.compile(r"(?:(\d+)(ms|s|m|h|d|w|y))+")
_DURATION_PART = re.compile(r"(\d+)(ms|s|m|h|d|w|y)")
_UNIT_SECONDS = {"ms": 1e-3, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800, "y": 31536000}
_ERROR_SOURCE_KEYS = ("source", "count_load_shedding", "count_aborts")
#: The key that addresses every burn-rate rule at once.
BURN_RATE_GROUP = str(AlertName.SLO_BURN_RATE)


@dataclass(frozen=True)
class NotifierConfig:
    """One ``alerts.notifiers`` entry: where to send, and the HTTP timeout."""

    kind: str
    url: str
    timeout_seconds: float = 10.0

    def build(self) -> Notifier:
        if self.kind == "webhook":
            return WebhookNotifier(self.url, timeout_seconds=self.timeout_seconds)
        return AlertmanagerNotifier(self.url, timeout_seconds=self.timeout_seconds)


@dataclass(frozen=True)
class AlertsConfig:
    """The rules to evaluate (built-ins, overridden and added, scaled), why an SLO got no
    rule (``notes``), the notifiers, how often to evaluate, and whether ``tailwatch collect``
    evaluates (``in_collector``) or a separate ``tailwatch alerts run`` does."""

    rules: RuleSet
    notes: tuple[str, ...] = ()
    notifiers: tuple[NotifierConfig, ...] = ()
    window_scale: float = 1.0
    evaluation_interval_seconds: float = DEFAULT_EVALUATION_INTERVAL_SECONDS
    in_collector: bool = False


def load_alerts(raw: Any, slos: Sequence[SLOSpec] = ()) -> AlertsConfig:
    """Validate the ``alerts:`` mapping (``None``: the built-ins for ``slos``)."""
    rule_set, notes = builtin_rule_set(slos)
    if raw is None:
        return AlertsConfig(rule_set, notes)
    if not isinstance(raw, Mapping):
        raise AlertsError(f"must be a mapping of {list(SECTION_KEYS)}, got {raw!r}")
    unknown = sorted(str(k) for k in raw if k not in SECTION_KEYS)
    if unknown:
        raise AlertsError(f"{unknown[0]}: unknown key (known: {', '.join(SECTION_KEYS)})")
    scale = raw.get("window_scale", 1.0)
    scale = check_number("window_scale", "window_scale", scale, low=0, low_open=True)
    rules_raw = {} if raw.get("rules") is None else raw["rules"]
    if not isinstance(rules_raw, Mapping):
        raise AlertsError(f"rules: must map rule names to fields, got {rules_raw!r}")
    rule_set = _apply(rule_set, rules_raw)
    if scale != 1.0:
        rule_set = rule_set.scaled(scale)
    notifiers = _notifiers(raw.get("notifiers", []))
    interval = raw.get("evaluation_interval", DEFAULT_EVALUATION_INTERVAL_SECONDS)
    try:
        interval = parse_duration("evaluation_interval", "evaluation_interval", interval)
    except RuleError as error:
        raise AlertsError(f"evaluation_interval: {error.problem}") from None
    if interval <= 0:
        raise AlertsError(f"evaluation_interval: must be above 0 s, got {interval:g}")
    in_collector = raw.get("in_collector", False)
    if not isinstance(in_collector, bool):
        raise AlertsError(f"in_collector: must be true or false, got {in_collector!r}")
    return AlertsConfig(rule_set, notes, notifiers, scale, interval, in_collector)


def _apply(rule_set: RuleSet, rules_raw: Mapping[Any, Any]) -> RuleSet:
    """Apply the entries in order, each to the rules as the entries before it left them (so
    ``slo-burn-rate`` and ``slo-burn-rate:<slo>:page`` both apply to that rule)."""
    current = {r.name: r for r in rule_set.rules}
    disabled: set[str] = set()
    for name, body in rules_raw.items():
        if not isinstance(name, str) or not name:
            raise RuleError(str(name), "name", "must be a non-empty string")
        if not isinstance(body, Mapping):
            raise RuleError(name, "rule", f"must be a mapping of fields, got {body!r}")
        targets = _targets(RuleSet(tuple(current.values())), name)
        enabled = body.get("enabled", True)
        if not isinstance(enabled, bool):
            raise RuleError(name, "enabled", f"must be true or false, got {enabled!r}")
        fields_raw = {k: v for k, v in body.items() if k != "enabled"}
        if name == BURN_RATE_GROUP:  # NOTE: valid with no SLOs too: it then changes nothing
            fields_raw.pop("kind", None)
            for key in fields_raw:
                _values(name, BurnRateRule, {key: fields_raw[key]})
        if not targets and name != BURN_RATE_GROUP:
            current[name] = _new_rule(name, fields_raw)
            if not enabled:
                disabled.add(name)
            continue
        if targets and "kind" in fields_raw and fields_raw["kind"] != targets[0].kind:
            raise RuleError(
                name, "kind", f"{name!r} is a built-in {targets[0].kind} rule; pick another name"
            )
        fields_raw.pop("kind", None)
        for target in targets:
            if not enabled:
                disabled.add(target.name)
            else:
                current[target.name] = _override(target, name, fields_raw)
    kept = [r for r in rule_set.rules if r.name not in disabled]
    return with_rules(RuleSet(tuple(kept)), [r for r in current.values() if r.name not in disabled])


def _targets(rule_set: RuleSet, name: str) -> list[Rule]:
    if name == BURN_RATE_GROUP:
        return [r for r in rule_set.rules if isinstance(r, BurnRateRule)]
    rule = rule_set.get(name)
    return [] if rule is None else [rule]


def _allowed(kind: type[Rule]) -> list[str]:
    keys = [config_key(f.name) for f in fields(kind) if f.name not in _FIXED_FIELDS]
    if "indicator" in keys:
        keys.remove("indicator")
        keys.extend(_ERROR_SOURCE_KEYS)
    return sorted(keys)


def _new_rule(name: str, body: Mapping[Any, Any]) -> Rule:
    kind_name = body.get("kind")
    if not isinstance(kind_name, str) or kind_name not in RULE_KINDS or kind_name in ("slo-burn-rate", "metric-absent"):  # fmt: skip
        kinds = [k for k in RULE_KINDS if k not in ("slo-burn-rate", "metric-absent")]
        raise RuleError(
            name,
            "kind",
            f"not a built-in rule, so it needs a kind, one of {kinds}; got {kind_name!r} "
            "(burn-rate rules come from slos:, metric-absent is built over the other rules)",
        )
    kind = RULE_KINDS[kind_name]
    values = _values(name, kind, {k: v for k, v in body.items() if k != "kind"})
    values.setdefault("alert", name)
    try:
        return kind(name=name, **values)
    except TypeError as error:  # a required field is missing
        missing = re.findall(r"'(\w+)'", str(error))
        field = config_key(missing[0]) if missing else "?"
        raise RuleError(name, field, f"required for a {kind_name} rule") from None


def _override(rule: Rule, name: str, body: Mapping[Any, Any]) -> Rule:
    values = _values(name, type(rule), body)
    # NOTE: a built-in tail rule's load weighs its rise_min; turning the comparison with the
    # past off (rise_min: null) takes the load's weighing with it, unless load is set too
    dropped = "rise_min" in values and values["rise_min"] is None and "load" not in values
    if dropped and getattr(rule, "load", None) is not None:
        values["load"] = None
    try:
        return replace(rule, **values)
    except RuleError as error:
        raise RuleError(name, error.field, error.problem) from None


def _values(name: str, kind: type[Rule], body: Mapping[Any, Any]) -> dict[str, Any]:
    allowed = _allowed(kind)
    by_key = {config_key(f.name): f.name for f in fields(kind)}
    values: dict[str, Any] = {}
    indicator: dict[str, Any] = {}
    for key, value in body.items():
        if not isinstance(key, str) or key not in allowed:
            allowed_text = ", ".join([*allowed, "enabled"])
            raise RuleError(name, str(key), f"unknown field; allowed: {allowed_text}")
        if key in _ERROR_SOURCE_KEYS:
            indicator[key] = value
            continue
        field_name = by_key[key]
        if field_name.endswith("window_seconds") or key in ("for", "keep_firing_for"):
            value = parse_duration(name, key, value)
        elif key == "metric":
            value = _enum(name, key, value, LatencyMetric)
        elif key == "throttle_reasons":
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise RuleError(name, key, f"must be a list of reasons, got {value!r}")
            value = tuple(value)
        values[field_name] = value
    if indicator:
        values["indicator"] = _indicator(name, indicator)
    return values


def _indicator(name: str, raw: Mapping[str, Any]) -> ErrorRatioIndicator:
    source = _enum(name, "source", raw.get("source", "requests"), ErrorSource)
    flags = {}
    for key in ("count_load_shedding", "count_aborts"):
        if key in raw:
            if not isinstance(raw[key], bool):
                raise RuleError(name, key, f"must be true or false, got {raw[key]!r}")
            flags[key] = raw[key]
    return ErrorRatioIndicator(source, **flags)


def _enum(name: str, key: str, value: Any, enum: Any) -> Any:
    values = [m.value for m in enum]
    if value not in values:
        raise RuleError(name, key, f"must be one of {values}, got {value!r}")
    return enum(value)


def parse_duration(rule: str, key: str, value: Any) -> float:
    """Seconds (a number >= 0) or a Prometheus duration such as ``1h30m``, as seconds."""
    if isinstance(value, str):
        if not _DURATION.fullmatch(value):
            raise RuleError(
                rule, key, f"must be seconds or a duration like 90s, 5m, 1h30m; got {value!r}"
            )
        seconds = sum(int(n) * _UNIT_SECONDS[u] for n, u in _DURATION_PART.findall(value))
        value = seconds
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise RuleError(
            rule, key, f"must be seconds or a duration like 90s, 5m, 1h30m; got {value!r}"
        )
    try:
        number = float(value)
    except OverflowError:  # an integer past float range
        number = math.inf
    if not (math.isfinite(number) and 0 <= number <= MAX_DURATION_SECONDS):
        limit = f"{MAX_DURATION_SECONDS:g}"
        raise RuleError(rule, key, f"must be 0 s to ten years ({limit} s), got {value!r}")
    return number


def _notifiers(raw: Any) -> tuple[NotifierConfig, ...]:
    if not isinstance(raw, list):
        raise AlertsError(f"notifiers: must be a list, got {raw!r}")
    configs = []
    for index, item in enumerate(raw):
        where = f"notifiers[{index}]"
        if not isinstance(item, Mapping):
            raise AlertsError(f"{where}: must be a mapping like {{webhook: URL}}, got {item!r}")
        unknown = sorted(str(k) for k in item if k not in _NOTIFIER_KEYS)
        if unknown:
            raise AlertsError(f"{where}.{unknown[0]}: unknown key (known: {', '.join(_NOTIFIER_KEYS)})")  # fmt: skip
        kinds = [k for k in NOTIFIER_KINDS if k in item]
        if len(kinds) != 1:
            raise AlertsError(f"{where}: needs exactly one of {list(NOTIFIER_KINDS)}, got {kinds}")
        config = NotifierConfig(kinds[0], item[kinds[0]], item.get("timeout_seconds", 10.0))
        try:
            config.build()
        except NotifierConfigError as error:
            raise AlertsError(f"{where}.{kinds[0]}: {error}") from None
        except (TypeError, AttributeError):
            raise AlertsError(
                f"{where}.{kinds[0]}: must be a URL, got {item[kinds[0]]!r}"
            ) from None
        configs.append(config)
    return tuple(configs)
