"""Incremental detokenization and stop strings.

Text is produced with the usual prefix/read-offset window (as in vLLM and TGI), so a
multi-byte character split across tokens is only emitted once complete, and each step
decodes a few tokens rather than the whole output. While stop strings are set, the
last ``max(len(stop)) - 1`` characters are held back so a stop string that is still
forming is never streamed out; stop strings are not included in the returned text.
"""

from __future__ import annotations

from engine.model.tokenizer import Tokenizer

_INCOMPLETE = "\ufffd"
# A UTF-8 character spans at most 4 bytes; past this many pending tokens the
# replacement character is real (invalid bytes), not a character still forming.
_MAX_PENDING_TOKENS = 6


class IncrementalDetokenizer:
    def __init__(self, tokenizer: Tokenizer, stop: tuple[str, ...] = ()) -> None:
        self.tokenizer = tokenizer
        self.stop = stop
        self._holdback = max((len(s) for s in stop), default=1) - 1
        self.token_ids: list[int] = []
        self.text = ""
        self._prefix_offset = 0
        self._read_offset = 0
        self._emitted = 0

    def add_token(self, token_id: int) -> str | None:
        """Append one token; returns the stop string it completed, if any."""
        self.token_ids.append(token_id)
        prefix = self.tokenizer.decode(self.token_ids[self._prefix_offset : self._read_offset])
        full = self.tokenizer.decode(self.token_ids[self._prefix_offset :])
        pending = len(self.token_ids) - self._read_offset
        if len(full) <= len(prefix) or (
            full.endswith(_INCOMPLETE) and pending < _MAX_PENDING_TOKENS
        ):
            return None
        delta = full[len(prefix) :]
        self._prefix_offset, self._read_offset = self._read_offset, len(self.token_ids)
        self.text += delta
        for stop in self.stop:
            begin = max(0, len(self.text) - len(delta) - len(stop) + 1)
            index = self.text.find(stop, begin)
            if index >= 0:
                self.text = self.text[:index]
                return stop
        return None

    def take_new_text(self, finished: bool) -> str:
        """Text not yet handed out; holds back a possible partial stop string until finished."""
        end = len(self.text) if finished else max(self._emitted, len(self.text) - self._holdback)
        new = self.text[self._emitted : end]
        self._emitted = end
        return new
