"""Tokenizers: a byte-level one for presets, and Hugging Face ``tokenizer.json`` files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import tokenizers


@runtime_checkable
class Tokenizer(Protocol):
    """What the engine needs from a tokenizer."""

    @property
    def bos_token_id(self) -> int | None: ...

    @property
    def eos_token_ids(self) -> tuple[int, ...]: ...

    @property
    def vocab_size(self) -> int: ...

    def encode(self, text: str, add_bos: bool = True) -> list[int]: ...

    def decode(self, token_ids: Sequence[int]) -> str: ...


@runtime_checkable
class ByteLevelTokenizer(Tokenizer, Protocol):
    """A tokenizer whose ids each stand for bytes, and whose decode is those bytes read
    as UTF-8 with invalid sequences replaced; the detokenizer decodes it exactly."""

    def token_bytes(self, token_id: int) -> bytes: ...


class ByteTokenizer:
    """Ids 0-255 are the UTF-8 bytes of the text; 256 is BOS and 257 is EOS."""

    NUM_BYTES = 256
    BOS_TOKEN_ID = 256
    EOS_TOKEN_ID = 257

    @property
    def bos_token_id(self) -> int:
        return self.BOS_TOKEN_ID

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return (self.EOS_TOKEN_ID,)

    @property
    def vocab_size(self) -> int:
        return self.NUM_BYTES + 2

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        token_ids = list(text.encode("utf-8"))
        return [self.BOS_TOKEN_ID, *token_ids] if add_bos else token_ids

    def token_bytes(self, token_id: int) -> bytes:
        """The byte an id stands for; special and out-of-range ids stand for none."""
        return bytes((token_id,)) if 0 <= token_id < self.NUM_BYTES else b""

    def decode(self, token_ids: Sequence[int]) -> str:
        """Special and out-of-range ids are skipped; invalid UTF-8 becomes U+FFFD."""
        data = bytes(t for t in token_ids if 0 <= t < self.NUM_BYTES)
        return data.decode("utf-8", errors="replace")


class HFTokenizer:
    """A ``tokenizers`` tokenizer loaded from a ``tokenizer.json`` file.

    BOS/EOS come from the caller (the loader reads them from ``config.json``,
    ``generation_config.json`` and ``tokenizer_config.json``), because ``tokenizer.json``
    alone does not say which added token is which.
    """

    def __init__(
        self,
        tokenizer: tokenizers.Tokenizer,
        bos_token_id: int | None,
        eos_token_ids: tuple[int, ...],
    ) -> None:
        self._tokenizer = tokenizer
        self._bos_token_id = bos_token_id
        self._eos_token_ids = eos_token_ids

    @classmethod
    def from_file(
        cls, path: str | Path, bos_token_id: int | None, eos_token_ids: tuple[int, ...]
    ) -> HFTokenizer:
        return cls(tokenizers.Tokenizer.from_file(str(path)), bos_token_id, eos_token_ids)

    @property
    def backend(self) -> tokenizers.Tokenizer:
        """The ``tokenizers`` tokenizer itself (structured outputs read its vocabulary)."""
        return self._tokenizer

    @property
    def bos_token_id(self) -> int | None:
        return self._bos_token_id

    @property
    def eos_token_ids(self) -> tuple[int, ...]:
        return self._eos_token_ids

    @property
    def vocab_size(self) -> int:
        return self._tokenizer.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        # NOTE: the file's post-processor may or may not add BOS; we never let it, and
        # prepend BOS ourselves, so add_bos means the same thing for every checkpoint.
        token_ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        if add_bos and self._bos_token_id is not None:
            return [self._bos_token_id, *token_ids]
        return token_ids

    def decode(self, token_ids: Sequence[int]) -> str:
        """Special tokens are skipped."""
        return self._tokenizer.decode(list(token_ids), skip_special_tokens=True)
