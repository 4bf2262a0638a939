"""Alertmanager's label matchers: ``=``, ``!=``, ``=~``, ``!~``, and their text syntax.

The parser follows Alertmanager 0.25's ``pkg/labels/parse.go`` (Debian 12's Alertmanager and
its ``amtool``), case for case:

- a list is ``{a="1", b=~"2|3"}``; the braces are optional (``a=1,b!=2``), whitespace around
  each token is dropped, a trailing comma is allowed, and commas inside double quotes do not
  split;
- a matcher is a name (``[a-zA-Z_:][a-zA-Z0-9_:]*``, Alertmanager's pattern, colons included),
  an operator, and a value that may be double-quoted; in the value ``\\"``, ``\\n`` and ``\\\\``
  are escapes, any other backslash is literal, and an unescaped ``"`` inside is an error.

A label that is absent matches as the empty string (``{team=""}`` matches alerts without
``team``). Regular expressions are fully anchored (``=~"5.."`` matches ``500``, not ``1500``).

NOTE: Alertmanager compiles regexes with Go's ``regexp`` (RE2 syntax); we compile them with
RE2 itself (:mod:`alerts.re2`), so a pattern has one meaning in both.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import re2

from alerts.errors import MatcherError
from alerts.re2 import RE2Error, compile_re2

#: Alertmanager 0.25's matcher pattern. NOTE: ``[ \t\n\f\r]`` spelled out: Go's ``\s`` is ASCII
#: whitespace, Python's is Unicode's; ``=~`` before ``=`` so ``a=~b`` is not ``a = "~b"``.
_MATCHER_RE = re.compile(
    r"^[ \t\n\f\r]*([a-zA-Z_:][a-zA-Z0-9_:]*)[ \t\n\f\r]*(=~|=|!=|!~)[ \t\n\f\r]*(.*?)[ \t\n\f\r]*$",
    re.DOTALL,
)


#: Alertmanager 0.25's label-name pattern in matchers (colons allowed, as in metric names).
_MATCHER_NAME_RE = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


class MatchType(enum.Enum):
    EQUAL = "="
    NOT_EQUAL = "!="
    REGEX = "=~"
    NOT_REGEX = "!~"


@dataclass(frozen=True)
class Matcher:
    """One label matcher. Build it from text with :func:`parse_matcher` or directly; the
    regex (for ``=~`` and ``!~``) is compiled and checked at construction."""

    name: str
    type: MatchType
    value: str
    _regex: re2._Regexp | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        text = f"{self.name}{getattr(self.type, 'value', self.type)}{self.value!r}"
        if not isinstance(self.type, MatchType):
            try:
                object.__setattr__(self, "type", MatchType(self.type))
            except ValueError:
                raise MatcherError(text, "operator must be one of =, !=, =~, !~") from None
        if not isinstance(self.name, str) or not _MATCHER_NAME_RE.fullmatch(self.name):
            raise MatcherError(text, f"label name {self.name!r} is not a valid label name")
        if not isinstance(self.value, str):
            raise MatcherError(text, f"value must be a string, not {type(self.value).__name__}")
        try:
            self.value.encode("utf-8")
        except UnicodeEncodeError:
            raise MatcherError(text, f"value {self.value!r} is not valid UTF-8") from None
        if self.type in (MatchType.REGEX, MatchType.NOT_REGEX):
            try:
                object.__setattr__(self, "_regex", compile_re2(self.value))
            except RE2Error as error:
                raise MatcherError(str(self), str(error)) from None

    def matches_value(self, value: str) -> bool:
        if self.type is MatchType.EQUAL:
            return value == self.value
        if self.type is MatchType.NOT_EQUAL:
            return value != self.value
        assert self._regex is not None
        # NOTE: fullmatch, not "^(?:v)$": Python's "$" also matches before a final newline.
        hit = self._regex.fullmatch(value) is not None
        return hit if self.type is MatchType.REGEX else not hit

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Whether the label set satisfies this matcher (an absent label reads as "")."""
        return self.matches_value(labels.get(self.name, ""))

    def __str__(self) -> str:
        """Alertmanager's ``Matcher.String``: ``name<op>"value"`` with OpenMetrics escaping."""
        escaped = self.value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')
        return f'{self.name}{self.type.value}"{escaped}"'


