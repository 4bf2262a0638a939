"""Text encodings of label sets, bucket layouts and flags in the store's columns."""

from __future__ import annotations

import hashlib
import json
import math

from collectors.canonical import Labels


def encode_labels(labels: Labels) -> str:
    return json.dumps(dict(sorted(labels)), sort_keys=True, separators=(",", ":"))


def decode_labels(text: str) -> Labels:
    return tuple(sorted(json.loads(text).items()))


def split_flags(text: str) -> frozenset[str]:
    return frozenset(f for f in text.split(",") if f)


def encode_bounds(bounds: tuple[float, ...]) -> str:
    return json.dumps([b if math.isfinite(b) else "+Inf" for b in bounds])


def decode_bounds(text: str) -> tuple[float, ...]:
    return tuple(math.inf if b == "+Inf" else float(b) for b in json.loads(text))


def digest(text: str) -> str:
    """SHA-256 hex of ``text``: the unique key of a label set or layout of any length."""
    return hashlib.sha256(text.encode()).hexdigest()
