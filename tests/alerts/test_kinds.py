"""The table of rule kinds (alerts.kinds): one entry per kind carries its rule type, evaluation,
PromQL export and promtool case, and a kind missing any of them fails when the module is
imported, not in the middle of a tick or an export."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from dataclasses import dataclass
from typing import ClassVar

import pytest

import alerts.kinds as kinds
from alerts import KINDS, RegistryError, RuleKind, check_registry
from alerts.rules import RULE_KINDS, Rule


def test_every_kind_has_one_whole_entry() -> None:
    assert {rule.kind for rule in KINDS} == set(RULE_KINDS)
    for rule, entry in KINDS.items():
        assert entry.rule is rule and entry.name == rule.kind
        assert all(callable(getattr(entry, f.name)) for f in dataclasses.fields(entry)[1:])


@pytest.mark.parametrize("piece", ["evaluate", "export", "promtool_case"])
def test_an_entry_missing_a_piece_is_refused(piece: str) -> None:
    whole = KINDS[RULE_KINDS["target-down"]]
    with pytest.raises(RegistryError, match=f"'target-down' has no {piece}"):
        dataclasses.replace(whole, **{piece: None})


def test_a_kind_without_an_entry_is_named() -> None:
    entries = [e for e in KINDS.values() if e.name != "queue-growth"]
    with pytest.raises(RegistryError, match=r"without an entry in alerts\.kinds: queue-growth"):
        check_registry(entries)
    with pytest.raises(RegistryError, match="two entries"):
        check_registry([*KINDS.values(), KINDS[RULE_KINDS["queue-growth"]]])


@dataclass(frozen=True)
class _NewRule(Rule):
    kind: ClassVar[str] = "brand-new"


def test_an_entry_for_an_unknown_kind_is_named() -> None:
    stray = RuleKind(_NewRule, len, len, len)
    with pytest.raises(RegistryError, match="does not name: brand-new"):
        check_registry([*KINDS.values(), stray])


def test_a_new_kind_without_its_entry_fails_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kind added to RULE_KINDS (what the ``alerts:`` config parses) and nowhere else: the
    registry refuses to load, so no command gets as far as evaluating it."""
    monkeypatch.setitem(RULE_KINDS, "brand-new", _NewRule)  # type: ignore[index]
    monkeypatch.delitem(sys.modules, "alerts.kinds")
    with pytest.raises(TypeError, match=r"without an entry in alerts\.kinds: brand-new") as raised:
        importlib.import_module("alerts.kinds")
    assert type(raised.value).__name__ == "RegistryError"  # the class of the module it stopped
    monkeypatch.setitem(sys.modules, "alerts.kinds", kinds)


def test_a_rule_of_no_kind_is_a_rule_error() -> None:
    from alerts import RuleError

    with pytest.raises(RuleError, match="no evaluation for kind 'brand-new'"):
        kinds.kind_of(_NewRule(name="x", alert="X"))
