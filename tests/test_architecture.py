"""Packages import downward only (docs/architecture.md): the allowed package arrows, read from
the source by ``scripts/architecture.py`` (every import statement, at module top or inside a
function). A new arrow fails here until docs/architecture.md says why it belongs."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
_SPEC = importlib.util.spec_from_file_location("architecture", ROOT / "scripts/architecture.py")
architecture = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(architecture)

EVERYTHING = set(architecture.PACKAGES)

#: package -> the packages it may import (docs/architecture.md, one paragraph each).
ALLOWED: dict[str, set[str]] = {
    "slo": set(),
    "engine": set(),
    "collectors": {"slo"},
    "alerts": {"collectors", "engine", "slo"},
    "loadgen": {"alerts", "collectors", "engine", "slo"},
    "console": {"alerts", "collectors", "loadgen", "slo", "tailwatch"},
    "tailwatch": EVERYTHING - {"bench", "tailwatch"},
    "bench": EVERYTHING - {"bench", "tailwatch"},
}

#: What the console may import of the application: its config loader, nothing else.
CONSOLE_FROM_TAILWATCH = {"tailwatch.config"}


def _edges() -> dict[str, list[str]]:
    return architecture.graph(ROOT)


def test_packages_import_downward_only() -> None:
    arrows = architecture.package_arrows(_edges())
    wrong = sorted(f"{a} -> {b} ({n})" for (a, b), n in arrows.items() if b not in ALLOWED[a])
    assert wrong == [], "new package arrows: say why in docs/architecture.md, or move the code"


def test_collectors_import_nothing_of_alerts_console_or_the_cli() -> None:
    edges = _edges()
    found = [
        (source, target)
        for source, targets in edges.items()
        if source.startswith("collectors")
        for target in targets
        if target.split(".")[0] in {"alerts", "console", "tailwatch"}
    ]
    assert found == []


def test_slo_imports_nothing_of_the_project() -> None:
    edges = _edges()
    assert [(s, t) for s, ts in edges.items() if s.startswith("slo") for t in ts if not t.startswith("slo")] == []  # fmt: skip


def test_the_console_takes_only_the_config_loader_from_the_cli() -> None:
    borrowed = {
        target
        for source, targets in _edges().items()
        if source.startswith("console")
        for target in targets
        if target.startswith("tailwatch")
    }
    assert borrowed - CONSOLE_FROM_TAILWATCH == set(), "move what the console needs below the CLI"


def test_no_module_imports_itself_round_a_circle() -> None:
    """Arrows run one way between files too: no two modules import each other, directly or
    round a longer circle (docs/architecture.md)."""
    assert architecture.circles(_edges()) == []


def test_the_graph_reader_sees_arrows_and_circles(tmp_path) -> None:
    """The reader itself: an import inside a function counts, a relative import resolves, and
    two modules importing each other are a circle."""
    for package in architecture.PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "slo" / "a.py").write_text("def f():\n    from collectors import b\n")
    (tmp_path / "collectors" / "b.py").write_text("from . import c\n")
    (tmp_path / "collectors" / "c.py").write_text("import collectors.b\n")
    edges = architecture.graph(tmp_path)
    assert architecture.package_arrows(edges) == {("slo", "collectors"): 1}
    assert architecture.circles(edges) == [["collectors.b", "collectors.c"]]
