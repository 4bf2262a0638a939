"""Whether every module of a package imports on its own, first (docs/architecture.md): a
package ``__init__`` that pulled in a module needing that package whole fails only for the
caller that happened to import it first, so each module is imported first, in turn, with every
module of the package forgotten before it. In a child process, so the test run's own classes
stay the only ones it sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = """
import importlib, logging, pathlib, sys, traceback
logging.disable(logging.WARNING)  # e.g. streamlit's \"no runtime\" warnings, once per cached read
root, package, *left_out = sys.argv[1:]
root = pathlib.Path(root)
names = sorted(
    name
    for name in (
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for p in (root / package).rglob("*.py")
    )
    if not any(name == skip or name.startswith(skip + ".") for skip in left_out)
)
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().splitlines()[-1])
print(len(names))
print("\\n".join(failed))
"""


def first_import_failures(package: str, *left_out: str) -> tuple[int, list[str]]:
    """How many modules of ``package`` were imported first (less ``left_out`` and what lies
    under them), and ``module: error`` for each that failed."""
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(ROOT), package, *left_out],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    count, *failed = done.stdout.strip().splitlines()
    return int(count), failed
