"""The detokenizer's text is the full decode of the ids, streamed or not (stop strings
aside), over random byte sequences: property tests against ``tokenizer.decode``."""

from __future__ import annotations

from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from engine.detokenizer import IncrementalDetokenizer
from engine.model.tokenizer import ByteTokenizer

TOKENIZER = ByteTokenizer()
# Bytes that matter to UTF-8 (ASCII, continuation, lead bytes of every length, bytes
# never valid) and the special ids, which decode to nothing.
_INTERESTING = [0x41, 0x80, 0xA9, 0xBF, 0xC2, 0xD0, 0xE2, 0xEB, 0xED, 0xF0, 0xF4, 0xF8, 0xFF]
TOKEN_IDS = st.lists(
    st.one_of(
        st.sampled_from(_INTERESTING),
        st.integers(0, 255),
        st.sampled_from([ByteTokenizer.BOS_TOKEN_ID, ByteTokenizer.EOS_TOKEN_ID]),
    ),
    max_size=40,
)
VALID_TEXT_IDS = st.text(max_size=12).map(lambda t: TOKENIZER.encode(t, add_bos=False))


def _run(tokenizer, token_ids: Sequence[int], stop: tuple[str, ...] = ()):
    """Feed ids one at a time as the engine does; (streamed chunks, text, ids fed)."""
    detok = IncrementalDetokenizer(tokenizer, stop)
    chunks, fed = [], []
    for token_id in token_ids:
        fed.append(token_id)
        matched = detok.add_token(token_id)
        if matched is not None:
            break
        chunks.append(detok.take_new_text(finished=False))
    chunks.append(detok.take_new_text(finished=True))
    return chunks, detok.text, fed


def _cut_at_first_stop(text: str, stop: tuple[str, ...]) -> str:
    """The reference: cut before the stop string that ends first (then starts first)."""
    found = [(i + len(s), i) for s in stop if (i := text.find(s)) >= 0]
    return text[: min(found)[1]] if found else text


@settings(max_examples=300, deadline=None)
@given(token_ids=TOKEN_IDS)
def test_streamed_and_final_text_equal_the_full_decode(token_ids):
    chunks, text, _ = _run(TOKENIZER, token_ids)
    assert text == TOKENIZER.decode(token_ids)
    assert "".join(chunks) == text


@settings(max_examples=200, deadline=None)
@given(
    parts=st.lists(st.one_of(TOKEN_IDS, VALID_TEXT_IDS), max_size=4),
    stop=st.lists(st.text(min_size=1, max_size=3), min_size=1, max_size=3).map(tuple),
)
def test_with_stop_strings_the_text_is_the_decode_cut_at_the_first_stop(parts, stop):
    token_ids = [t for part in parts for t in part]
    chunks, text, fed = _run(TOKENIZER, token_ids, stop)
    assert text == _cut_at_first_stop(TOKENIZER.decode(fed), stop)
    assert "".join(chunks) == text
    assert not any(s in text for s in stop)


def test_a_character_after_invalid_bytes_is_not_replaced():
    # five stray continuation bytes, then a two-byte character: the lead byte waits
    token_ids = [0x80] * 5 + list("Щ".encode())
    chunks, text, _ = _run(TOKENIZER, token_ids)
    assert text == "\ufffd" * 5 + "Щ"
    assert "".join(chunks) == text


def test_trailing_bytes_of_an_unfinished_character_are_flushed_at_finish():
    token_ids = list("ok ☕".encode())[:-1]
    chunks, text, _ = _run(TOKENIZER, token_ids)
    assert text == TOKENIZER.decode(token_ids) == "ok \ufffd"
    assert chunks[-1] == "\ufffd"


class _OpaqueTokenizer:
    """A tokenizer that is not byte-level as far as the detokenizer can tell."""

    bos_token_id = ByteTokenizer.BOS_TOKEN_ID
    eos_token_ids = (ByteTokenizer.EOS_TOKEN_ID,)
    vocab_size = TOKENIZER.vocab_size

    def encode(self, text: str, add_bos: bool = True) -> list[int]:
        return TOKENIZER.encode(text, add_bos)

    def decode(self, token_ids: Sequence[int]) -> str:
        return TOKENIZER.decode(token_ids)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=16), tail=st.sampled_from([b"", b"\xe2", b"\xe2\x82", b"\xf0\x9f"]))
def test_window_decoding_flushes_to_the_full_decode_at_finish(text, tail):
    token_ids = TOKENIZER.encode(text, add_bos=False) + list(tail)
    chunks, final, _ = _run(_OpaqueTokenizer(), token_ids)
    assert final == TOKENIZER.decode(token_ids)
    assert "".join(chunks) == final
