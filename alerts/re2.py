"""Regular expressions compiled with Python's ``re``, restricted to what Go's RE2 accepts with
the same meaning, so a matcher that works here works in Alertmanager and in exported rules.

Refused, naming the construct: lookahead/lookbehind, backreferences, conditional groups, atomic
groups, possessive quantifiers, repeat counts over 1000 (RE2's limit), the verbose flag
``(?x)``, nested sets / POSIX classes (``[[:alpha:]]`` is a POSIX class in RE2 but a set of
the characters ``[:alph`` in Python), and ``{,n}`` (a repeat in Python, literal text in RE2).
``\\d``, ``\\w``, ``\\s`` are ASCII-only, as in RE2.

Known differences that remain: ``(?i)`` folds case for ASCII letters only here, for all of
Unicode in RE2; and Python's ``re`` backtracks, so a pattern with nested quantifiers
(``(a+)+b``) can take exponential time on a long non-matching value, where RE2 is linear.
"""

from __future__ import annotations

import re
import warnings

#: RE2's largest repeat count (``{n,m}``).
RE2_MAX_REPEAT = 1000

_NOT_IN_RE2 = {
    "ASSERT": "lookahead/lookbehind assertions",
    "ASSERT_NOT": "negative lookahead/lookbehind assertions",
    "GROUPREF": "backreferences",
    "GROUPREF_EXISTS": "conditional groups",
    "ATOMIC_GROUP": "atomic groups",
    "POSSESSIVE_REPEAT": "possessive quantifiers",
}
#: ``{,n}`` not preceded by a backslash.
_EMPTY_MIN_REPEAT = re.compile(r"(?<!\\)\{,\d*\}")
_COMPILE_ERRORS = (re.error, OverflowError, RecursionError, ValueError)


class RE2SubsetError(ValueError):
    """The pattern is invalid, or valid in Python but not in RE2 (or not with one meaning)."""


def compile_re2_subset(pattern: str) -> re.Pattern[str]:
    """Compile ``pattern`` (unanchored; callers use ``fullmatch``) after checking that it uses
    only what RE2 has."""
    try:
        from re import _constants, _parser  # type: ignore[attr-defined]
    except ImportError:  # pragma: no cover - a Python without re._parser
        _parser = _constants = None
    if _parser is not None:
        # NOTE: re._parser is CPython's own regex parser (private, stable since 3.11): walking
        # its tree tells RE2-incompatible syntax apart without writing a second regex parser.
        # Parsing directly (not re.compile, which caches) re-emits the nested-set warning.
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                tree = _parser.parse(pattern, re.ASCII)
            except _COMPILE_ERRORS as error:
                raise RE2SubsetError(f"invalid regular expression {pattern!r}: {error}") from None
        if any(issubclass(w.category, FutureWarning) for w in caught):
            _refuse(pattern, "a nested set or POSIX class such as [[:alpha:]] (write [a-zA-Z])")
        if tree.state.flags & re.VERBOSE:
            _refuse(pattern, "the verbose flag (?x)")
        problem = _first_non_re2(tree, _constants.MAXREPEAT)
        if problem:
            _refuse(pattern, problem)
    if _EMPTY_MIN_REPEAT.search(pattern):
        _refuse(pattern, "{,n}, which RE2 reads as literal text (write {0,n})")
    try:
        return re.compile(pattern, re.ASCII)
    except _COMPILE_ERRORS as error:
        raise RE2SubsetError(f"invalid regular expression {pattern!r}: {error}") from None


def _refuse(pattern: str, construct: str) -> None:
    raise RE2SubsetError(
        f"regular expression {pattern!r} uses {construct}, which Alertmanager's RE2 does not "
        "support with the same meaning"
    )


def _first_non_re2(tree: object, max_repeat: int) -> str | None:
    stack = [tree]
    while stack:
        node = stack.pop()
        for op, argument in node.data:  # type: ignore[attr-defined]
            name = str(op)
            if name in _NOT_IN_RE2:
                return _NOT_IN_RE2[name]
            if name in ("MAX_REPEAT", "MIN_REPEAT"):
                low, high, _ = argument
                limit = high if high != max_repeat else low
                if limit > RE2_MAX_REPEAT:
                    return f"a repeat count of {limit} (RE2 allows at most {RE2_MAX_REPEAT})"
            if name == "SUBPATTERN" and argument[1] & re.VERBOSE:
                return "the verbose flag (?x)"
            stack.extend(_subpatterns(argument))
    return None


def _subpatterns(argument: object) -> list[object]:
    """The nested sub-patterns in one parsed opcode's argument."""
    found: list[object] = []
    pending = [argument]
    while pending:
        item = pending.pop()
        if hasattr(item, "data"):
            found.append(item)
        elif isinstance(item, tuple | list):
            pending.extend(item)
    return found
