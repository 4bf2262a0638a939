"""Structured outputs (xgrammar): a grammar compile against a cached one, and a token mask.

What the compiled-grammar cache saves (issue 25): the first request with a schema pays its
compile, the next ones a lookup. Measured side by side in one run, on two vocabularies:

- the tiny preset's byte vocabulary (258 ids: 256 bytes and BOS/EOS);
- a byte-level BPE of 32,000 ids trained here on synthetic text (``tokenizers``, as Llama 3's
  and GPT-2's are byte-level BPE), read by xgrammar as a ``tokenizer.json`` is.

For each constraint: the compile (a cache miss: ``GrammarCache.get`` on a new cache, median
of ``REPEATS``), the cached lookup (a hit), their ratio, and filling one token mask
(``fill_next_token_bitmask``, mean over the steps of one valid output). Then the tiny
engine end to end: the TTFT of a request whose schema is new against the same request again,
its grammar cached.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable

from bench._driver import setup_torch
from bench._report import print_table
from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.model.tokenizer import ByteTokenizer, HFTokenizer, Tokenizer
from engine.sampling_params import SamplingParams
from engine.structured.cache import GrammarCache
from engine.structured.grammar import GrammarCompiler
from engine.structured.params import StructuredOutputsParams

REPEATS = 5
BPE_VOCAB = 32_000
CONSTRAINTS: dict[str, tuple[StructuredOutputsParams, str]] = {
    "small object": (
        StructuredOutputsParams(
            json={
                "type": "object",
                "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
                "required": ["name", "age"],
            }
        ),
        '{"name": "Ada Lovelace", "age": 36}',
    ),
    "nested arrays": (
        StructuredOutputsParams(
            json={
                "type": "object",
                "properties": {
                    "items": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "properties": {
                                "sku": {"type": "string", "pattern": "[A-Z]{3}-[0-9]{4}"},
                                "qty": {"type": "integer", "minimum": 1},
                                "tags": {"type": "array", "items": {"enum": ["new", "sale"]}},
                            },
                            "required": ["sku", "qty"],
                        },
                    },
                    "total": {"type": "number"},
                },
                "required": ["items"],
            }
        ),
        '{"items": [{"sku": "ABC-1234", "qty": 2, "tags": ["new"]}], "total": 19.5}',
    ),
    "regex (a date)": (
        StructuredOutputsParams(regex=r"(19|20)\d\d-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])"),
        "2026-01-31",
    ),
}


def _bpe_tokenizer() -> HFTokenizer:
    """A byte-level BPE of ``BPE_VOCAB`` ids trained on synthetic words and JSON punctuation."""
    import tokenizers
    from tokenizers import decoders, models, pre_tokenizers, trainers

    rng = random.Random(0)
    syllables = [a + b for a in "bcdfghjklmnprstvwz" for b in "aeiou"] + ["th", "ing", "ed"]
    words = ["".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(40_000)]
    punctuation = ['{"', '": ', '", "', "}", "[", "]", ", ", "123", "4.5", "true"]

    def lines():
        for _ in range(40_000):
            yield " ".join(rng.choices(words, k=10)) + rng.choice(punctuation)

    tokenizer = tokenizers.Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=BPE_VOCAB,
        special_tokens=["<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(lines(), trainer)
    return HFTokenizer(tokenizer, tokenizer.token_to_id("<s>"), (tokenizer.token_to_id("</s>"),))


def _median_seconds(action: Callable[[], object], repeats: int = REPEATS) -> float:
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        action()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _mask_seconds(compiled: object, tokenizer: Tokenizer, vocab_size: int, text: str) -> float:
    """Mean seconds to fill one token mask along ``text``'s tokens (then accepting each)."""
    import xgrammar

    matcher = xgrammar.GrammarMatcher(compiled)
    bitmask = xgrammar.allocate_token_bitmask(1, vocab_size)
    token_ids = tokenizer.encode(text, add_bos=False)
    started = time.perf_counter()
    for token_id in token_ids:
        matcher.fill_next_token_bitmask(bitmask, 0)
        if not matcher.accept_token(token_id):
            raise AssertionError(f"the example output {text!r} does not match its constraint")
    return (time.perf_counter() - started) / len(token_ids)


def _vocabulary_rows(name: str, tokenizer: Tokenizer, vocab_size: int) -> list[list[object]]:
    compiler = GrammarCompiler(tokenizer, vocab_size)
    rows = []
    for label, (constraint, example) in CONSTRAINTS.items():
        key = constraint.key
        compile_seconds = _median_seconds(
            lambda key=key: GrammarCache(compiler.compile).get(key)  # type: ignore[misc]
        )
        cache: GrammarCache[object] = GrammarCache(compiler.compile)
        compiled = cache.get(key).grammar
        hit_seconds = _median_seconds(
            lambda key=key, cache=cache: cache.get(key),  # type: ignore[misc]
            repeats=1000,
        )
        mask = _mask_seconds(compiled, tokenizer, vocab_size, example)
        rows.append(
            [
                name,
                label,
                f"{compile_seconds * 1000:.2f}",
                f"{hit_seconds * 1e6:.2f}",
                f"{compile_seconds / hit_seconds:,.0f}x",
                f"{mask * 1e6:.1f}",
            ]
        )
    return rows


def _engine_ttft() -> None:
    engine = LLMEngine(EngineConfig(model="tiny", max_model_len=256, num_gpu_blocks=64))
    constraint = CONSTRAINTS["nested arrays"][0]
    params = SamplingParams(max_tokens=1, temperature=0.0, structured_outputs=constraint)
    warm_up = SamplingParams(max_tokens=1, structured_outputs=CONSTRAINTS["regex (a date)"][0])
    engine.add_request("warm up", warm_up)
    while engine.has_unfinished_requests():  # NOTE: xgrammar imported and the model warm
        engine.step()
    ttfts = []
    for _ in range(2):
        engine.add_request("Order: ", params)
        while engine.has_unfinished_requests():
            for out in engine.step():
                if out.finished and out.timings is not None:
                    ttfts.append((out.timings.ttft_seconds, out.timings.grammar_compile))
    (cold, cold_compile), (warm, warm_compile) = ttfts
    print(
        f"\ntiny engine, one request at a time, the 'nested arrays' schema: TTFT "
        f"{cold * 1000:.2f} ms when it compiles ({cold_compile.compile_seconds * 1000:.2f} ms "
        f"compile), {warm * 1000:.2f} ms when cached (hit: {warm_compile.cache_hit})"
    )


def main() -> None:
    threads = setup_torch()
    started = time.perf_counter()
    bpe = _bpe_tokenizer()
    print(
        f"trained a byte-level BPE of {bpe.vocab_size:,} ids in {time.perf_counter() - started:.1f} s; "
        f"xgrammar compiles on 1 thread; {threads} torch thread(s)"
    )
    rows = _vocabulary_rows("byte (258)", ByteTokenizer(), ByteTokenizer().vocab_size)
    rows += _vocabulary_rows(f"BPE ({bpe.vocab_size:,})", bpe, bpe.vocab_size)
    print_table(
        (
            "vocabulary",
            "constraint",
            "compile ms (miss)",
            "cached lookup µs (hit)",
            "miss/hit",
            "mask µs per token",
        ),
        rows,
    )
    print(
        f"compile: a GrammarCache miss, median of {REPEATS} (the compiler's very first compile "
        "also pays its one-time setup); lookup: a hit, median of 1000"
    )
    _engine_ttft()
