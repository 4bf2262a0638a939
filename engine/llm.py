"""Offline generation: ``LLM(model).generate(prompts, SamplingParams(...))``."""

from __future__ import annotations

from collections.abc import Sequence

from engine.config import EngineConfig
from engine.llm_engine import LLMEngine
from engine.outputs import CompletionOutput, TokenLogprobs
from engine.sampling_params import SamplingParams


class LLM:
    """Runs a batch of prompts to completion with continuous batching.

    ``LLM("tiny", max_num_seqs=8)`` takes the same knobs as ``EngineConfig``.
    """

    def __init__(self, model: str = "tiny", **knobs) -> None:
        self.engine = LLMEngine(EngineConfig(model=model, **knobs))

    @classmethod
    def from_config(cls, config: EngineConfig) -> LLM:
        llm = cls.__new__(cls)
        llm.engine = LLMEngine(config)
        return llm

    def generate(
        self,
        prompts: str | Sequence[str | Sequence[int]],
        sampling_params: SamplingParams | Sequence[SamplingParams] | None = None,
    ) -> list[CompletionOutput]:
        """Outputs in the order of ``prompts``. Bad input raises before anything is queued."""
        if isinstance(prompts, str):
            prompts = [prompts]
        if sampling_params is None or isinstance(sampling_params, SamplingParams):
            params_list = [sampling_params or SamplingParams()] * len(prompts)
        else:
            params_list = list(sampling_params)
            if len(params_list) != len(prompts):
                raise ValueError(
                    f"got {len(params_list)} SamplingParams for {len(prompts)} prompts; "
                    "pass one, or one per prompt"
                )
        engine = self.engine
        # validate every prompt before queueing any, so one bad prompt queues nothing
        token_lists = [
            engine.validate_request(p, sp) for p, sp in zip(prompts, params_list, strict=True)
        ]
        ids = [engine.add_request(t, sp) for t, sp in zip(token_lists, params_list, strict=True)]
        prompt_ids = dict(zip(ids, token_lists, strict=True))
        tokens: dict[str, list[int]] = {i: [] for i in ids}
        texts: dict[str, list[str]] = {i: [] for i in ids}
        logprobs: dict[str, list[TokenLogprobs]] = {i: [] for i in ids}
        results: dict[str, CompletionOutput] = {}
        while engine.has_unfinished_requests():
            for out in engine.step():
                tokens[out.request_id].extend(out.new_token_ids)
                texts[out.request_id].append(out.new_text)
                logprobs[out.request_id].extend(out.new_logprobs)
                if out.finished and out.timings is not None and out.finish_reason is not None:
                    results[out.request_id] = CompletionOutput(
                        request_id=out.request_id,
                        prompt_token_ids=tuple(prompt_ids[out.request_id]),
                        token_ids=tuple(tokens[out.request_id]),
                        text="".join(texts[out.request_id]),
                        finish_reason=out.finish_reason,
                        num_cached_tokens=out.num_cached_tokens,
                        num_preemptions=out.num_preemptions,
                        timings=out.timings,
                        logprobs=tuple(logprobs[out.request_id]),
                    )
        return [results[i] for i in ids]
