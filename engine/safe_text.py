"""Text that any UTF-8 encoder takes: for metric label values and span attributes.

Request bodies with invalid Unicode are refused at the edge (``server/protocol.py``);
this is the defence behind it, where a string becomes a label or an attribute, so one
bad value can never make ``/metrics`` unrenderable or a span batch unexportable.
"""

from __future__ import annotations

import re

__all__ = ["MAX_LABEL_VALUE_CHARS", "SURROGATES", "safe_text"]

# NOTE: label values come from clients (tenants); a cap keeps a 1 MB "user" from
# becoming a 1 MB line on every scrape.
MAX_LABEL_VALUE_CHARS = 128
# Lone surrogates: the one kind of ``str`` character that UTF-8 cannot encode.
SURROGATES = re.compile("[\ud800-\udfff]")


def safe_text(value: str, max_chars: int | None = None) -> str:
    """``value`` cut to ``max_chars`` characters, each lone surrogate (the one kind of
    ``str`` character UTF-8 cannot encode) replaced by U+FFFD."""
    if max_chars is not None:
        value = value[:max_chars]
    return SURROGATES.sub("\ufffd", value)
