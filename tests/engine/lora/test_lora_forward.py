"""LoRA in the torch engine's forward: adapters from PEFT directories and from seeds change
what is generated, a zero-B adapter does not, and a mixed batch gives each request what it
gets alone."""

from __future__ import annotations

import pytest
import torch

from engine.config import EngineConfig
from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.lora.source import PeftDirectory, parse_lora_source
from engine.lora.weights import load_lora_weights
from engine.sampling_params import SamplingParams
from tests.engine.conftest import run_to_completion
from tests.engine.lora.peft_dirs import TINY, lora_tensors, peft_key, write_peft_dir

GREEDY = SamplingParams(max_tokens=8, temperature=0.0, ignore_eos=True)
PROMPT = "The adapter under test"


def _engine(**knobs) -> LLMEngine:
    config = {"model": "tiny", "max_model_len": 64, "num_gpu_blocks": 32, "enable_lora": True}
    return LLMEngine(EngineConfig(**{**config, **knobs}))


def _generate(engine: LLMEngine, requests) -> list[list[int]]:
    """Greedy tokens of each (prompt, lora_request), all in one batch."""
    ids = [engine.add_request(p, GREEDY, lora_request=lora) for p, lora in requests]
    outputs = run_to_completion(engine)
    return [[t for out in outputs[i] for t in out.new_token_ids] for i in ids]


def test_a_peft_adapter_changes_greedy_output_and_a_zero_b_one_does_not(tmp_path):
    engine = _engine(max_loras=2)
    trained = engine.add_lora("trained", PeftDirectory(str(write_peft_dir(tmp_path / "t"))))
    zero = engine.add_lora("zero", PeftDirectory(str(write_peft_dir(tmp_path / "z", zero_b=True))))
    base, with_trained, with_zero = _generate(
        engine, [(PROMPT, None), (PROMPT, trained), (PROMPT, zero)]
    )
    assert with_trained != base
    assert with_zero == base


def test_a_mixed_batch_gives_each_request_its_own_adapters_output():
    """Base and two adapters in one batch (max_loras=2): each request's tokens equal those
    it gets alone, so a delta lands on its own rows only."""
    engine = _engine(max_loras=2)
    a = engine.add_lora("a", parse_lora_source("random:rank=8,seed=1"))
    b = engine.add_lora("b", parse_lora_source("random:rank=16,seed=2,targets=o_proj+down_proj"))
    plan = [("one prompt", a), ("another prompt here", None), ("a third", b), ("one prompt", b)]
    together = _generate(engine, plan)
    alone = [_generate(engine, [item])[0] for item in plan]
    assert together == alone
    assert together[0] != together[3]  # the same prompt under two adapters differs


def test_every_target_module_moves_the_logits():
    """An adapter of each one module alone changes the first token's distribution."""
    engine = _engine()
    params = SamplingParams(max_tokens=1, temperature=0.0, logprobs=5)

    def top(lora) -> tuple:
        request_id = engine.add_request(PROMPT, params, lora_request=lora)
        (out,) = run_to_completion(engine)[request_id]
        return out.new_logprobs[0].top

    base = top(None)
    for module in ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"):
        lora = engine.add_lora(module, parse_lora_source(f"random:rank=8,seed=4,targets={module}"))
        adapted = top(lora)
        moved = max(abs(a.logprob - b.logprob) for a, b in zip(adapted, base, strict=True))
        assert moved > 1e-4, module


def test_packed_weights_scale_b_by_alpha_over_rank(tmp_path):
    directory = write_peft_dir(tmp_path / "p", rank=8, targets=("v_proj",), seed=3)
    weights = load_lora_weights(
        PeftDirectory(str(directory)), TINY, 16, torch.device("cpu"), torch.float32
    )
    tensors = lora_tensors(8, ("v_proj",), seed=3)
    delta = weights.layers[2]["qkv_proj"]
    q_width, kv_width = 8 * 32, 2 * 32
    b = tensors[peft_key(2, "v_proj", "B")]
    assert torch.equal(delta.a, tensors[peft_key(2, "v_proj", "A")])
    assert torch.allclose(delta.b[q_width + kv_width :], b * 2.0)  # lora_alpha = 2 * r
    assert not delta.b[: q_width + kv_width].any()  # q and k columns untouched


def _bad_dir(tmp_path, **kwargs):
    return PeftDirectory(str(write_peft_dir(tmp_path / "bad", **kwargs)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rank": 32}, "rank 32 is above max_lora_rank=16"),
        ({"config": {"target_modules": ["embed_tokens"]}}, "target_modules=['embed_tokens']"),
        ({"config": {"target_modules": ".*proj"}}, "regular expressions are not supported"),
        ({"config": {"use_dora": True}}, "use_dora=true is not supported"),
        ({"config": {"bias": "all"}}, "only bias='none'"),
        ({"config": {"modules_to_save": ["lm_head"]}}, "modules_to_save"),
        ({"config": {"r": 0}}, "r=0 must be a positive integer"),
        ({"config": {"peft_type": "IA3"}}, "only LORA adapters"),
        ({"config": {"r": 4}}, "has shape (8, 256), expected (4, 256)"),
        ({"tensors": {}}, "holds no LoRA tensors"),
        (
            {"tensors": {peft_key(0, "q_proj", "A"): torch.zeros(8, 256)}},
            "lora_A or lora_B is missing for layer 0 q_proj",
        ),
        (
            {"tensors": {**lora_tensors(8, ("q_proj",)), "lm_head.weight": torch.zeros(2, 2)}},
            "tensors this engine cannot apply: lm_head.weight",
        ),
        (
            {"tensors": {peft_key(9, "q_proj", "A"): torch.zeros(8, 256)}},
            "cannot apply: base_model.model.model.layers.9",
        ),
        (
            {
                "tensors": {
                    peft_key(0, "q_proj", "A"): torch.full((8, 256), float("nan")),
                    peft_key(0, "q_proj", "B"): torch.zeros(256, 8),
                }
            },
            "NaN or infinite",
        ),
    ],
)
def test_an_adapter_that_cannot_be_served_is_refused_naming_the_problem(tmp_path, kwargs, message):
    engine = _engine()
    with pytest.raises(ConfigError) as raised:
        engine.add_lora("bad", _bad_dir(tmp_path, **kwargs))
    assert message in str(raised.value)
    assert engine.resolve_lora("bad") is None  # nothing registered


def test_missing_files_are_named(tmp_path):
    engine = _engine()
    with pytest.raises(ConfigError, match="no such directory"):
        engine.add_lora("x", PeftDirectory(str(tmp_path / "absent")))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ConfigError, match=r"adapter_config\.json not found"):
        engine.add_lora("x", PeftDirectory(str(tmp_path / "empty")))
    only_config = write_peft_dir(tmp_path / "no-weights")
    (only_config / "adapter_model.safetensors").unlink()
    with pytest.raises(ConfigError, match=r"adapter_model\.safetensors not found"):
        engine.add_lora("x", PeftDirectory(str(only_config)))


def test_lora_off_refuses_adapters_and_their_requests():
    engine = LLMEngine(EngineConfig(model="tiny", max_model_len=64, num_gpu_blocks=16))
    with pytest.raises(ConfigError, match="LoRA is off"):
        engine.add_lora("a", parse_lora_source("random:rank=8"))
    assert engine.lora is None and engine.resolve_lora("a") is None
