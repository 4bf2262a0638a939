"""The Incidents page's parts (``app_pages/incidents.py``), and the alerting health the
Overview warns about too, in two layers.

Below :mod:`console.data` (pure: no store, no Streamlit):

- :mod:`~console.incidents.frames` — the stored incident records as the list, the ``?id=``
  of the URL read as untrusted input, one incident's detail triaged over the windows of
  ``tailwatch incident show``, its timeline, the time charts' annotations, silences and the
  admin token check;
- :mod:`~console.incidents.charts` — the incident's latency chart with its windows shaded;
- :mod:`~console.incidents.breakdowns` — per-tenant and per-adapter tables, for the causes
  that point at a tenant or an adapter;
- :mod:`~console.incidents.rule_health` — failing rules and a stale evaluator as warning
  lines.

Above it, reading through :mod:`console.data` and drawing with Streamlit:
:mod:`~console.incidents.sections` (the detail page's header, chart, verdict and tables).

Outside code imports the modules through the package (``from console.incidents import
rule_health``), or names from a module's full path; the modules here import each other by
their full path (``console.incidents.frames``).

NOTE: the modules are named in ``__all__``, not imported here: :mod:`console.data` imports
``frames``, and an ``__init__`` that imported the sections (which import :mod:`console.data`)
would run them while :mod:`console.data` is half made.
"""

__all__ = ["breakdowns", "frames", "rule_health", "sections"]
