from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.model import ByteTokenizer, HFTokenizer, ModelLoadError, load_model
from engine.model.device import resolve_device, resolve_dtype
from tests.engine.model.checkpoint import (
    hf_llama_config,
    random_hf_llama,
    save_hf_checkpoint,
)
from tests.engine.model.paged_batch import PagedBatchDriver


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    model = random_hf_llama(hf_llama_config(), seed=5)
    return save_hf_checkpoint(model, tmp_path_factory.mktemp("pristine"))


@pytest.fixture
def checkpoint(pristine, tmp_path) -> Path:
    """A fresh copy each test may break."""
    return Path(shutil.copytree(pristine, tmp_path / "checkpoint"))


def _edit_json(path: Path, **changes) -> None:
    data = json.loads(path.read_text()) if path.exists() else {}
    data.update(changes)
    path.write_text(json.dumps(data))


def _edit_weights(directory: Path, edit: Callable[[dict[str, torch.Tensor]], None]) -> None:
    path = directory / "model.safetensors"
    tensors = load_file(path)
    edit(tensors)
    save_file(tensors, path)


def _remove_config(d: Path) -> None:
    (d / "config.json").unlink()


def _corrupt_config(d: Path) -> None:
    (d / "config.json").write_text("{not json")


def _remove_tokenizer(d: Path) -> None:
    (d / "tokenizer.json").unlink()


def _remove_weights(d: Path) -> None:
    (d / "model.safetensors").unlink()


def _bin_weights_only(d: Path) -> None:
    (d / "model.safetensors").rename(d / "pytorch_model.bin")


def _truncate_weights(d: Path) -> None:
    (d / "model.safetensors").write_bytes(b"\x00" * 16)


def _index_with_missing_shard(d: Path) -> None:
    weight_map = {"model.embed_tokens.weight": "model-00002-of-00002.safetensors"}
    _edit_json(d / "model.safetensors.index.json", weight_map=weight_map)


