"""A Llama-architecture decoder over a paged KV cache, its tokenizers, presets and loader."""

from engine.model.attention_metadata import AttentionMetadata
from engine.model.config import ModelConfig, ModelConfigError, RopeScaling
from engine.model.device import resolve_device, resolve_dtype
from engine.model.errors import ModelLoadError
from engine.model.kv_cache_tensors import (
    allocate_kv_caches,
    kv_bytes_per_block,
    num_blocks_for_memory,
)
from engine.model.llama import LlamaForCausalLM, build_model
from engine.model.loader import load_model
from engine.model.paged_attention import KVCache
from engine.model.presets import PRESETS, Preset, build_preset_model, get_preset
from engine.model.tokenizer import ByteTokenizer, HFTokenizer, Tokenizer

__all__ = [
    "PRESETS",
    "AttentionMetadata",
    "ByteTokenizer",
    "HFTokenizer",
    "KVCache",
    "LlamaForCausalLM",
    "ModelConfig",
    "ModelConfigError",
    "ModelLoadError",
    "Preset",
    "RopeScaling",
    "Tokenizer",
    "allocate_kv_caches",
    "build_model",
    "build_preset_model",
    "get_preset",
    "kv_bytes_per_block",
    "load_model",
    "num_blocks_for_memory",
    "resolve_device",
    "resolve_dtype",
]
