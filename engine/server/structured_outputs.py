"""A request's structured-output fields, read into one ``StructuredOutputsParams``.

Three spellings reach the same constraint, as in vLLM:

- OpenAI's ``response_format``: ``{"type": "text"}`` (none), ``{"type": "json_object"}``, or
  ``{"type": "json_schema", "json_schema": {"name", "schema", "strict", "description"}}``
  (``strict`` is accepted either way: the grammar is always enforced);
- vLLM's ``structured_outputs``: ``{"json" | "regex" | "choice" | "grammar" | "json_object":
  ..., "disable_any_whitespace": bool}``;
- vLLM's older ``guided_json``, ``guided_regex``, ``guided_choice``, ``guided_grammar``.

At most one of them per request, and one constraint in it; anything else is a 400 naming the
field (vLLM refuses two ``guided_*`` fields, or two constraints, the same way). vLLM's options
this engine does not implement (``structural_tag``, ``whitespace_pattern``,
``disable_additional_properties``, ``disable_fallback`` set true) are refused, never ignored.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from engine.errors import RequestError
from engine.server.errors import APIError
from engine.structured.params import StructuredOutputsParams

GUIDED_FIELDS = {
    "guided_json": "json",
    "guided_regex": "regex",
    "guided_choice": "choice",
    "guided_grammar": "grammar",
}
_SO_KEYS = ("json", "regex", "choice", "grammar", "json_object", "disable_any_whitespace")
# vLLM's StructuredOutputsParams options not implemented here, with the value meaning "off".
_SO_OFF: dict[str, Any] = {
    "structural_tag": None,
    "whitespace_pattern": None,
    "disable_additional_properties": False,
    "disable_fallback": False,
}
_JSON_SCHEMA_KEYS = ("name", "schema", "strict", "description")


def _bad(param: str, message: str) -> APIError:
    return APIError(400, f"{param}: {message}", param=param)


def _params(param: str, **constraint: Any) -> StructuredOutputsParams:
    try:
        return StructuredOutputsParams(**constraint)
    except RequestError as error:
        # NOTE: "structured_outputs.json: not valid JSON ..." keeps its why; the field is ours
        why = str(error).split(": ", 1)[-1]
        raise _bad(param, why) from None


def _from_response_format(value: Any) -> StructuredOutputsParams | None:
    param = "response_format"
    if not isinstance(value, Mapping):
        raise _bad(param, f"must be an object with a type (got {_shown(value)})")
    kind = value.get("type")
    if kind == "text":
        return None
    if kind == "json_object":
        return _params(param, json_object=True)
    if kind == "json_schema":
        spec = value.get("json_schema")
        param = "response_format.json_schema"
        if not isinstance(spec, Mapping):
            raise _bad(param, 'is required with type "json_schema": {"name": ..., "schema": {...}}')
        unknown = sorted(str(k) for k in spec if k not in _JSON_SCHEMA_KEYS)
        if unknown:
            raise _bad(param, f"unknown keys {unknown}; it takes {', '.join(_JSON_SCHEMA_KEYS)}")
        if not isinstance(spec.get("name"), str) or not spec["name"]:
            raise _bad(f"{param}.name", "is required: a non-empty string")
        if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
            raise _bad(f"{param}.strict", "must be true or false")
        if "schema" not in spec:
            raise _bad(f"{param}.schema", "is required: the JSON schema the output must match")
        return _params(f"{param}.schema", json=spec["schema"])
    if kind == "structural_tag":
        raise _bad(param, 'type "structural_tag" is not supported by this server')
    raise _bad(param, f'type must be "text", "json_object" or "json_schema" (got {_shown(kind)})')


def _from_structured_outputs(value: Any) -> StructuredOutputsParams:
    param = "structured_outputs"
    if not isinstance(value, Mapping):
        raise _bad(param, f"must be an object such as {{'json': {{...}}}} (got {_shown(value)})")
    for key, off in _SO_OFF.items():
        if value.get(key, off) not in (off, None):
            raise _bad(
                f"{param}.{key}", f"is not supported by this server; send {off!r} or omit it"
            )
    unknown = sorted(str(k) for k in value if k not in _SO_KEYS and k not in _SO_OFF)
    if unknown:
        raise _bad(param, f"unknown keys {unknown}; it takes {', '.join(_SO_KEYS)}")
    given = {k: value[k] for k in _SO_KEYS if value.get(k) is not None}
    if "choice" in given and isinstance(given["choice"], list):
        given["choice"] = tuple(given["choice"])
    return _params(param, **given)


class Constraint(NamedTuple):
    """A request's constraint, and the field it came from (what an error names)."""

    field: str
    params: StructuredOutputsParams


def structured_outputs_of(body: Any) -> Constraint | None:
    """The request's constraint (None: it has none); ``APIError`` 400 naming the field when a
    field is malformed or two fields ask for constraints."""
    sources: list[Constraint] = []
    if body.response_format is not None:
        params = _from_response_format(body.response_format)
        if params is not None:
            sources.append(Constraint("response_format", params))
    if body.structured_outputs is not None:
        params = _from_structured_outputs(body.structured_outputs)
        sources.append(Constraint("structured_outputs", params))
    guided = [(f, k) for f, k in GUIDED_FIELDS.items() if getattr(body, f) is not None]
    if len(guided) > 1:
        names = ", ".join(f for f, _ in guided)
        raise APIError(
            400,
            f"{names}: you can only use one kind of guided decoding ({', '.join(GUIDED_FIELDS)})",
            param=guided[1][0],
        )
    for field, key in guided:
        value = getattr(body, field)
        if key == "choice" and isinstance(value, list):
            value = tuple(value)
        sources.append(Constraint(field, _params(field, **{key: value})))
    if len(sources) > 1:
        names = " and ".join(source.field for source in sources)
        raise APIError(
            400,
            f"{names}: only one structured-output constraint per request; send one of "
            "response_format, structured_outputs or a guided_* field",
            param=sources[1].field,
        )
    return sources[0] if sources else None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
