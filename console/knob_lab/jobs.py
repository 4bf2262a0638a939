"""Sweeps started from the knob lab page: the form's fields checked exactly as
``tailwatch sweep`` checks its options (the same plan builder, so the same one-line
errors), then that command run as its own process against the console's store.

The sweep stores its run as it goes (status ``running``, each point as it finishes), so the
page's *Sweeps* section draws its progress bar and, once it is done, its knee chart: the
console does not hold the results, and a console restarted mid-sweep loses nothing. The
process is started in its own session, so it runs to its end (or to its first failing
point, stored as ``failed``) whether or not the console stays up; its output goes to a log
file the page names. No shell is involved: every field is one ``--option=value`` argument.

:func:`start_job` and :class:`LabJob` are how any lab command is started from the page (a
sweep here, a replay in :mod:`console.knob_lab.replay_jobs`).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

#: Where a started job's output goes (relative to the console's working directory).
JOB_LOG_DIR = Path(".tailwatch") / "lab-jobs"
#: The fields of the page's form, as ``tailwatch sweep`` options (the rest keep the CLI's
#: defaults): what a tuner sets for a knee study.
FORM_OPTIONS = (
    "knob",
    "rates",
    "engine",
    "url",
    "engine_knobs",
    "repeats",
    "duration",
    "prompt_tokens",
    "output_tokens",
    "slo",
    "target",
    "name",
)


@dataclass(frozen=True)
class SweepRequest:
    """What the form asked for: a ``tailwatch sweep`` of the store at ``db_url``."""

    db_url: str
    options: Mapping[str, object] = field(default_factory=dict)


def check_sweep(request: SweepRequest) -> str | None:
    """The first mistake in ``request``, as ``tailwatch sweep`` would report it (``None``:
    it would start). Nothing runs and nothing is stored."""
    from loadgen.errors import LoadgenError
    from loadgen.lab_plan import build_sweep_plan, sweep_options

    problem = form_problem(
        request.options, FORM_OPTIONS, request.db_url, "sweep", "to write the sweep to"
    )
    if problem is not None:
        return problem
    try:
        build_sweep_plan(sweep_options(**request.options))
    except (LoadgenError, ValueError, TypeError) as error:
        return str(error) or type(error).__name__
    return None


def sweep_argv(request: SweepRequest) -> list[str]:
    """The ``tailwatch sweep`` command line for ``request`` (``--flag=value`` each, so no
    value can be read as another option)."""
    return job_argv("sweep", FORM_OPTIONS, request.options, request.db_url)


def job_argv(
    command: str, form_options: Sequence[str], options: Mapping[str, object], db_url: str
) -> list[str]:
    """``python -m tailwatch <command>`` with each of ``form_options`` that ``options``
    holds as ``--flag=value`` (a list: the flag once per item), then the store and
    ``--no-progress``."""
    argv = [sys.executable, "-m", "tailwatch", command]
    for name in form_options:
        value = options.get(name)
        if value is None:
            continue
        for one in value if isinstance(value, list | tuple) else [value]:
            argv.append(f"{flag(name)}={one}")
    argv += [f"--db={db_url}", "--no-progress"]
    return argv


def form_problem(
    options: Mapping[str, object],
    form_options: Sequence[str],
    db_url: str,
    form: str,
    store_for: str,
) -> str | None:
    """What any job form refuses before its command's own checks: a field the ``form``
    does not have, no store URL (the console has none ``store_for``), or a field no
    command line can carry; ``None`` when none of these."""
    unknown = set(options) - set(form_options)
    if unknown:
        return f"not a field of the {form} form: {', '.join(sorted(unknown))}"
    if not db_url.strip():
        return f"the console has no store URL {store_for}"
    return argument_problem(options)


def flag(name: str) -> str:
    """The command-line flag of an option: ``engine_knobs`` → ``--engine-knobs``."""
    return f"--{name.rstrip('_').replace('_', '-')}"


def argument_problem(options: Mapping[str, object]) -> str | None:
    """A field no command line can carry (a NUL character, or text that is not Unicode
    characters), naming its option; ``None`` when every field can be an argument."""
    for name, value in options.items():
        for text in value if isinstance(value, list | tuple) else [value]:
            if not isinstance(text, str):
                continue
            if "\x00" in text:
                return f"{flag(name)}: contains a NUL character, which no argument can carry"
            try:
                text.encode("utf-8")
            except UnicodeEncodeError:
                return f"{flag(name)}: {text!r} is not valid Unicode text"
    return None


@dataclass
class LabJob:
    """One started lab command (``kind``: ``sweep``, ``replay``): its process, command and
    log."""

    process: subprocess.Popen
    argv: list[str]
    log_path: Path
    started_at_seconds: float
    kind: str = "sweep"
    #: Whether the page has seen it end (and so dropped the cached lab reads it changed).
    is_end_noted: bool = False

    @property
    def pid(self) -> int:
        return self.process.pid

    def exit_code(self) -> int | None:
        """``None`` while it runs."""
        return self.process.poll()

    def note_end(self) -> bool:
        """``True`` the first time this is asked after the process ended: what it wrote is
        final, so the caller drops what it had cached of the store's lab results."""
        if self.is_end_noted or self.exit_code() is None:
            return False
        self.is_end_noted = True
        return True

    def last_lines(self, count: int = 3) -> list[str]:
        """The log's last non-empty lines (its summary, or its ``error:`` line)."""
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return []
        return [line for line in text.splitlines() if line.strip()][-count:]


def start_job(
    kind: str,
    argv: list[str],
    log_dir: Path = JOB_LOG_DIR,
    clock=time.time,
    environ: Mapping[str, str] | None = None,
) -> LabJob:
    """Start ``argv`` (a checked lab command) in its own session, its output to a new log
    under ``log_dir`` named for ``kind`` and the time; an ``OSError`` when it cannot."""
    log_dir.mkdir(parents=True, exist_ok=True)
    started = clock()
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(started))
    log_path = log_dir / f"{kind}-{stamp}-{os.getpid()}-{int(started * 1000) % 1000:03d}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(os.environ if environ is None else environ),
            start_new_session=True,  # NOTE: the job outlives a console restart
        )
    return LabJob(process, argv, log_path, started, kind)


def start_sweep(
    request: SweepRequest,
    log_dir: Path = JOB_LOG_DIR,
    clock=time.time,
    environ: Mapping[str, str] | None = None,
) -> LabJob:
    """Check ``request`` and start its sweep; a ``ValueError`` with the message of
    :func:`check_sweep` (nothing started) when it would not run."""
    problem = check_sweep(request)
    if problem is not None:
        raise ValueError(problem)
    return start_job("sweep", sweep_argv(request), log_dir, clock, environ)
