"""The house's shape, measured the same way before and after a re-layout (issue 23).

``python scripts/architecture.py [--json]`` prints, for the project's top-level packages:

- files and lines of Python per package;
- the package arrows: every ``package -> package`` import (module top or inside a function),
  with how many import statements make it;
- circles between files: strongly connected groups of modules that import each other.

It reads the source with :mod:`ast` and imports nothing of the project.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("alerts", "bench", "collectors", "console", "engine", "loadgen", "slo", "tailwatch")


def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the packages, by dotted name."""
    out = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(parts)] = path
    return out


def imports_of(path: Path, name: str, known: set[str]) -> list[str]:
    """The project modules ``path`` (module ``name``) imports, one entry per statement and
    name, resolved to the longest known module."""
    tree = ast.parse(path.read_text(), str(path))
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                here = name.split(".") if is_package else name.split(".")[:-1]
                up = here[: len(here) - (node.level - 1)]
                base = ".".join([*up, base] if base else up)
            targets = [f"{base}.{alias.name}" for alias in node.names] or [base]
        for target in targets:
            parts = target.split(".")
            while parts and ".".join(parts) not in known:
                parts.pop()
            if parts:
                found.append(".".join(parts))
    return found


def graph(root: Path = ROOT) -> dict[str, list[str]]:
    """Module -> the project modules it imports (with repeats, one per statement)."""
    mods = modules(root)
    known = set(mods)
    return {name: imports_of(path, name, known) for name, path in mods.items()}


def package_arrows(edges: dict[str, list[str]]) -> Counter[tuple[str, str]]:
    """(from package, to package) -> import statements, across packages only."""
    arrows: Counter[tuple[str, str]] = Counter()
    for source, targets in edges.items():
        for target in targets:
            a, b = source.split(".")[0], target.split(".")[0]
            if a != b:
                arrows[(a, b)] += 1
    return arrows


def circles(edges: dict[str, list[str]]) -> list[list[str]]:
    """Groups of two or more modules that import each other (Tarjan's strongly connected
    components), a package's ``__init__`` left out (re-exports are not circles of logic)."""
    nodes = [n for n in edges if Path(n.replace(".", "/")).name not in PACKAGES]
    adjacency = {
        n: sorted({t for t in edges[n] if t in edges and t not in PACKAGES and t != n})
        for n in nodes
    }
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    sys.setrecursionlimit(10_000)

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in adjacency.get(node, ()):
            if nxt not in adjacency:
                continue
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for node in adjacency:
        if node not in index:
            visit(node)
    return sorted(out)


def sizes(root: Path = ROOT) -> dict[str, tuple[int, int]]:
    """Package -> (files, lines)."""
    out = {}
    for package in PACKAGES:
        files = sorted((root / package).rglob("*.py"))
        out[package] = (len(files), sum(len(f.read_text().splitlines()) for f in files))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="one JSON object instead of text")
    args = parser.parse_args(argv)
    edges = graph()
    arrows = package_arrows(edges)
    report = {
        "sizes": {p: {"files": f, "lines": n} for p, (f, n) in sizes().items()},
        "arrows": {f"{a} -> {b}": n for (a, b), n in sorted(arrows.items())},
        "circles": circles(edges),
    }
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print("package      files   lines")
    for package, row in report["sizes"].items():
        print(f"{package:<12} {row['files']:>5} {row['lines']:>7}")
    print("\npackage arrows (import statements)")
    by_source: dict[str, list[str]] = defaultdict(list)
    for (a, b), n in sorted(arrows.items()):
        by_source[a].append(f"{b} ({n})")
    for a, targets in by_source.items():
        print(f"{a} -> {', '.join(targets)}")
    print(f"\ncircles between files: {len(report['circles'])}")
    for group in report["circles"]:
        print("  " + " <-> ".join(group))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
