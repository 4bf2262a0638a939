"""The SLO model: loading from a tailwatch.yaml mapping or file, and its validation errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

import slo
from slo import Objectives, Selector, SLOSpec, load_slos, load_slos_file

VALID = {
    "name": "chat-latency",
    "selector": {"model": "llama-3-8b", "tenant": "acme", "route": "/v1/chat/completions"},
    "objectives": {"ttft_seconds": 0.5, "tpot_seconds": 0.05},
    "target": 0.99,
    "period_days": 28,
}


def with_changes(**changes) -> dict:
    item = dict(VALID) | changes
    return {key: value for key, value in item.items() if value is not ...}


def test_loads_a_typed_spec() -> None:
    (spec,) = load_slos({"slos": [VALID], "engine": {"ignored": True}})
    assert spec == SLOSpec(
        name="chat-latency",
        selector=Selector("llama-3-8b", "acme", "/v1/chat/completions"),
        objectives=Objectives(ttft_seconds=0.5, tpot_seconds=0.05),
        target=0.99,
        period_days=28,
    )
    assert spec.error_budget == pytest.approx(0.01)
    assert spec.period_seconds == 28 * 86400
    assert list(spec.objectives.given()) == [("ttft_seconds", 0.5), ("tpot_seconds", 0.05)]


def test_no_section_means_no_slos() -> None:
    assert load_slos({}) == ()
    assert load_slos({"slos": None}) == ()


def test_selector_fields_are_optional_and_match() -> None:
    (spec,) = load_slos({"slos": [with_changes(selector=...)]})
    assert spec.selector == Selector()
    assert spec.selector.matches("any", None, "/x")
    assert Selector(model="m").matches("m", "t", "/r")
    assert not Selector(model="m", tenant="t").matches("m", "u", "/r")


def test_loads_from_a_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "tailwatch.yaml"
    path.write_text(
        textwrap.dedent(
            """\
            slos:
              - name: batch-e2e
                objectives: {e2e_seconds: 30, itl_seconds: 0.2}
                target: 0.995
                period_days: 30
            """
        )
    )
    (spec,) = load_slos_file(path)
    assert spec.objectives == Objectives(itl_seconds=0.2, e2e_seconds=30.0)
    assert spec.period_days == 30


def test_empty_file_and_bad_yaml(tmp_path: Path) -> None:
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert load_slos_file(empty) == ()
    broken = tmp_path / "broken.yaml"
    broken.write_text("slos: [\n")
    with pytest.raises(slo.SLOSpecError, match="not valid YAML"):
        load_slos_file(broken)


@pytest.mark.parametrize(
    ("item", "slo_name", "field", "hint"),
    [
        (with_changes(name=""), "slos[0]", "name", "got ''"),
        (with_changes(name=...), "slos[0]", "name", "got None"),
        (with_changes(target=99), "chat-latency", "target", "write 0.99 for 99 %"),
        (with_changes(target=1.0), "chat-latency", "target", "fraction in (0, 1)"),
        (with_changes(target=True), "chat-latency", "target", "got True"),
        (with_changes(target="0.99"), "chat-latency", "target", "got '0.99'"),
        (with_changes(period_days=7), "chat-latency", "period_days", "[28, 30]"),
        (with_changes(objectives={}), "chat-latency", "objectives", "at least one"),
        (
            with_changes(objectives={"ttft": 500}),
            "chat-latency",
            "objectives.ttft",
            "ttft_seconds: 0.5",
        ),
        (
            with_changes(objectives={"ttft_seconds": -1}),
            "chat-latency",
            "objectives.ttft_seconds",
            "positive number of seconds, got -1",
        ),
        (
            with_changes(objectives={"e2e_seconds": float("inf")}),
            "chat-latency",
            "objectives.e2e_seconds",
            "got inf",
        ),
        (
            with_changes(selector={"region": "eu"}),
            "chat-latency",
            "selector.region",
            "unknown field",
        ),
        (with_changes(selector={"model": ""}), "chat-latency", "selector.model", "non-empty"),
        (with_changes(selector=["m"]), "chat-latency", "selector", "must be a mapping"),
        (with_changes(owner="me"), "chat-latency", "owner", "unknown field"),
        ("just a string", "slos[0]", "slo", "must be a mapping"),
    ],
)
def test_validation_errors_name_the_slo_and_field(item, slo_name, field, hint) -> None:
    with pytest.raises(slo.SLOSpecError) as caught:
        load_slos({"slos": [item]})
    error = caught.value
    assert (error.slo_name, error.field) == (slo_name, field)
    assert hint in str(error)
    assert f"SLO {slo_name!r}, field {field!r}" in str(error)


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(slo.SLOSpecError, match="used by another SLO"):
        load_slos({"slos": [VALID, VALID]})


def test_section_must_be_a_list() -> None:
    with pytest.raises(slo.SLOSpecError, match="must be a list"):
        load_slos({"slos": {"name": "x"}})
