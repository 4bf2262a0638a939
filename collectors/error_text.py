"""An error as one line: what a warning, a stored lab run's error or a command's ``error:``
line shows of an exception that may carry a traceback-sized message (a driver's SQL error, an
engine's response body)."""

from __future__ import annotations


def first_line(error: BaseException) -> str:
    """The first line of ``error``'s text, or its type's name when it has no text."""
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
