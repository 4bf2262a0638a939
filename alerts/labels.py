"""Label sets and their fingerprints, as Prometheus and Alertmanager define them.

A :class:`LabelSet` is an immutable, hashable mapping of label name to value. Names must match
Prometheus's ``[a-zA-Z_][a-zA-Z0-9_]*``; values are any string that encodes as UTF-8 (a Python
``str`` holding a lone surrogate does not). An empty value is the same as no label (PromQL's
rule, and Alertmanager drops empty values from posted alerts), so it is dropped.

The fingerprint is Alertmanager's (``prometheus/common`` ``model/signature.go``
``labelSetToFingerprint``): 64-bit FNV-1a over the label names in byte order, each name and
each value followed by the separator byte ``0xff`` (which cannot occur in UTF-8). Its text form
is 16 lower-case hex digits (``model/fingerprinting.go``), the form Alertmanager's API shows;
store it as that text, since a uint64 does not fit PostgreSQL's signed BIGINT.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from alerts.errors import LabelError

#: Prometheus's label-name syntax (``model.LabelNameRE``, legacy validation).
LABEL_NAME_RE = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
#: FNV-1a 64-bit offset basis and prime (``model/fnv.go``).
FNV64_OFFSET = 14695981039346656037
FNV64_PRIME = 1099511628211
#: ``model.SeparatorByte``: cannot occur in valid UTF-8, so ``{a="bc"}`` and ``{ab="c"}`` differ.
SEPARATOR_BYTE = 0xFF
_SEPARATOR = bytes([SEPARATOR_BYTE])
_MASK64 = (1 << 64) - 1


def is_valid_label_name(name: object) -> bool:
    return isinstance(name, str) and LABEL_NAME_RE.fullmatch(name) is not None


def check_label_name(field: str, name: object) -> str:
    """``name`` if it is a valid label name; else a :class:`LabelError` naming ``field``."""
    if not isinstance(name, str):
        raise LabelError(field, repr(name), f"name must be a string, not {type(name).__name__}")
    if LABEL_NAME_RE.fullmatch(name) is None:
        raise LabelError(
            field,
            name,
            "not a valid label name: use letters, digits and '_', not starting "
            "with a digit ([a-zA-Z_][a-zA-Z0-9_]*)",
        )
    return name


def check_label_value(field: str, name: str, value: object) -> str:
    """``value`` if it is a string that encodes as UTF-8; else a :class:`LabelError`."""
    if not isinstance(value, str):
        raise LabelError(field, name, f"value must be a string, not {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise LabelError(
            field,
            name,
            f"value {value!r} is not valid UTF-8 ({error.reason} at index {error.start})",
        ) from None
    return value


def fingerprint(labels: Mapping[str, str]) -> int:
    """Alertmanager's fingerprint of ``labels`` as an unsigned 64-bit integer.

    NOTE: names sort by code point, which for UTF-8 text is the byte order Go's
    ``sort.Strings`` uses; the empty set hashes to the FNV offset basis. Hashing the joined
    bytes in one loop is the same as upstream's per-string ``hashAdd`` calls (FNV-1a is a
    byte-at-a-time fold)."""
    data = b"".join(
        name.encode("utf-8") + _SEPARATOR + labels[name].encode("utf-8") + _SEPARATOR
        for name in sorted(labels)
    )
    digest = FNV64_OFFSET
    for byte in data:
        digest = ((digest ^ byte) * FNV64_PRIME) & _MASK64
    return digest


def fingerprint_hex(value: int) -> str:
    """A fingerprint as Alertmanager prints it: 16 lower-case hex digits."""
    return f"{value:016x}"


class LabelSet(Mapping[str, str]):
    """An immutable, validated label (or annotation) set. ``field`` only names the set in
    errors (``labels``, ``annotations``)."""

    __slots__ = ("_by_name", "_fingerprint", "_hash", "_items")

    def __init__(
        self,
        labels: Mapping[str, str] | Iterable[tuple[str, str]] = (),
        field: str = "labels",
    ) -> None:
        pairs = labels.items() if isinstance(labels, Mapping) else labels
        checked: dict[str, str] = {}
        for pair in pairs:
            name, value = pair
            check_label_name(field, name)
            check_label_value(field, name, value)
            if name in checked:
                raise LabelError(field, name, "given twice")
            if value != "":
                checked[name] = value
        self._items: tuple[tuple[str, str], ...] = tuple(sorted(checked.items()))
        self._by_name = dict(self._items)
        self._hash = hash(self._items)
        self._fingerprint: int | None = None

    @classmethod
    def coerce(cls, value: Any, field: str) -> LabelSet:
        """``value`` as a LabelSet (a LabelSet passes through; a mapping is validated)."""
        if isinstance(value, LabelSet):
            return value
        if not isinstance(value, Mapping):
            raise LabelError(field, "", f"expected a mapping of name to value, not {value!r}")
        return cls(value, field)

    def __getitem__(self, name: str) -> str:
        return self._by_name[name]

    def get_value(self, name: str) -> str:
        """The label's value, or ``""`` when absent: how matchers and ``equal`` read labels."""
        return self.get(name, "")

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LabelSet):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._by_name == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        inner = ", ".join(f"{name}={value!r}" for name, value in self._items)
        return f"LabelSet({{{inner}}})"

    @property
    def pairs(self) -> tuple[tuple[str, str], ...]:
        """Sorted ``(name, value)`` pairs: ``collectors.canonical.Labels``' form."""
        return self._items

    def fingerprint(self) -> int:
        """Alertmanager's fingerprint (computed once: the set is immutable)."""
        if self._fingerprint is None:
            self._fingerprint = fingerprint(self)
        return self._fingerprint

    def merged(self, other: Mapping[str, str]) -> LabelSet:
        """A new set with ``other``'s labels added (overriding same-named ones)."""
        combined = dict(self._items)
        combined.update(other)
        return LabelSet(combined)

    def as_dict(self) -> dict[str, str]:
        return dict(self._items)
