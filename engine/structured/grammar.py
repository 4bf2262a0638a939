"""The xgrammar side: the engine's vocabulary as a ``TokenizerInfo``, and grammars compiled.

xgrammar (vLLM's default structured-output backend) is imported here only, and only when a
structured request arrives: importing it loads transformers, which costs a second or two.

- ``tokenizer_info``: the byte tokenizer's ids 0-255 are one byte each (a RAW vocabulary)
  and its BOS/EOS are special tokens; a ``tokenizer.json`` goes through xgrammar's own
  reading of a Hugging Face tokenizer (byte-level BPE's ``Ġ``, byte fallback's ``<0x0A>``).
  Both are sized to the model's vocabulary, so padded rows of the logits are masked too.
- ``check``: parses the constraint without the vocabulary (vLLM's front-end validation),
  cheap enough for the request path; a bad schema, regex or grammar is a ``RequestError``.
- ``GrammarCompiler.compile``: the expensive part, against the vocabulary. JSON schemas and
  ``json_object`` compile as vLLM's xgrammar backend compiles them (``any_whitespace`` unless
  ``disable_any_whitespace``; ``json_object`` is the schema ``{"type": "object"}``); a
  choice is an EBNF alternation of its strings; ``grammar`` is xgrammar's EBNF.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from engine.errors import RequestError
from engine.model.tokenizer import ByteTokenizer, HFTokenizer, Tokenizer
from engine.structured.params import FIELD, GrammarKey

# xgrammar's C++ errors open with "[02:34:18] /project/cpp/file.cc:94: " and sometimes a
# failed check's text; the rest is the useful part.
_CPP_PREFIX = re.compile(r"^\s*\[[\d:]+\]\s+\S+:\d+:\s*(Check failed: .*? is false: )?")
# NOTE: vLLM's xgrammar backend compiles json_object as this schema.
JSON_OBJECT_SCHEMA = '{"type": "object"}'


def _xgrammar() -> Any:
    try:
        import xgrammar
    except ImportError as error:  # NOTE: installed by the Makefile with --no-deps (pyproject)
        raise RequestError(
            f"{FIELD}: structured outputs need xgrammar, which is not installed "
            f"({error}); install it with: pip install --no-deps xgrammar==0.2.9"
        ) from None
    return xgrammar


def tokenizer_info(tokenizer: Tokenizer, vocab_size: int) -> Any:
    """xgrammar's ``TokenizerInfo`` for the engine's tokenizer and the model's vocabulary."""
    xgr = _xgrammar()
    stop_token_ids = list(tokenizer.eos_token_ids)
    if isinstance(tokenizer, ByteTokenizer):
        # NOTE: special ids stand for no bytes; xgrammar treats an empty token as special
        vocab = [tokenizer.token_bytes(i) for i in range(vocab_size)]
        return xgr.TokenizerInfo(
            vocab, xgr.VocabType.RAW, vocab_size=vocab_size, stop_token_ids=stop_token_ids
        )
    if isinstance(tokenizer, HFTokenizer):
        from transformers import PreTrainedTokenizerFast

        wrapped = PreTrainedTokenizerFast(tokenizer_object=tokenizer.backend)
        return xgr.TokenizerInfo.from_huggingface(
            wrapped, vocab_size=vocab_size, stop_token_ids=stop_token_ids
        )
    raise TypeError(f"no xgrammar vocabulary for a {type(tokenizer).__name__}")


def _message(error: BaseException) -> str:
    text = _CPP_PREFIX.sub("", str(error)).strip()
    return " ".join(text.split())[:500] or type(error).__name__


def _choice_ebnf(choices: Sequence[str]) -> str:
    # NOTE: a JSON string literal is an EBNF string literal of xgrammar's (same escapes)
    return "root ::= " + " | ".join(json.dumps(c, ensure_ascii=False) for c in choices)


def _grammar(xgr: Any, key: GrammarKey) -> Any:
    """The constraint parsed into an ``xgrammar.Grammar`` (no vocabulary involved)."""
    if key.kind == "json":
        return xgr.Grammar.from_json_schema(key.text, any_whitespace=key.any_whitespace)
    if key.kind == "json_object":
        return xgr.Grammar.from_json_schema(JSON_OBJECT_SCHEMA, any_whitespace=key.any_whitespace)
    if key.kind == "regex":
        return xgr.Grammar.from_regex(key.text)
    if key.kind == "choice":
        return xgr.Grammar.from_ebnf(_choice_ebnf(json.loads(key.text)))
    return xgr.Grammar.from_ebnf(key.text)


def check(key: GrammarKey) -> None:
    """``RequestError`` naming the constraint if it does not parse (a schema xgrammar does
    not support, an unbalanced regex, EBNF with a syntax error)."""
    xgr = _xgrammar()
    try:
        _grammar(xgr, key)
    except (RuntimeError, ValueError) as error:
        raise RequestError(f"{FIELD}.{key.kind}: {_message(error)}") from None


class GrammarCompiler:
    """Compiles constraints against one vocabulary (xgrammar's ``GrammarCompiler``, its own
    cache off: ``engine.structured.cache.GrammarCache`` is the one cache, and counts)."""

    def __init__(self, tokenizer: Tokenizer, vocab_size: int) -> None:
        xgr = self._xgr = _xgrammar()
        self.vocab_size = vocab_size
        self.info = tokenizer_info(tokenizer, vocab_size)
        self._compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)

    def compile(self, key: GrammarKey) -> Any:
        """The compiled grammar (``xgrammar.CompiledGrammar``); ``RequestError`` if it fails."""
        try:
            return self._compiler.compile_grammar(_grammar(self._xgr, key))
        except (RuntimeError, ValueError) as error:
            raise RequestError(f"{FIELD}.{key.kind}: {_message(error)}") from None
