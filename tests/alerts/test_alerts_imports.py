"""Every module of alerts/ imports on its own (docs/architecture.md, "Imports from outside"):
a package ``__init__`` that pulled in a module needing that package whole would fail only for
the caller that happened to import it first, so each module is imported here first, in turn,
with every ``alerts`` module forgotten before it. In a child process, so the test run's own
``alerts`` classes stay the only ones it sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import importlib, pathlib, sys, traceback
root = pathlib.Path(sys.argv[1])
names = sorted(
    ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
    for p in (root / "alerts").rglob("*.py")
)
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m == "alerts" or m.startswith("alerts.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().splitlines()[-1])
print(len(names))
print("\\n".join(failed))
"""


def test_every_module_of_alerts_imports_first() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    count, *failed = done.stdout.strip().splitlines()
    assert int(count) > 60
    assert failed == []
