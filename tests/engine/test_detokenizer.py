from __future__ import annotations

from engine.detokenizer import IncrementalDetokenizer
from engine.model.tokenizer import ByteTokenizer


def _stream(text: str, stop: tuple[str, ...]) -> tuple[list[str], str | None, str]:
    tok = ByteTokenizer()
    detok = IncrementalDetokenizer(tok, stop)
    chunks, matched = [], None
    for token_id in tok.encode(text, add_bos=False):
        matched = detok.add_token(token_id)
        chunks.append(detok.take_new_text(finished=matched is not None))
        if matched:
            break
    return chunks, matched, detok.text


def test_stop_string_ends_text_before_it_and_is_never_streamed():
    chunks, matched, text = _stream("hello world, STOP here", ("STOP",))
    assert matched == "STOP"
    assert text == "hello world, "
    assert "".join(chunks) == "hello world, "
    assert not any("S" in c for c in chunks)


def test_multibyte_characters_are_emitted_whole():
    chunks, matched, text = _stream("naïve ☕ ok", ())
    assert matched is None and text == "naïve ☕ ok"
    assert all("\ufffd" not in c for c in chunks)
    assert "".join(chunks) == text


def test_invalid_bytes_do_not_stall_the_stream():
    tok = ByteTokenizer()
    detok = IncrementalDetokenizer(tok)
    for _ in range(20):
        detok.add_token(0x80)  # a continuation byte with no lead: never valid
    assert detok.text.count("\ufffd") >= 14


def test_stop_strings_wait_for_min_tokens_as_in_vllm():
    tok = ByteTokenizer()
    ids = tok.encode("ab STOP cd STOP ef", add_bos=False)

    def stopped_at(min_tokens: int) -> str:
        detok = IncrementalDetokenizer(tok, ("STOP",), min_tokens)
        for token_id in ids:
            if detok.add_token(token_id):
                break
        return detok.text

    assert stopped_at(0) == "ab "
    # the first STOP completes at token 7: with min_tokens=7 it is not looked for
    assert stopped_at(6) == "ab "
    assert stopped_at(7) == "ab STOP cd "
    assert stopped_at(len(ids)) == "ab STOP cd STOP ef"
