"""What every ``tailwatch`` command shares: how its help is laid out, how a port is
validated, and how a command's output files are checked before work starts and saved
after it, so a finished run is never lost."""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

MAX_PORT = 65535
#: The configuration file a command reads when given no ``--config`` (and it exists).
DEFAULT_CONFIG = Path("tailwatch.yaml")


def config_path(config: Path | None) -> Path | None:
    """``config`` when given, else ``./tailwatch.yaml`` when it exists, else ``None`` (the
    built-in defaults): the rule every command with ``--config`` follows."""
    if config is not None:
        return config
    return DEFAULT_CONFIG if DEFAULT_CONFIG.exists() else None


def typer_app(**kwargs: Any) -> typer.Typer:
    """A ``typer.Typer`` whose help and usage errors are click's plain text.

    NOTE: typer's rich panels squeeze a long option name (``--max-num-batched-t…``) to fit
    a table column at 80 columns; click's plain layout wraps the help text instead and never
    truncates a name, and its usage errors are plain ``Error:`` lines."""
    kwargs.setdefault("rich_markup_mode", None)
    kwargs.setdefault("add_completion", False)
    return typer.Typer(**kwargs)


def cli_error(message: str) -> typer.Exit:
    """Print ``error: message`` (one line, stderr) and return the exit (code 2) to raise:
    how every tailwatch command reports a user mistake."""
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code=2)


def check_port(port: int, flag: str, *, allow_zero: bool) -> int:
    """``port`` if it is a TCP port (1-65535; 0 too with ``allow_zero``: the OS picks a free
    one), else a ``ValueError`` whose message names ``flag`` and the value."""
    low = 0 if allow_zero else 1
    if isinstance(port, bool) or not isinstance(port, int) or not low <= port <= MAX_PORT:
        hint = " (0 picks a free port)" if allow_zero else ""
        raise ValueError(f"{flag}={port!r}: must be from {low} to {MAX_PORT}{hint}")
    return port


def parse_urls(text: str, flag: str) -> list[str]:
    """Comma-separated URLs (each checked by :func:`loadgen.load_options.check_url`), trailing
    ``/`` removed."""
    # NOTE: lazy: tailwatch.cli imports this module at every start; this one brings numpy, httpx
    from loadgen.load_options import check_url

    urls = [check_url(u.strip(), flag).rstrip("/") for u in text.split(",") if u.strip()]
    if not urls:
        raise ValueError(f"{flag}: expected at least one URL, got {text!r}")
    return urls


def port_option(help: str, *, allow_zero: bool) -> Any:
    """A ``--port``-style option checked by :func:`check_port` while the command line is
    parsed, so a bad port is one error line before anything starts."""
    low = 0 if allow_zero else 1

    def validate(param: typer.CallbackParam, value: int) -> int:
        try:
            return check_port(value, param.opts[0], allow_zero=allow_zero)
        except ValueError as error:
            raise cli_error(str(error)) from None

    return typer.Option(callback=validate, help=f"{help} [{low}-{MAX_PORT}]")


def check_writable_output(paths: list[Path], flag: str) -> None:
    """Refuse, before any work, output files that could not be written: a missing or
    non-directory parent, a parent without write permission, or a path that is a directory.
    Raises :func:`cli_error`'s exit with a line naming ``flag`` and the path."""
    for path in paths:
        parent = path.parent
        if not parent.exists():
            problem = f"directory {parent} does not exist"
        elif not parent.is_dir():
            problem = f"{parent} is not a directory"
        elif path.is_dir():
            problem = "is a directory"
        elif not os.access(parent, os.W_OK | os.X_OK) or (
            path.exists() and not os.access(path, os.W_OK)
        ):
            problem = "not writable"
        else:
            continue
        raise cli_error(f"{flag} {path}: {problem}; nothing was run")


def save_output(path: Path, write: Callable[[Path], None]) -> Path:
    """``write(path)``; if that fails (the disk filled, the directory went away during a long
    run), ``write`` to a fallback file in the temporary directory and say so on stderr.

    Returns the path written. If the fallback fails too, prints one error line naming both
    and raises ``typer.Exit(1)`` (no traceback)."""
    try:
        write(path)
        return path
    except OSError as error:
        reason = error.strerror or str(error)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    fallback = Path(tempfile.gettempdir()) / f"tailwatch-{stamp}-{os.getpid()}-{path.name}"
    try:
        write(fallback)
    except OSError as error:
        typer.echo(
            f"error: cannot write {path} ({reason}) nor {fallback} ({error.strerror or error})",
            err=True,
        )
        raise typer.Exit(code=1) from None
    typer.echo(f"warning: cannot write {path} ({reason}); wrote {fallback} instead", err=True)
    return fallback
