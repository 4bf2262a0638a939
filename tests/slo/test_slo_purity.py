"""``slo`` is pure: plain data in, plain data out. No YAML, no files, no database, no network,
no UI and no torch; the application reads files (``tailwatch.config``) and hands ``slo``
parsed mappings. Enforced on the source, so a new import shows up here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import slo

SLO_DIR = Path(slo.__file__).parent
SOURCES = sorted(SLO_DIR.glob("*.py"))
#: Top-level modules ``slo`` must not import: config formats and I/O belong to the edges.
#: (``csv`` and ``io.StringIO`` stay allowed: ``focus_csv`` formats a string in memory.)
FORBIDDEN_MODULES = {
    "yaml", "tomllib", "os", "pathlib", "shutil", "tempfile", "glob",
    "socket", "urllib", "http", "httpx", "requests", "sqlite3", "sqlalchemy", "psycopg",
    "streamlit", "torch", "subprocess", "collectors", "engine", "tailwatch", "bench", "loadgen",
}  # fmt: skip
#: Calls that read or write files, whatever they were imported as.
FORBIDDEN_CALLS = {"open", "read_text", "write_text", "read_bytes", "write_bytes", "safe_load"}


def _imported_modules(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _called_names(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name):
                names.add(func.id)
            elif isinstance(func, ast.Attribute):
                names.add(func.attr)
    return names


def test_the_scan_sees_every_module() -> None:
    names = {path.name for path in SOURCES}
    assert {"__init__.py", "spec.py", "budget.py", "outcomes.py", "tpot.py"} <= names


@pytest.mark.parametrize("path", SOURCES, ids=lambda path: path.name)
def test_no_io_or_format_parsing_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    assert not _imported_modules(tree) & FORBIDDEN_MODULES
    assert not _called_names(tree) & FORBIDDEN_CALLS


def test_the_scan_would_catch_what_load_slos_file_did() -> None:
    # The shape the old slo.spec.load_slos_file had: both checks must flag it.
    tree = ast.parse(
        "import yaml\nfrom pathlib import Path\n"
        "def load(p):\n    return yaml.safe_load(Path(p).read_text())\n"
    )
    assert _imported_modules(tree) & FORBIDDEN_MODULES == {"yaml", "pathlib"}
    assert _called_names(tree) & FORBIDDEN_CALLS == {"safe_load", "read_text"}
