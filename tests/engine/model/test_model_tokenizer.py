from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.model import ByteTokenizer, HFTokenizer, Tokenizer
from tests.engine.model.checkpoint import byte_level_tokenizer

# Any text that UTF-8 can encode (lone surrogates cannot be).
encodable_text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=64)

SAMPLES = ["", "hello, world", "naïve café", "日本語のテキスト", "emoji 🦙 and \t tabs\n"]


@pytest.fixture(scope="module")
def hf_tokenizer(tmp_path_factory) -> HFTokenizer:
    path = tmp_path_factory.mktemp("tokenizer") / "tokenizer.json"
    byte_level_tokenizer().save(str(path))
    return HFTokenizer.from_file(path, bos_token_id=256, eos_token_ids=(257,))


def test_byte_tokenizer_ids_are_utf8_bytes_after_bos():
    tokenizer = ByteTokenizer()
    assert tokenizer.encode("hé") == [256, ord("h"), 0xC3, 0xA9]
    assert tokenizer.encode("hé", add_bos=False) == [ord("h"), 0xC3, 0xA9]
    assert (tokenizer.bos_token_id, tokenizer.eos_token_ids, tokenizer.vocab_size) == (
        256,
        (257,),
        258,
    )


@pytest.mark.parametrize("text", SAMPLES)
def test_byte_tokenizer_round_trips(text):
    tokenizer = ByteTokenizer()
    assert tokenizer.decode(tokenizer.encode(text)) == text


def test_byte_tokenizer_decode_skips_specials_and_replaces_bad_utf8():
    tokenizer = ByteTokenizer()
    assert tokenizer.decode([256, ord("o"), ord("k"), 257]) == "ok"
    # A lone continuation byte and a truncated 2-byte sequence are not valid UTF-8.
    assert tokenizer.decode([ord("a"), 0x80, ord("b"), 0xC3]) == "a\ufffdb\ufffd"


@settings(max_examples=200, deadline=None)
@given(encodable_text)
def test_byte_tokenizer_round_trips_any_text(text):
    tokenizer = ByteTokenizer()
    assert tokenizer.decode(tokenizer.encode(text, add_bos=False)) == text


@pytest.mark.parametrize("text", SAMPLES)
def test_hf_tokenizer_round_trips_and_agrees_with_byte_tokenizer(hf_tokenizer, text):
    token_ids = hf_tokenizer.encode(text)
    assert token_ids == ByteTokenizer().encode(text)
    assert hf_tokenizer.decode(token_ids) == text


@settings(max_examples=100, deadline=None)
@given(encodable_text)
def test_hf_tokenizer_round_trips_any_text(hf_tokenizer, text):
    assert hf_tokenizer.decode(hf_tokenizer.encode(text, add_bos=False)) == text


def test_hf_tokenizer_specials(hf_tokenizer):
    assert hf_tokenizer.encode("a")[0] == 256
    assert hf_tokenizer.encode("a", add_bos=False) == [ord("a")]
    assert hf_tokenizer.decode([256, ord("h"), ord("i"), 257]) == "hi"
    assert hf_tokenizer.vocab_size == 258
    assert hf_tokenizer.eos_token_ids == (257,)


def test_hf_tokenizer_without_bos_adds_nothing():
    tokenizer = HFTokenizer(byte_level_tokenizer(), bos_token_id=None, eos_token_ids=())
    assert tokenizer.encode("ab") == [ord("a"), ord("b")]


def test_both_satisfy_the_protocol(hf_tokenizer):
    assert isinstance(ByteTokenizer(), Tokenizer)
    assert isinstance(hf_tokenizer, Tokenizer)
