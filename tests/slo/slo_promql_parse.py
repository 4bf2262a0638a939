"""A parser for the small PromQL subset that Prometheus's histogram scripts use on classic
buckets: selectors with matchers and ranges, function calls, ``sum``/``avg`` with ``by``, and
constant arithmetic such as ``1./6.``. Anything else raises :class:`NotMapped` naming it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from slo_promtest_script import NotMapped, parse_duration, parse_labels

_TOKEN = re.compile(
    r"\s*(?:(?P<duration>(?<=\[)(?:\d+(?:ms|[smhdwy]))+)"
    r"|(?P<number>(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|(?:NaN|Inf)\b)"
    r'|(?P<string>"(?:[^"\\]|\\.)*")'
    r"|(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)"
    r"|(?P<op>=~|!~|!=|==|[-+*/^%(){}\[\],:=<>]))"
)
_AGGREGATIONS = {"sum", "avg", "count", "min", "max", "group", "stddev", "stdvar", "topk"}


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Str:
    value: str


@dataclass(frozen=True)
class Selector:
    name: str | None
    matchers: tuple[tuple[str, str, str], ...]
    range_seconds: float | None


@dataclass(frozen=True)
class Call:
    function: str
    args: tuple[object, ...]


@dataclass(frozen=True)
class Aggregation:
    operator: str
    by: tuple[str, ...]
    expr: object


class _Parser:
    def __init__(self, text: str) -> None:
        self.tokens: list[tuple[str, str]] = []
        position = 0
        while position < len(text.rstrip()):
            match = _TOKEN.match(text, position)
            if not match or match.end() == position:
                raise NotMapped(f"syntax near {text[position:]!r}")
            kind = match.lastgroup or ""
            self.tokens.append((kind, match.group(kind)))
            position = match.end()
        self.position = 0

    def peek(self) -> tuple[str, str]:
        return self.tokens[self.position] if self.position < len(self.tokens) else ("end", "")

    def take(self, value: str | None = None) -> tuple[str, str]:
        token = self.peek()
        if value is not None and token[1] != value:
            raise NotMapped(f"expected {value!r}, found {token[1]!r}")
        self.position += 1
        return token

    def parse(self) -> object:
        node = self.expression()
        if self.peek()[0] != "end":
            raise NotMapped(f"binary operator {self.peek()[1]!r}")
        return node

    def expression(self) -> object:
        node = self.primary()
        while isinstance(node, Num) and self.peek()[1] in ("/", "*"):  # constant folding: 1./6.
            op, right = self.take()[1], self.primary()
            if not isinstance(right, Num):
                raise NotMapped("arithmetic on vectors")
            node = Num(node.value / right.value if op == "/" else node.value * right.value)
        return node

    def primary(self) -> object:
        kind, value = self.peek()
        if value in ("-", "+"):
            self.take()
            operand = self.primary()
            if not isinstance(operand, Num):
                raise NotMapped("unary minus on a vector")
            return Num(-operand.value if value == "-" else operand.value)
        if kind == "number":
            self.take()
            return Num(float(value))
        if kind == "string":
            self.take()
            return Str(re.sub(r"\\(.)", r"\1", value[1:-1]))
        if kind == "ident" and value in _AGGREGATIONS:
            return self.aggregation()
        if kind == "ident" and self.tokens[self.position + 1 :][:1] == [("op", "(")]:
            self.take()
            self.take("(")
            args = [self.expression()]
            while self.peek()[1] == ",":
                self.take()
                args.append(self.expression())
            self.take(")")
            return Call(value, tuple(args))
        return self.selector()

    def aggregation(self) -> Aggregation:
        operator = self.take()[1]
        if operator not in ("sum", "avg"):
            raise NotMapped(f"aggregation {operator}")
        by = self.grouping()
        self.take("(")
        expr = self.expression()
        self.take(")")
        by = by if by is not None else self.grouping()
        return Aggregation(operator, by or (), expr)

    def grouping(self) -> tuple[str, ...] | None:
        if self.peek()[1] == "without":
            raise NotMapped("aggregation without (...)")
        if self.peek()[1] != "by":
            return None
        self.take()
        self.take("(")
        labels = []
        while self.peek()[1] != ")":
            labels.append(self.take()[1])
            if self.peek()[1] == ",":
                self.take()
        self.take(")")
        return tuple(labels)

    def selector(self) -> Selector:
        name = self.take()[1] if self.peek()[0] == "ident" else None
        matchers: list[tuple[str, str, str]] = []
        if self.peek()[1] == "{":
            parts = ["{"]
            self.take()
            while self.peek()[1] != "}":
                parts.append(self.take()[1])
            self.take("}")
            matchers = parse_labels("".join(parts) + "}")
        if name is None and not matchers:
            raise NotMapped(f"unexpected {self.peek()[1]!r}")
        range_seconds = None
        if self.peek()[1] == "[":
            self.take()
            kind, value = self.take()
            if kind != "duration" or self.peek()[1] != "]":
                raise NotMapped("subquery")
            self.take("]")
            range_seconds = parse_duration(value)
        return Selector(name, tuple(matchers), range_seconds)


def parse_expression(text: str) -> object:
    return _Parser(text).parse()
