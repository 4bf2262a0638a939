"""Incremental detokenization and stop strings.

The text handed out, streamed or not, is the tokenizer's full decode of the generated
ids (truncated before a stop string), built a few tokens at a time:

- a byte-level tokenizer (``ByteLevelTokenizer``) is decoded on byte boundaries with
  Python's incremental UTF-8 decoder: a lead byte that is still waiting for its
  continuation bytes is held, an invalid sequence becomes U+FFFD exactly as
  ``bytes.decode(errors="replace")`` makes it, and ``finish`` flushes what is left;
- any other tokenizer uses the prefix/read-offset window of vLLM and TGI (a trailing
  U+FFFD is held as a character still forming, for up to ``_MAX_PENDING_TOKENS``
  tokens), and at ``finish`` the whole decode replaces the text when the text so far
  is a prefix of it, so the window's approximations never survive to the end.

Stop strings are looked for once more than ``min_tokens`` tokens are out (vLLM's rule).
While stop strings are set, the last ``max(len(stop)) - 1`` characters are held back so
a stop string that is still forming is never streamed out; stop strings are not
included in the returned text.
"""

from __future__ import annotations

import codecs
from typing import cast

from engine.model.tokenizer import ByteLevelTokenizer, Tokenizer

_INCOMPLETE = "\ufffd"
# Past this many pending tokens (window decoding only) a trailing U+FFFD is taken as
# real (invalid bytes), not a character still forming: a character spans <= 4 bytes.
_MAX_PENDING_TOKENS = 6


class _ByteDecoder:
    """Exact: text out is always the full decode of the bytes in (once finished)."""

    def __init__(self, tokenizer: ByteLevelTokenizer) -> None:
        self._tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def add(self, token_id: int) -> str:
        return self._decoder.decode(self._tokenizer.token_bytes(token_id))

    def finish(self, text: str) -> str:
        return self._decoder.decode(b"", final=True)


class _WindowDecoder:
    def __init__(self, tokenizer: Tokenizer) -> None:
        self._tokenizer = tokenizer
        self._token_ids: list[int] = []
        self._prefix_offset = 0
        self._read_offset = 0

    def add(self, token_id: int) -> str:
        self._token_ids.append(token_id)
        decode = self._tokenizer.decode
        prefix = decode(self._token_ids[self._prefix_offset : self._read_offset])
        full = decode(self._token_ids[self._prefix_offset :])
        pending = len(self._token_ids) - self._read_offset
        if len(full) <= len(prefix) or (
            full.endswith(_INCOMPLETE) and pending < _MAX_PENDING_TOKENS
        ):
            return ""
        self._prefix_offset, self._read_offset = self._read_offset, len(self._token_ids)
        return full[len(prefix) :]

    def finish(self, text: str) -> str:
        """The rest of the full decode after ``text`` (the text so far)."""
        full = self._tokenizer.decode(self._token_ids)
        return full[len(text) :] if full.startswith(text) else ""


class IncrementalDetokenizer:
    def __init__(
        self,
        tokenizer: Tokenizer,
        stop: tuple[str, ...] = (),
        min_tokens: int = 0,
        *,
        byte_level: bool | None = None,
    ) -> None:
        """``byte_level``: whether ``tokenizer`` is a ``ByteLevelTokenizer``, when the
        caller knows (a protocol ``isinstance`` costs tens of microseconds a request)."""
        if byte_level is None:
            byte_level = isinstance(tokenizer, ByteLevelTokenizer)
        self.stop = stop
        # NOTE: vLLM's rule: stop strings are looked for only once more than min_tokens
        # tokens are out, and then only in the text those tokens added (plus the holdback).
        self.min_tokens = min_tokens
        self._holdback = max((len(s) for s in stop), default=1) - 1
        self._decoder: _ByteDecoder | _WindowDecoder = (
            _ByteDecoder(cast(ByteLevelTokenizer, tokenizer))
            if byte_level
            else _WindowDecoder(tokenizer)
        )
        self.num_tokens = 0
        self.text = ""
        self._stopped = False
        self._finished = False
        self._emitted = 0

    def add_token(self, token_id: int) -> str | None:
        """Append one token; returns the stop string it completed, if any."""
        self.num_tokens += 1
        if self._stopped:  # NOTE: the text is final; decoding more would be thrown away
            return None
        return self._append(self._decoder.add(token_id))

    def finish(self) -> None:
        """Flush what the decoder still holds (the request is done); idempotent."""
        if self._finished or self._stopped:
            return
        self._finished = True
        self._append(self._decoder.finish(self.text))

    def take_new_text(self, finished: bool) -> str:
        """Text not yet handed out; holds back a possible partial stop string until finished."""
        if finished:
            self.finish()
        end = len(self.text) if finished else max(self._emitted, len(self.text) - self._holdback)
        new = self.text[self._emitted : end]
        self._emitted = end
        return new

    def _append(self, delta: str) -> str | None:
        if not delta:
            return None
        self.text += delta
        if self.num_tokens <= self.min_tokens:
            return None
        # NOTE: the match that ends first wins (then the one that starts first), as if
        # text came one character at a time, so how tokens split the text never matters.
        begin = max(0, len(self.text) - len(delta) - self._holdback)
        matches = [
            (index + len(stop), index, stop)
            for stop in self.stop
            if (index := self.text.find(stop, begin)) >= 0
        ]
        if not matches:
            return None
        _, index, stop = min(matches)
        self.text = self.text[:index]
        self._stopped = True
        return stop
