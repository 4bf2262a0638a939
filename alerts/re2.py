"""Matcher regexes compiled by Google's RE2 (the ``google-re2`` bindings), so a matcher means
here what it means in Alertmanager and in exported rules, whose Go ``regexp`` implements the
same RE2 syntax: no lookarounds or backreferences, repeat counts up to 1000, POSIX classes
(``[[:alpha:]]``), ``{,n}`` read as literal text, ASCII ``\\d \\w \\s``, Unicode case folding
under ``(?i)``. Matching takes linear time in the value's length: a silence's regex cannot
stall the evaluator, as a backtracking engine's ``(a+)+b`` can.
"""

from __future__ import annotations

import re2

#: Options for every matcher regex: errors are raised (``RE2Error``), not also logged by RE2.
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


class RE2Error(ValueError):
    """The pattern is not a valid RE2 regular expression."""


def compile_re2(pattern: str) -> re2._Regexp:
    """Compile ``pattern`` (unanchored; callers use ``fullmatch``, as Alertmanager anchors)."""
    try:
        return re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        reason = error.args[0] if error.args else error
        if isinstance(reason, bytes):
            reason = reason.decode("utf-8", "replace")
        raise RE2Error(f"invalid regular expression {pattern!r}: {reason}") from None
