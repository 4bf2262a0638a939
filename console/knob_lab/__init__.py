"""The knob lab page's parts (``app_pages/knob_lab.py``; docs/knob-lab.md), in two layers.

Below :mod:`console.data` (pure, or one HTTP call; no store, no Streamlit):

- :mod:`~console.knob_lab.frames` — a sweep's points as rows, the mean per (value, rate),
  each value's knee, a running sweep's progress;
- :mod:`~console.knob_lab.ab` — two measurements: differences, bootstrap intervals, verdicts;
- :mod:`~console.knob_lab.headroom` — the sweep matching the current knobs, the headroom to
  its knee, the knob changes that made it stale;
- :mod:`~console.knob_lab.replay` — a replay's points against production;
- :mod:`~console.knob_lab.knobs` — the engine's ``/admin/config``, read and patched;
- :mod:`~console.knob_lab.charts` — the knee chart's panels;
- :mod:`~console.knob_lab.jobs`, :mod:`~console.knob_lab.replay_jobs` — a sweep's and a
  replay's form checked as the CLI checks it, and the command started.

Above it, reading through :mod:`console.data` and drawing with Streamlit:
:mod:`~console.knob_lab.sections` (the live knobs, latency and headroom),
:mod:`~console.knob_lab.study_sections` (sweeps, A/B, replays),
:mod:`~console.knob_lab.job_section` and :mod:`~console.knob_lab.replay_job_section` (the
*Start a sweep* and *Start a replay* forms).

Outside code imports the modules through the package (``from console.knob_lab import jobs``);
the modules here import each other by their full path (``console.knob_lab.frames``).

NOTE: the modules are named in ``__all__``, not imported here: :mod:`console.data` imports
``frames``, ``ab`` and ``knobs``, and an ``__init__`` that imported the sections (which import
:mod:`console.data`) would run them while :mod:`console.data` is half made.
"""

__all__ = [
    "ab",
    "frames",
    "headroom",
    "job_section",
    "jobs",
    "knobs",
    "replay",
    "replay_job_section",
    "replay_jobs",
    "sections",
    "study_sections",
]
