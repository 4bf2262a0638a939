"""Build small Hugging Face Llama checkpoints on disk, the way transformers saves them.

Used by the parity and loader tests (and reusable by engine-level parity tests): a
random ``transformers.LlamaForCausalLM`` saved with ``save_pretrained`` (safetensors),
plus a byte-level ``tokenizer.json`` whose ids equal byte values, so it agrees with
``ByteTokenizer`` (256 = ``<s>``, 257 = ``</s>``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import tokenizers
import torch
import transformers
from tokenizers import decoders, models, pre_tokenizers

BYTE_VOCAB_SIZE = 258
BOS_TOKEN = "<s>"
EOS_TOKEN = "</s>"


def _bytes_to_unicode() -> dict[int, str]:
    # GPT-2's reversible byte -> printable character map, which ByteLevel uses.
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    characters = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            characters.append(256 + extra)
            extra += 1
    return {byte: chr(char) for byte, char in zip(printable, characters, strict=True)}


def byte_level_tokenizer() -> tokenizers.Tokenizer:
    """A ``tokenizers`` byte-level tokenizer: id = byte value, then <s>=256, </s>=257."""
    vocab = {char: byte for byte, char in _bytes_to_unicode().items()}
    tokenizer = tokenizers.Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tokenizer.decoder = decoders.ByteLevel()
    tokenizer.add_special_tokens([BOS_TOKEN, EOS_TOKEN])
    return tokenizer


def hf_llama_config(**overrides: Any) -> transformers.LlamaConfig:
    """A tiny GQA Llama config (2 layers, 4 query heads sharing 2 KV heads)."""
    settings: dict[str, Any] = {
        "vocab_size": BYTE_VOCAB_SIZE,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "max_position_embeddings": 512,
        "rms_norm_eps": 1e-5,
        "bos_token_id": 256,
        "eos_token_id": 257,
        "tie_word_embeddings": False,
    }
    settings.update(overrides)
    return transformers.LlamaConfig(**settings)


@torch.no_grad()
def random_hf_llama(config: transformers.LlamaConfig, seed: int) -> transformers.LlamaForCausalLM:
    """A float32 HF model whose weights are large enough to make every mistake visible.

    The default init (std 0.02, norm gains 1) makes attention almost uniform and would
    hide masking, position and norm-swap bugs; std 0.2 and random norm gains do not.
    """
    model = transformers.LlamaForCausalLM(config).eval()
    generator = torch.Generator().manual_seed(seed)
    for name, parameter in model.named_parameters():
        noise = torch.randn(parameter.shape, generator=generator)
        if name.endswith("norm.weight"):
            parameter.copy_(1.0 + 0.2 * noise)
        else:
            parameter.copy_(0.2 * noise)
    return model


def save_hf_checkpoint(
    model: transformers.LlamaForCausalLM, directory: Path, **save_kwargs: Any
) -> Path:
    """``save_pretrained`` (safetensors) plus ``tokenizer.json`` into ``directory``."""
    model.save_pretrained(directory, **save_kwargs)
    byte_level_tokenizer().save(str(directory / "tokenizer.json"))
    return directory
