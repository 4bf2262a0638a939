"""``load_model``: a preset name or a local Hugging Face Llama checkpoint directory.

A checkpoint directory holds ``config.json``, ``tokenizer.json`` and ``*.safetensors``
weights (one file, or shards with or without ``model.safetensors.index.json``).
Nothing is ever downloaded: a name that is neither a preset nor a directory is an error.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path
from typing import Any

import tokenizers
import torch
from safetensors import SafetensorError, safe_open

from engine.model.config import ModelConfig, ModelConfigError, token_ids_tuple
from engine.model.device import resolve_device, resolve_dtype
from engine.model.errors import ModelLoadError
from engine.model.hf_weights import hf_weight_targets, is_ignorable
from engine.model.llama import LlamaForCausalLM, build_model
from engine.model.presets import PRESETS, build_preset_model
from engine.model.tokenizer import HFTokenizer, Tokenizer
from engine.quantization import INT8_WEIGHT_ONLY, check_quantization

SAFETENSORS_INDEX = "model.safetensors.index.json"
_MAX_NAMES_IN_MESSAGE = 8


def load_model(
    source: str | os.PathLike[str],
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    quantization: str | None = None,
) -> tuple[LlamaForCausalLM, ModelConfig, Tokenizer]:
    """(model, model_config, tokenizer) for a preset name or a checkpoint directory.

    ``device``/``dtype`` of ``None`` or ``"auto"`` pick CUDA in bf16 (fp16 without bf16
    support) when available, else CPU in float32. ``quantization`` (``engine.quantization``)
    quantizes the loaded weights. Raises ``ModelLoadError`` naming the path and what is
    missing or unsupported.
    """
    model, model_config, tokenizer = _load_unquantized(source, device, dtype)
    if quantization is not None:
        quantize(model, quantization)
    return model, model_config, tokenizer


def _load_unquantized(
    source: str | os.PathLike[str],
    device: str | torch.device | None,
    dtype: str | torch.dtype | None,
) -> tuple[LlamaForCausalLM, ModelConfig, Tokenizer]:
    resolved_device = resolve_device(device)
    resolved_dtype = resolve_dtype(dtype, resolved_device)
    source_text = os.fspath(source)
    if source_text in PRESETS:
        return build_preset_model(source_text, resolved_device, resolved_dtype)
    path = Path(source_text).expanduser()
    if not path.exists():
        raise ModelLoadError(
            f"{source_text!r} is neither a model preset ({', '.join(PRESETS)}) nor an existing "
            "directory. Pass a preset name, or download a Llama-architecture checkpoint "
            "(config.json, *.safetensors, tokenizer.json) and pass its directory; "
            "nothing is downloaded automatically"
        )
    if not path.is_dir():
        raise ModelLoadError(
            f"{path} is a file; pass the checkpoint directory that contains config.json"
        )
    return load_checkpoint(path, resolved_device, resolved_dtype)


def load_checkpoint(
    directory: Path, device: torch.device, dtype: torch.dtype
) -> tuple[LlamaForCausalLM, ModelConfig, HFTokenizer]:
    """Load a local Hugging Face Llama checkpoint directory (see the module docstring)."""
    hf_config = _read_json(directory / "config.json", required=True)
    try:
        model_config = ModelConfig.from_hf_config(hf_config)
    except ModelConfigError as error:
        raise ModelLoadError(f"{directory / 'config.json'}: {error}") from error
    tokenizer_path = directory / "tokenizer.json"
    if not tokenizer_path.is_file():
        raise ModelLoadError(
            f"{directory} has no tokenizer.json. Only `tokenizers` JSON files are read; "
            "for a checkpoint with only tokenizer.model, save a fast tokenizer into the "
            "directory (transformers: AutoTokenizer.from_pretrained(dir).save_pretrained(dir))"
        )
    weight_files = _find_weight_files(directory)
    model_config, tokenizer = _resolve_special_tokens(directory, model_config, tokenizer_path)
    model = build_model(model_config, device, dtype)
    _load_weights(model, weight_files, directory)
    return model, model_config, tokenizer


def _read_json(path: Path, required: bool) -> dict[str, Any]:
    if not path.is_file():
        if required:
            raise ModelLoadError(
                f"{path} not found: a Hugging Face checkpoint directory needs config.json"
            )
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ModelLoadError(f"{path} is not readable JSON: {error}") from error


def _find_weight_files(directory: Path) -> list[Path]:
    index_path = directory / SAFETENSORS_INDEX
    if index_path.is_file():
        weight_map = _read_json(index_path, required=True).get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelLoadError(f"{index_path} has no 'weight_map'; re-save the checkpoint")
        files = [directory / name for name in sorted(set(weight_map.values()))]
        missing = [file.name for file in files if not file.is_file()]
        if missing:
            raise ModelLoadError(
                f"{directory} is missing shard(s) listed in {SAFETENSORS_INDEX}: "
                f"{_names(missing)}; download the complete checkpoint"
            )
        return files
    files = sorted(directory.glob("*.safetensors"))
    if not files:
        has_bin = any(directory.glob("*.bin")) or any(directory.glob("*.pt*"))
        hint = (
            "it has PyTorch .bin/.pt weights, which are not loaded (they can run code); "
            "convert them with transformers: save_pretrained(dir, safe_serialization=True)"
            if has_bin
            else "download the *.safetensors weights into it"
        )
        raise ModelLoadError(f"{directory} has no *.safetensors weight files; {hint}")
    return files


def _resolve_special_tokens(
    directory: Path, model_config: ModelConfig, tokenizer_path: Path
) -> tuple[ModelConfig, HFTokenizer]:
    # EOS: config.json, then generation_config.json (chat checkpoints often list their
    # end-of-turn token only there), then tokenizer_config.json's eos_token, in order.
    generation_config = _read_json(directory / "generation_config.json", required=False)
    tokenizer_config = _read_json(directory / "tokenizer_config.json", required=False)
    try:
        tokenizer = tokenizers.Tokenizer.from_file(str(tokenizer_path))
    except Exception as error:  # tokenizers raises a bare Exception on a malformed file
        raise ModelLoadError(f"{tokenizer_path} could not be read: {error}") from error
    eos_token_ids = list(model_config.eos_token_ids)
    eos_token_ids += token_ids_tuple(generation_config.get("eos_token_id"))
    eos_from_tokenizer = _special_token_id(tokenizer, tokenizer_config.get("eos_token"))
    if eos_from_tokenizer is not None:
        eos_token_ids.append(eos_from_tokenizer)
    bos_token_id = model_config.bos_token_id
    if bos_token_id is None:
        bos_token_id = generation_config.get("bos_token_id")
    if bos_token_id is None:
        bos_token_id = _special_token_id(tokenizer, tokenizer_config.get("bos_token"))
    tokenizer_vocab_size = tokenizer.get_vocab_size(with_added_tokens=True)
    if tokenizer_vocab_size > model_config.vocab_size:
        raise ModelLoadError(
            f"{tokenizer_path} has {tokenizer_vocab_size} tokens but config.json's "
            f"vocab_size is {model_config.vocab_size}; the tokenizer and weights do not match"
        )
    try:
        model_config = dataclasses.replace(
            model_config,
            bos_token_id=bos_token_id,
            eos_token_ids=tuple(dict.fromkeys(eos_token_ids)),
        )
    except ModelConfigError as error:
        raise ModelLoadError(f"{directory}: {error}") from error
    return model_config, HFTokenizer(
        tokenizer, model_config.bos_token_id, model_config.eos_token_ids
    )


def _special_token_id(
    tokenizer: tokenizers.Tokenizer, token: str | dict[str, Any] | None
) -> int | None:
    # tokenizer_config.json writes a special token as a string or as {"content": ...}.
    if isinstance(token, dict):
        token = token.get("content")
    return tokenizer.token_to_id(token) if isinstance(token, str) else None


@torch.no_grad()
def _load_weights(model: LlamaForCausalLM, weight_files: list[Path], directory: Path) -> None:
    targets = hf_weight_targets(model)
    loaded: set[str] = set()
    unexpected: list[str] = []
    for weight_file in weight_files:
        try:
            with safe_open(str(weight_file), framework="pt", device="cpu") as tensors:
                for name in tensors.keys():  # noqa: SIM118 (safe_open is not a dict)
                    if is_ignorable(name, model):
                        continue
                    target = targets.get(name)
                    if target is None:
                        unexpected.append(name)
                        continue
                    tensor = tensors.get_tensor(name)
                    if tuple(tensor.shape) != tuple(target.shape):
                        raise ModelLoadError(
                            f"{weight_file}: tensor {name} has shape {tuple(tensor.shape)}, "
                            f"config.json implies {tuple(target.shape)}; the weights and "
                            "config.json do not belong together"
                        )
                    target.copy_(tensor)
                    loaded.add(name)
        except (OSError, RuntimeError, ValueError, SafetensorError) as error:
            raise ModelLoadError(f"{weight_file} could not be read: {error}") from error
    if unexpected:
        raise ModelLoadError(
            f"{directory} has tensors a Llama model does not use: {_names(unexpected)}; "
            "is it a different architecture or a quantised checkpoint?"
        )
    missing = sorted(set(targets) - loaded)
    if missing:
        raise ModelLoadError(
            f"{directory} is missing {len(missing)} weight tensor(s): {_names(missing)}; "
            "the checkpoint is incomplete (re-download it) or not a Llama checkpoint"
        )


def _names(names: list[str]) -> str:
    shown = ", ".join(names[:_MAX_NAMES_IN_MESSAGE])
    more = len(names) - _MAX_NAMES_IN_MESSAGE
    return f"{shown} (and {more} more)" if more > 0 else shown


def quantize(model: LlamaForCausalLM, method: str) -> None:
    """Quantize a loaded model's weights in place by ``method`` (``engine.quantization``)."""
    # NOTE: imported here: engine.quantization.int8 imports the model module this one builds
    from engine.quantization.int8 import quantize_int8_weight_only

    if check_quantization(method) == INT8_WEIGHT_ONLY:
        quantize_int8_weight_only(model)
