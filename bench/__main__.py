"""Run every benchmark (``python -m bench``) or the ones named (``python -m bench NAME ...``).

A benchmark is a module ``bench/<name>.py`` with a ``main() -> None`` that prints a
table of figures measured side by side in one run. Figures go to docs/benchmarks.md
together with the command that produced them. Options after one name go to that
benchmark (``python -m bench detection --seed 8001 --count 20``) when its ``main`` takes
an argument list.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench


def _names() -> list[str]:
    return sorted(
        m.name for m in pkgutil.iter_modules(bench.__path__) if not m.name.startswith("_")
    )


def main(argv: list[str]) -> int:
    available = _names()
    first_option = next((i for i, a in enumerate(argv) if a.startswith("-")), len(argv))
    chosen, options = argv[:first_option] or available, argv[first_option:]
    if options and len(chosen) != 1:
        print("options go to one benchmark: python -m bench NAME --option ...")
        return 2
    unknown = [n for n in chosen if n not in available]
    if unknown:
        print(f"unknown benchmark(s): {', '.join(unknown)}; available: {', '.join(available)}")
        return 2
    for name in chosen:
        print(f"\n=== bench/{name}.py ===", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        if options:
            module.main(options)
        else:
            module.main()
        print(f"--- {name} took {time.perf_counter() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
