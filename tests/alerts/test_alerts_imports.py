"""Every module of alerts/ imports on its own (docs/architecture.md, "Imports from outside"):
a package ``__init__`` that pulled in a module needing that package whole would fail only for
the caller that happened to import it first, so each module is imported here first, in turn,
with every ``alerts`` module forgotten before it. In a child process, so the test run's own
``alerts`` classes stay the only ones it sees."""

from __future__ import annotations

from tests.import_order import first_import_failures


def test_every_module_of_alerts_imports_first() -> None:
    count, failed = first_import_failures("alerts")
    assert count > 60
    assert failed == []
