"""Every module of console/ but the Streamlit scripts imports on its own (docs/console.md, "How
it reads the store"): ``console.data`` imports the pure modules of ``console.incidents`` and
``console.knob_lab``, and their sections import ``console.data``, so a package ``__init__`` that
ran its sections would leave ``console.data`` half made for whichever caller came first. Each
module is imported here first, in turn, with every ``console`` module forgotten before it. In a
child process, so the test run's own ``console`` modules stay the only ones it sees."""

from __future__ import annotations

from tests.import_order import first_import_failures


def test_every_module_of_the_console_imports_first() -> None:
    count, failed = first_import_failures("console", "console.streamlit_app", "console.app_pages")
    assert count > 25
    assert failed == []
