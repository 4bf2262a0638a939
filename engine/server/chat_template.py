"""How chat messages become one prompt string.

The presets use a byte-level tokenizer with no chat template of their own, so every
model is served with this one: each message is ``<|role|>``, a newline, its text and a
newline, and the prompt ends with ``<|assistant|>`` and a newline for the reply::

    <|system|>
    You are terse.
    <|user|>
    What is TTFT?
    <|assistant|>

The markers are plain text, not special tokens, so the prompt's token count is what
the tokenizer makes of this string (one token per UTF-8 byte, plus BOS, for presets).
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.server.protocol import ChatMessage


def render_chat_prompt(messages: Sequence[ChatMessage]) -> str:
    parts = [f"<|{message.role}|>\n{message.text}\n" for message in messages]
    parts.append("<|assistant|>\n")
    return "".join(parts)
