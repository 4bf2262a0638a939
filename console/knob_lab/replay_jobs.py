"""Replays started from the knob lab page: the form's fields checked exactly as
``tailwatch replay`` checks its options (the same plan builder, so the same one-line
errors), the window read once to see that it holds records to replay, then that command
run as its own process against the console's store (:func:`console.knob_lab.jobs.start_job`).

The replay stores its lab run (kind ``replay``) as it goes — running, its point, then
finished or failed — so the page's *Replays* section shows it once it is stored; the
console holds nothing of it, and the replay runs to its end whether or not the console
stays up. No shell is involved: every field is one ``--option=value`` argument (each knob
its own ``--knob=NAME=VALUE``).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from console.knob_lab.jobs import JOB_LOG_DIR, LabJob, form_problem, job_argv, start_job

#: The fields of the page's form, as ``tailwatch replay`` options (``from_`` is ``--from``;
#: ``knob`` a list of ``NAME=VALUE``, ``url`` one URL or a list, one ``--url`` each);
#: ``--db`` is the console's store, and the replay runs with ``--no-progress``.
FORM_OPTIONS = (
    "from_",
    "to",
    "engine",
    "url",
    "knob",
    "tenant",
    "speed",
    "seed",
    "slo",
    "name",
    "replicas",
    "route",
)


@dataclass(frozen=True)
class ReplayRequest:
    """What the form asked for: a ``tailwatch replay`` of the store at ``db_url``."""

    db_url: str
    options: Mapping[str, object] = field(default_factory=dict)


def check_replay(request: ReplayRequest, now: float | None = None) -> str | None:
    """The first mistake in ``request``, as ``tailwatch replay`` would report it, times
    read against ``now`` (default: the clock); ``None``: it would start. The window's
    records are read to see that there is something to replay; nothing is stored."""
    from collectors.error_text import first_line
    from loadgen.errors import LoadgenError
    from loadgen.replay_options import build_replay_plan, check_window, replay_options

    problem = form_problem(
        request.options, FORM_OPTIONS, request.db_url, "replay", "to replay from"
    )
    if problem is not None:
        return problem
    try:
        spec = build_replay_plan(
            replay_options(**request.options), time.time() if now is None else now
        )
    except (LoadgenError, ValueError, TypeError) as error:
        return str(error) or type(error).__name__
    from collectors.store import Store

    try:
        store = Store(request.db_url, migrate=False)
    except Exception as error:  # NOTE: any URL, driver or schema error is one line
        return f"--db: cannot open the store: {first_line(error)}"
    try:
        check_window(store, spec)
    except (LoadgenError, ValueError) as error:
        return str(error) or type(error).__name__
    except Exception as error:  # NOTE: a store that cannot be read is one line, as in the CLI
        return f"--db: cannot read the window's request records: {first_line(error)}"
    finally:
        store.close()
    return None


def replay_argv(request: ReplayRequest) -> list[str]:
    """The ``tailwatch replay`` command line for ``request`` (``--flag=value`` each, so no
    value can be read as another option)."""
    return job_argv("replay", FORM_OPTIONS, request.options, request.db_url)


def start_replay(
    request: ReplayRequest,
    log_dir: Path = JOB_LOG_DIR,
    clock=time.time,
    environ: Mapping[str, str] | None = None,
) -> LabJob:
    """Check ``request`` and start its replay; a ``ValueError`` with the message of
    :func:`check_replay` (nothing started) when it would not run."""
    problem = check_replay(request, clock())
    if problem is not None:
        raise ValueError(problem)
    return start_job("replay", replay_argv(request), log_dir, clock, environ)
