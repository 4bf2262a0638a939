"""``StructuredOutputsParams``: the one constraint a request's output must match (vLLM's name).

Exactly one of ``json`` (a JSON schema), ``json_object`` (any JSON object), ``regex``,
``choice`` (one of these strings) or ``grammar`` (xgrammar's EBNF) is set, as vLLM's
``StructuredOutputsParams`` requires. ``disable_any_whitespace`` is vLLM's option: JSON with
no free whitespace between tokens (by default xgrammar, like vLLM, allows any).

Values are checked here for shape and size only (pure Python, no xgrammar); whether a schema
or a grammar compiles is the compiler's to say (``engine.structured.grammar``). ``key`` is
what compiled grammars are cached by: the kind, the canonical text and the option.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from engine.errors import RequestError

Kind = Literal["json", "json_object", "regex", "choice", "grammar"]
CONSTRAINTS: tuple[Kind, ...] = ("json", "json_object", "regex", "choice", "grammar")
# NOTE: bounds a request can make the compiler work against; a schema or grammar this long is
# far beyond any in the wild, and the compile of one holds the engine loop (see docs/engine.md).
MAX_TEXT_CHARS = 64 * 1024
MAX_CHOICES = 1024
# NOTE: nesting is what makes a schema's compile slow (200 nested arrays: 1 s on one core);
# 64 levels of the schema document is far deeper than any real response format.
MAX_JSON_DEPTH = 64
FIELD = "structured_outputs"


class GrammarKey(NamedTuple):
    """What a compiled grammar is cached by."""

    kind: Kind
    text: str
    any_whitespace: bool


def _fail(name: str, why: str) -> RequestError:
    return RequestError(f"{FIELD}.{name}: {why}")


def canonical_json(schema: Any, name: str = "json") -> str:
    """A JSON schema (a string of JSON, or the object) as compact JSON text, property order
    kept (xgrammar emits object properties in the schema's order)."""
    if isinstance(schema, str):
        try:
            schema = json.loads(schema)
        except json.JSONDecodeError as error:
            raise _fail(name, f"not valid JSON ({error.msg} at character {error.pos})") from None
        except RecursionError:
            raise _fail(name, f"nests deeper than {MAX_JSON_DEPTH} levels") from None
    if isinstance(schema, bool):
        raise _fail(name, "must be a JSON schema object (true and false schemas are not served)")
    if not isinstance(schema, dict):
        raise _fail(name, f"must be a JSON schema object, got {type(schema).__name__}")
    if _depth(schema) > MAX_JSON_DEPTH:
        raise _fail(name, f"nests deeper than {MAX_JSON_DEPTH} levels")
    try:
        text = json.dumps(schema, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    except (TypeError, ValueError) as error:
        raise _fail(name, f"cannot be written as JSON ({error})") from None
    if len(text) > MAX_TEXT_CHARS:
        raise _fail(name, f"is {len(text)} characters of JSON; at most {MAX_TEXT_CHARS}")
    return text


@dataclass(frozen=True)
class StructuredOutputsParams:
    json: str | None = None
    json_object: bool | None = None
    regex: str | None = None
    choice: tuple[str, ...] | None = None
    grammar: str | None = None
    disable_any_whitespace: bool = False

    def __post_init__(self) -> None:
        given = [name for name in CONSTRAINTS if getattr(self, name) is not None]
        if len(given) != 1:
            raise RequestError(
                f"{FIELD}: set exactly one of {', '.join(CONSTRAINTS)}"
                + (f" (got {', '.join(given)})" if given else " (got none)")
            )
        if self.json is not None:
            object.__setattr__(self, "json", canonical_json(self.json))
        if self.json_object is not None and self.json_object is not True:
            raise _fail("json_object", f"must be true when given (got {self.json_object!r})")
        for name in ("regex", "grammar"):
            text = getattr(self, name)
            if text is None:
                continue
            if not isinstance(text, str) or not text:
                raise _fail(name, f"must be a non-empty string (got {_shown(text)})")
            if len(text) > MAX_TEXT_CHARS:
                raise _fail(name, f"is {len(text)} characters; at most {MAX_TEXT_CHARS}")
        if self.choice is not None:
            object.__setattr__(self, "choice", _choices(self.choice))
        if not isinstance(self.disable_any_whitespace, bool):
            raise _fail("disable_any_whitespace", "must be true or false")

    @property
    def kind(self) -> Kind:
        return next(name for name in CONSTRAINTS if getattr(self, name) is not None)

    @property
    def key(self) -> GrammarKey:
        """The cache key: kind, canonical text (choices as a JSON list), whitespace option."""
        kind = self.kind
        if kind == "json_object":
            text = ""
        elif kind == "choice":
            text = json.dumps(list(self.choice or ()), ensure_ascii=False)
        else:
            text = getattr(self, kind)
        return GrammarKey(kind, text, not self.disable_any_whitespace)


def _choices(choices: Any) -> tuple[str, ...]:
    if isinstance(choices, str) or not isinstance(choices, list | tuple):
        raise _fail("choice", f"must be a list of strings (got {_shown(choices)})")
    if not choices:
        raise _fail("choice", "must list at least one string")
    if len(choices) > MAX_CHOICES:
        raise _fail("choice", f"lists {len(choices)} strings; at most {MAX_CHOICES}")
    bad = [c for c in choices if not isinstance(c, str) or not c]
    if bad:
        raise _fail("choice", f"every entry must be a non-empty string (got {_shown(bad[0])})")
    total = sum(len(c) for c in choices)
    if total > MAX_TEXT_CHARS:
        raise _fail("choice", f"holds {total} characters; at most {MAX_TEXT_CHARS}")
    return tuple(choices)


def _depth(value: Any) -> int:
    """How deeply objects and arrays nest in ``value`` (a scalar: 0); stops counting past
    ``MAX_JSON_DEPTH`` + 1, so a hostile document costs no more than that walk."""
    depth, level = 0, [value]
    while level and depth <= MAX_JSON_DEPTH:
        inner: list[Any] = []
        for item in level:
            if isinstance(item, dict):
                inner.extend(item.values())
            elif isinstance(item, list):
                inner.extend(item)
        if not inner and not any(isinstance(i, dict | list) for i in level):
            break
        depth += 1
        level = inner
    return depth


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