CASES = {
    "no config.json": (_remove_config, "config.json not found"),
    "config.json not JSON": (_corrupt_config, "not readable JSON"),
    "not a Llama": (lambda d: _edit_json(d / "config.json", model_type="gpt2"), "not a Llama"),
    "unsupported rope": (
        lambda d: _edit_json(d / "config.json", rope_parameters={"rope_type": "yarn"}),
        "'yarn' is not supported",
    ),
    "no tokenizer.json": (_remove_tokenizer, "has no tokenizer.json"),
    "no weights": (_remove_weights, r"no \*\.safetensors weight files; download"),
    "only .bin weights": (_bin_weights_only, r"\.bin/\.pt weights, which are not loaded"),
    "unreadable weights": (_truncate_weights, "could not be read"),
    "missing shard": (_index_with_missing_shard, "missing shard.*model-00002-of-00002"),
    "missing tensor": (
        lambda d: _edit_weights(d, lambda t: t.pop("model.layers.1.mlp.down_proj.weight")),
        r"missing 1 weight tensor\(s\): model\.layers\.1\.mlp\.down_proj\.weight",
    ),
    "unexpected tensor": (
        lambda d: _edit_weights(d, lambda t: t.update({"model.extra.weight": torch.ones(2)})),
        "does not use: model.extra.weight",
    ),
    "shape mismatch": (
        lambda d: _edit_json(d / "config.json", intermediate_size=96),
        r"mlp\.\w+_proj\.weight has shape .* config\.json implies",
    ),
    "tokenizer larger than vocab": (
        lambda d: _edit_json(d / "config.json", vocab_size=200, eos_token_id=1, bos_token_id=0),
        "has 258 tokens but config.json's vocab_size is 200",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_bad_checkpoint_is_a_specific_error_naming_the_path(checkpoint, case):
    breaks, message = CASES[case]
    breaks(checkpoint)
    with pytest.raises(ModelLoadError, match=message) as error:
        load_model(str(checkpoint), device="cpu")
    assert str(checkpoint) in str(error.value)


def test_unknown_name_lists_presets_and_never_downloads():
    with pytest.raises(ModelLoadError, match=r"neither a model preset \(tiny, small, llama-1b"):
        load_model("meta-llama/Llama-3.2-1B", device="cpu")


def test_a_file_is_not_a_checkpoint_directory(checkpoint):
    with pytest.raises(ModelLoadError, match="is a file; pass the checkpoint directory"):
        load_model(str(checkpoint / "config.json"), device="cpu")


def _logits(model, token_ids: list[int]) -> torch.Tensor:
    (logits,) = PagedBatchDriver(model, num_blocks=16, block_size=8).step([("a", token_ids)])
    return logits


def test_sharded_checkpoint_with_index_loads_the_same_weights(tmp_path, pristine):
    hf_model = random_hf_llama(hf_llama_config(), seed=5)
    sharded = save_hf_checkpoint(hf_model, tmp_path, max_shard_size="40KB")
    assert (sharded / "model.safetensors.index.json").is_file()
    assert len(list(sharded.glob("*.safetensors"))) > 2
    whole, _, _ = load_model(str(pristine), device="cpu")
    shards, _, _ = load_model(str(sharded), device="cpu")
    prompt = list(range(60, 90))
    torch.testing.assert_close(_logits(shards, prompt), _logits(whole, prompt), rtol=0, atol=0)


def test_shards_without_index_are_globbed(tmp_path):
    hf_model = random_hf_llama(hf_llama_config(), seed=5)
    sharded = save_hf_checkpoint(hf_model, tmp_path, max_shard_size="40KB")
    (sharded / "model.safetensors.index.json").unlink()
    model, _, _ = load_model(str(sharded), device="cpu")
    assert torch.isfinite(_logits(model, [1, 2, 3])).all()


def test_special_tokens_come_from_all_three_config_files(checkpoint):
    _edit_json(checkpoint / "config.json", bos_token_id=None, eos_token_id=257)
    _edit_json(checkpoint / "generation_config.json", eos_token_id=[257, 10])
    _edit_json(checkpoint / "tokenizer_config.json", bos_token={"content": "<s>"}, eos_token="x")
    _, model_config, tokenizer = load_model(str(checkpoint), device="cpu")
    assert isinstance(tokenizer, HFTokenizer)
    # config.json, then generation_config.json, then tokenizer_config.json ("x" = id 120).
    assert tokenizer.eos_token_ids == model_config.eos_token_ids == (257, 10, ord("x"))
    assert tokenizer.bos_token_id == model_config.bos_token_id == 256
    assert tokenizer.encode("hi") == [256, ord("h"), ord("i")]


def test_dtype_override_and_tied_embeddings_stay_tied(tmp_path):
    hf_model = random_hf_llama(hf_llama_config(tie_word_embeddings=True), seed=6)
    directory = save_hf_checkpoint(hf_model, tmp_path)
    model, config, _ = load_model(str(directory), device="cpu", dtype="bf16")
    assert config.tie_word_embeddings
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    torch.testing.assert_close(
        model.lm_head.weight.float(), hf_model.lm_head.weight, atol=1e-2, rtol=1e-2
    )


def test_presets_load_by_name_with_the_byte_tokenizer():
    model, config, tokenizer = load_model("tiny", device="cpu", dtype="float32")
    assert isinstance(tokenizer, ByteTokenizer)
    assert config.vocab_size == tokenizer.vocab_size
    assert next(model.parameters()).dtype == torch.float32


def test_device_defaults_and_errors():
    device = resolve_device(None)
    assert device.type == ("cuda" if torch.cuda.is_available() else "cpu")
    assert resolve_dtype(None, torch.device("cpu")) == torch.float32
    assert resolve_dtype("fp16", torch.device("cpu")) == torch.float16
    with pytest.raises(ValueError, match="unknown dtype 'fp8'"):
        resolve_dtype("fp8", torch.device("cpu"))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="CUDA is not available"):
            resolve_device("cuda")
