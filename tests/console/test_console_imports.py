"""Every module of console/ but the Streamlit scripts imports on its own (docs/console.md, "How
it reads the store"): ``console.data`` imports the pure modules of ``console.incidents`` and
``console.knob_lab``, and their sections import ``console.data``, so a package ``__init__`` that
ran its sections would leave ``console.data`` half made for whichever caller came first. Each
module is imported here first, in turn, with every ``console`` module forgotten before it. In a
child process, so the test run's own ``console`` modules stay the only ones it sees."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = """
import importlib, logging, pathlib, sys, traceback
logging.disable(logging.WARNING)  # streamlit's "no runtime" warnings, once per cached read
root = pathlib.Path(sys.argv[1])
scripts = {"console.streamlit_app"}
names = sorted(
    name
    for name in (
        ".".join(p.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        for p in (root / "console").rglob("*.py")
    )
    if name not in scripts and not name.startswith("console.app_pages")
)
failed = []
for name in names:
    for loaded in [m for m in sys.modules if m == "console" or m.startswith("console.")]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception:
        failed.append(name + ": " + traceback.format_exc().splitlines()[-1])
print(len(names))
print("\\n".join(failed))
"""


def test_every_module_of_the_console_imports_first() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(ROOT)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    count, *failed = done.stdout.strip().splitlines()
    assert int(count) > 25
    assert failed == []