def matches_all(matchers: Iterable[Matcher], labels: Mapping[str, str]) -> bool:
    """Whether every matcher matches ``labels`` (true for no matchers)."""
    return all(matcher.matches(labels) for matcher in matchers)


def format_matchers(matchers: Iterable[Matcher]) -> str:
    """``{a="1",b=~"2"}``: Alertmanager's ``Matchers.String``; :func:`parse_matchers` reads it
    back to equal matchers."""
    return "{" + ",".join(str(matcher) for matcher in matchers) + "}"


def parse_matchers(text: str) -> tuple[Matcher, ...]:
    """Parse a comma-separated matcher list (braces optional). ``""`` and ``{}`` give ``()``.

    Raises :class:`MatcherError` naming the offending matcher and the problem."""
    if not isinstance(text, str):
        raise MatcherError(repr(text), f"matchers must be text, not {type(text).__name__}")
    body = text.removeprefix("{").removesuffix("}")
    tokens: list[str] = []
    current: list[str] = []
    inside_quotes = escaped = False
    for char in body:
        if char == "," and not inside_quotes:
            tokens.append("".join(current))
            current = []
            continue
        if char == '"':
            if not escaped:
                inside_quotes = not inside_quotes
            else:
                escaped = False
        elif char == "\\":
            escaped = not escaped
        else:
            escaped = False
        current.append(char)
    # NOTE: as upstream, only the last token is trimmed and may be empty (a trailing comma);
    # an empty token in the middle (``a=1,,b=2``) is a bad matcher.
    last = "".join(current).strip()
    if last:
        tokens.append(last)
    return tuple(parse_matcher(token) for token in tokens)


def parse_matcher(text: str) -> Matcher:
    """Parse one matcher, e.g. ``severity=~"page|ticket"`` or ``alertname = X``."""
    if not isinstance(text, str):
        raise MatcherError(repr(text), f"a matcher must be text, not {type(text).__name__}")
    found = _MATCHER_RE.match(text)
    if found is None:
        raise MatcherError(
            text,
            "bad matcher format: expected <label name><op><value> with op one of =, !=, =~, !~ "
            "(a label name is letters, digits, '_' or ':', not starting with a digit)",
        )
    name, operator, raw = found.groups()
    try:
        return Matcher(name, MatchType(operator), _unquote(text, raw))
    except MatcherError as error:
        if error.text == text:
            raise
        # NOTE: name the matcher as the user wrote it, not as Matcher.__str__ re-escapes it.
        raise MatcherError(text, error.problem) from None


def _unquote(text: str, raw: str) -> str:
    """The matcher value with its optional quotes removed and escapes applied (upstream's
    loop: spurious escapes stay literal, a trailing lone backslash is literal)."""
    try:
        raw.encode("utf-8")
    except UnicodeEncodeError:
        raise MatcherError(text, f"value {raw!r} is not valid UTF-8") from None
    expect_trailing_quote = raw.startswith('"')
    if expect_trailing_quote:
        raw = raw[1:]
    out: list[str] = []
    escaped = False
    for index, char in enumerate(raw):
        if escaped:
            escaped = False
            out.append({"n": "\n", '"': '"', "\\": "\\"}.get(char, "\\" + char))
            continue
        if char == "\\":
            if index < len(raw) - 1:
                escaped = True
            else:
                out.append("\\")
        elif char == '"':
            if not expect_trailing_quote or index < len(raw) - 1:
                raise MatcherError(
                    text, f'value {raw!r} contains an unescaped double quote; write it as \\"'
                )
            expect_trailing_quote = False
        else:
            out.append(char)
    if expect_trailing_quote:
        opened = '"' + raw
        raise MatcherError(text, f"value {opened!r} opens a double quote it never closes")
    return "".join(out)
