"""LLMEngine: add_request, step, abort. Wiring only; policy lives in the scheduler."""

from __future__ import annotations

import dataclasses
import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from engine.config import (
    DEFAULT_CPU_KV_CACHE_MEMORY_BYTES,
    LIVE_KNOBS,
    EngineConfig,
    check_kv_pool_fits,
    device_kv_budget_bytes,
)
from engine.detokenizer import IncrementalDetokenizer
from engine.errors import ConfigError, EngineError, RequestError
from engine.kv_cache import KVCacheManager
from engine.lora.adapters import Adapters
from engine.lora.request import LoRARequest
from engine.lora.setup import build_adapters
from engine.lora.source import LoRASource
from engine.model.kv_cache_tensors import num_blocks_for_memory
from engine.model.loader import load_model
from engine.model.tokenizer import ByteLevelTokenizer
from engine.model_runner import ModelRunner, StepTiming
from engine.outputs import RequestOutput, RequestTimings, TokenLogprobs
from engine.request import GrammarCompile, Request, RequestStatus
from engine.sampling_params import SamplingParams
from engine.scheduler import Scheduler, SchedulerStats
from engine.sim.backend import SimBackend, build_sim_backend
from engine.sim.runner import SimRunner
from engine.sim.target import is_simulated
from engine.spec_decode.drafts import DraftProposer, NgramProposer, propose_drafts
from engine.spec_decode.stats import SpecDecodingStats
from engine.stop import check_stop
from engine.structured.backend import StructuredOutputBackend
from engine.structured.cache import GrammarCacheStats
from engine.structured.manager import StructuredOutputManager


@dataclass(frozen=True)
class KnobChange:
    """One live knob change: which knob, from what, to what, and when — on the engine's
    monotonic clock (``time``) and in epoch seconds (``wall_time``), both taken once."""

    knob: str
    old_value: Any
    new_value: Any
    time: float
    wall_time: float


@dataclass(frozen=True)
class StepStats:
    """What one step did: tokens computed (vLLM's iteration tokens) and where time went."""

    step_index: int
    num_prompt_tokens: int
    num_generation_tokens: int
    num_requests: int
    step_seconds: float
    timing: StepTiming
    # what speculation did this step (None: speculation is off)
    spec_decoding: SpecDecodingStats | None = None


def _are_bytes(token_ids: list[int]) -> bool:
    """True when every id (an int, checked before) is in [0, 256): ``bytes`` range-checks
    at C speed, faster than ``min`` and ``max`` (byte-level and simulated prompts)."""
    try:
        bytes(token_ids)
    except ValueError:  # NOTE: an id outside [0, 256): the caller's min/max check decides
        return False
    return True


class InjectedStepFault(EngineError):
    """The ``fail_next_steps`` drill: a step raising as a sampler or kernel bug would."""


class LLMEngine:
    def __init__(
        self,
        config: EngineConfig,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.clock = clock
        self.wall_clock = wall_clock
        # NOTE: ``sim:<model>@<gpu>`` swaps only the runner (and the shape, tokenizer and KV
        # pool size it implies); the scheduler, KV pool, outputs and metrics are the same.
        self.simulation: SimBackend | None = None
        if is_simulated(config.model):
            self.simulation = build_sim_backend(config, clock)
            model_config = self.simulation.model_config
            tokenizer = self.simulation.tokenizer
        else:
            model, model_config, tokenizer = load_model(
                config.model,
                device=config.device,
                dtype=config.dtype,
                quantization=config.quantization,
            )
        if config.max_model_len > model_config.max_position_embeddings:
            raise ConfigError(
                f"max_model_len={config.max_model_len}: model {config.model!r} supports at most "
                f"{model_config.max_position_embeddings} positions"
            )
        self.model_config = model_config
        self.tokenizer = tokenizer
        self._byte_level = isinstance(tokenizer, ByteLevelTokenizer)  # for detokenizers
        if self.simulation is not None:
            self.num_gpu_blocks = self.simulation.num_gpu_blocks
        else:
            self.num_gpu_blocks = _resolve_num_blocks(config, model)
        check_kv_pool_fits(config, self.num_gpu_blocks)
        kv_cache = KVCacheManager(
            self.num_gpu_blocks, config.block_size, config.enable_prefix_caching
        )
        self.scheduler = Scheduler(config, kv_cache, clock)
        # The knobs in force now; ``config`` stays as given (live changes replace this).
        self.live_config = config
        # The served adapters (None: LoRA off): the registry, the loaded copies, the loads.
        self.lora: Adapters | None = None
        lora_config = config.lora_config()
        if lora_config is not None:
            assert self.scheduler.lora_slots is not None
            self.lora = build_adapters(
                lora_config,
                self.scheduler.lora_slots,
                clock,
                model_config,
                model=None if self.simulation is not None else model,
                advance=None if self.simulation is None else self.simulation.runner.advance,
            )
        self.runner: ModelRunner | SimRunner
        if self.simulation is not None:
            self.runner = self.simulation.runner
            self.runner.lora = self.lora
        else:
            self.runner = ModelRunner(
                model,
                self.num_gpu_blocks,
                config.block_size,
                config.seed,
                lora=None if self.lora is None else self.lora.manager,
            )
        # NOTE: the simulator prices compiles and masks instead of running xgrammar, and
        # drafts the tokens it would sample (engine/sim/features.py)
        self.speculative_config = config.speculative_config
        self.structured_outputs: StructuredOutputBackend
        self.drafter: DraftProposer | None = None
        if self.simulation is not None:
            self.structured_outputs = self.simulation.structured_outputs
            if self.speculative_config is not None:
                self.drafter = self.simulation.drafter
        else:
            self.structured_outputs = StructuredOutputManager(tokenizer, model_config.vocab_size)
            if self.speculative_config is not None:
                self.drafter = NgramProposer(self.speculative_config)
        self._detokenizers: dict[str, IncrementalDetokenizer] = {}
        self._next_id = itertools.count()
        self.last_step = StepStats(0, 0, 0, 0, 0.0, StepTiming(0.0, 0.0, 0.0))
        # NOTE: the batch of the step running now: if the step raises, these are the
        # requests it may have left half updated, which the caller fails (see ``fail``).
        self.scheduled_request_ids: tuple[str, ...] = ()
        self.num_steps_to_fail = 0  # fault injection: that many steps raise after scheduling

    # -- live knobs ------------------------------------------------------------------------

    def knobs(self) -> dict[str, Any]:
        """The knobs in force, with the KV pool's total and usable block counts."""
        knobs = self.live_config.to_dict()
        knobs["num_gpu_blocks"] = self.num_gpu_blocks
        knobs["num_usable_gpu_blocks"] = self.scheduler.num_usable_blocks
        return knobs

    def update_knobs(self, changes: Mapping[str, Any]) -> list[KnobChange]:
        """Validate and apply live knob changes; all or nothing. Call between steps.

        ``num_usable_gpu_blocks`` shrinks or restores the KV pool as if another process
        took or returned device memory: blocks held by running requests are withheld
        only as those requests release them.
        """
        unknown = sorted(set(changes) - set(LIVE_KNOBS))
        if unknown:
            raise ConfigError(
                f"{', '.join(unknown)}: cannot be changed while running; live knobs are "
                f"{', '.join(LIVE_KNOBS)}"
            )
        before = self.knobs()
        config_changes = {k: v for k, v in changes.items() if k != "num_usable_gpu_blocks"}
        # NOTE: everything is validated before anything is applied: the whole new config
        # (and with it the new SchedulerLimits), then the pool size it must fit.
        new_config = dataclasses.replace(self.live_config, **config_changes)
        new_limits = new_config.scheduler_limits()
        usable = changes.get("num_usable_gpu_blocks", before["num_usable_gpu_blocks"])
        if isinstance(usable, bool) or not isinstance(usable, int) or usable < 1:
            raise ConfigError(f"num_usable_gpu_blocks={usable!r}: must be a positive integer")
        if usable > self.num_gpu_blocks:
            raise ConfigError(
                f"num_usable_gpu_blocks={usable}: the pool has only {self.num_gpu_blocks} blocks"
            )
        check_kv_pool_fits(new_config, usable)
        self.live_config = new_config
        self.scheduler.set_limits(new_limits)
        self.scheduler.set_prefix_caching(new_config.enable_prefix_caching)
        self.scheduler.set_num_usable_blocks(usable)
        now, wall_now = self.clock(), self.wall_clock()
        after = self.knobs()
        return [
            KnobChange(knob, before[knob], after[knob], now, wall_now)
            for knob in changes
            if before[knob] != after[knob]
        ]

    # -- requests --------------------------------------------------------------------------

    def add_request(
        self,
        prompt: str | Sequence[int],
        sampling_params: SamplingParams | None = None,
        *,
        request_id: str | None = None,
        priority: int = 0,
        cache_salt: str | None = None,
        arrival_time: float | None = None,
        arrival_wall_time: float | None = None,
        lora_request: LoRARequest | None = None,
    ) -> str:
        """Queue a request; raises ``RequestError`` (and changes nothing) for bad input.

        ``lora_request`` (from ``add_lora`` or ``resolve_lora``) runs it with that adapter;
        None runs the base model.

        ``arrival_time`` (engine clock) and ``arrival_wall_time`` (epoch seconds) default
        to now; a front end passes the moment the request reached it, so TTFT and queue
        time include any wait before the engine saw the request (as vLLM measures them).
        """
        params = sampling_params or SamplingParams()
        token_ids = self.validate_request(prompt, params)
        self._check_lora_request(lora_request)
        request_id = request_id if request_id is not None else f"req-{next(self._next_id)}"
        if request_id in self.scheduler.requests:
            raise RequestError(f"request_id {request_id!r} is already in the engine")
        request = Request(
            request_id=request_id,
            prompt_token_ids=token_ids,
            sampling_params=params,
            arrival_time=self.clock() if arrival_time is None else arrival_time,
            arrival_wall_time=self.wall_clock() if arrival_wall_time is None else arrival_wall_time,
            eos_token_ids=frozenset(self.tokenizer.eos_token_ids),
            priority=priority,
            cache_salt=cache_salt,
            lora_request=lora_request,
        )
        if params.structured_outputs is not None:
            # NOTE: compiled here, on the engine thread, before the request is queued: a
            # grammar that fails to compile queues nothing (vLLM compiles in a thread pool
            # while the request waits; see docs/engine.md)
            started = self.clock()
            lookup = self.structured_outputs.add(request_id, params)
            request.grammar_compile = GrammarCompile(
                started, params.structured_outputs.kind, lookup.cache_hit, lookup.compile_seconds
            )
        self.scheduler.add_request(request)
        self._detokenizers[request_id] = IncrementalDetokenizer(
            self.tokenizer, params.stop, params.min_tokens, byte_level=self._byte_level
        )
        return request_id

    def _check_lora_request(self, lora_request: LoRARequest | None) -> None:
        if lora_request is None:
            return
        if self.lora is None:
            raise RequestError(
                f"lora_request={lora_request.lora_name!r}: LoRA is off; start the engine "
                "with enable_lora"
            )
        if self.lora.resolve(lora_request.lora_name) != lora_request:
            raise RequestError(
                f"lora_request={lora_request.lora_name!r}: not a served adapter (add it with "
                "add_lora first, or it was unloaded)"
            )

    # -- LoRA adapters ---------------------------------------------------------------------

    def add_lora(self, name: str, source: LoRASource, *, replace: bool = False) -> LoRARequest:
        """Serve adapter ``source`` as ``name``, loaded now (vLLM's ``add_lora``); a
        ``ConfigError`` naming what is wrong with it (nothing changes then). ``replace``
        serves it in place of an adapter of that name. Call between steps."""
        if self.lora is None:
            raise ConfigError(f"lora_name={name!r}: LoRA is off; start the engine with enable_lora")
        return self.lora.add(name, source, reserved=(self.config.model,), replace=replace)

    def remove_lora(self, name: str) -> bool:
        """Stop serving adapter ``name``; False if it is not served."""
        return self.lora is not None and self.lora.remove(name)

    def resolve_lora(self, name: str) -> LoRARequest | None:
        """The served adapter called ``name``, or None."""
        return None if self.lora is None else self.lora.resolve(name)

    def validate_request(self, prompt: str | Sequence[int], params: SamplingParams) -> list[int]:
        """The prompt's token ids, or ``RequestError`` naming what is wrong with the request."""
        token_ids = self._tokenize(prompt)
        limit = self.config.max_model_len
        if len(token_ids) > limit:
            raise RequestError(
                f"prompt has {len(token_ids)} tokens, more than max_model_len={limit}"
            )
        if len(token_ids) + params.max_tokens > limit:
            raise RequestError(
                f"prompt ({len(token_ids)} tokens) plus max_tokens ({params.max_tokens}) is "
                f"{len(token_ids) + params.max_tokens}, more than max_model_len={limit}; "
                "shorten the prompt or lower max_tokens"
            )
        if self.simulation is not None and params.logprobs is not None:
            raise RequestError(
                f"logprobs={params.logprobs}: {self.config.model!r} is simulated and samples "
                "from no distribution; leave logprobs unset"
            )
        vocab = self.model_config.vocab_size
        bad = next((t for t, _ in params.logit_bias if t >= vocab), None)
        if bad is not None:
            raise RequestError(
                f"logit_bias={bad}: token id {bad} is outside the vocabulary [0, {vocab})"
            )
        if params.structured_outputs is not None:
            self.structured_outputs.check(params.structured_outputs)
        return token_ids

    def _tokenize(self, prompt: str | Sequence[int]) -> list[int]:
        if isinstance(prompt, str):
            if not prompt:
                raise RequestError("prompt is empty; send at least one character")
            try:
                return self.tokenizer.encode(prompt)
            except UnicodeEncodeError as error:  # a lone surrogate: no tokenizer takes it
                raise RequestError(
                    f"prompt: invalid Unicode ({error.reason}) at character {error.start}; "
                    "send valid UTF-8 text"
                ) from None
        token_ids = list(prompt)
        if not token_ids:
            raise RequestError("prompt is empty; send at least one token id")
        vocab = self.model_config.vocab_size
        # NOTE: C-speed check first (an offline run adds thousands of long prompts); the
        # scan below only runs to name the first bad id
        if {*map(type, token_ids)} <= {int, bool} and (
            (vocab >= 256 and _are_bytes(token_ids))
            or 0 <= min(token_ids) <= max(token_ids) < vocab
        ):
            return token_ids
        bad = next((t for t in token_ids if not isinstance(t, int) or not 0 <= t < vocab), None)
        if bad is not None:
            raise RequestError(f"prompt token id {bad!r} is outside the vocabulary [0, {vocab})")
        return token_ids

    def abort(self, request_ids: Sequence[str]) -> list[RequestOutput]:
        """Abort requests now (running or waiting); their KV blocks are freed at once."""
        requests = [self.scheduler.requests[r] for r in request_ids if r in self.scheduler.requests]
        self.scheduler.finish_requests(
            [r.request_id for r in requests], RequestStatus.FINISHED_ABORTED
        )
        return [self._output(r, (), finished=True) for r in requests]

    def fail(self, request_ids: Sequence[str]) -> list[RequestOutput]:
        """Abort requests a failed step left in an unknown state (freeing their KV blocks
        and scheduler state as ``abort`` does); their outputs carry no finish reason,
        which observers count as an engine error."""
        return [dataclasses.replace(out, finish_reason=None) for out in self.abort(request_ids)]

    def has_unfinished_requests(self) -> bool:
        return self.scheduler.has_unfinished_requests()

    def stats(self) -> SchedulerStats:
        return self.scheduler.stats()

    def grammar_cache_stats(self) -> GrammarCacheStats:
        """Cumulative compiled-grammar cache hits and misses (structured outputs)."""
        return self.structured_outputs.stats()

    # -- the loop --------------------------------------------------------------------------

    def step(self) -> list[RequestOutput]:
        started = time.perf_counter()
        self.scheduled_request_ids = ()
        output = self.scheduler.schedule()
        self.scheduled_request_ids = tuple(i.request_id for i in output.scheduled)
        if self.lora is not None:
            # NOTE: inside the step, as vLLM's worker loads adapters in execute_model: a
            # cold adapter delays every request of the step, not only its own
            self.lora.prepare(i.lora_request for i in output.scheduled)
        requests = self.scheduler.requests
        num_decode_tokens = sum(
            i.num_new_tokens
            for i in output.scheduled
            if i.draft_token_ids
            or (
                i.num_new_tokens == 1
                and i.num_computed_tokens >= requests[i.request_id].num_prompt_tokens
            )
        )
        grammar_bitmask = None
        if self.structured_outputs.num_requests:
            sampling = [i.request_id for i in output.scheduled if i.samples_token]
            grammar_bitmask = self.structured_outputs.bitmask(sampling)
        result = self.runner.execute(output, requests, grammar_bitmask)
        # NOTE: after execute, as a sampler error would be: the runner has already
        # forgotten this step's finished and preempted requests, so only the batch is
        # left half done.
        if self.num_steps_to_fail and output.scheduled:
            self.num_steps_to_fail -= 1
            raise InjectedStepFault("fail_next_steps: an injected step failure")
        finished: dict[RequestStatus, list[str]] = {}
        num_new: dict[str, int] = {}

        def on_token(request: Request) -> bool:
            """Detokenize and stop-check one new token; True if the request stops there."""
            request_id = request.request_id
            num_new[request_id] = num_new.get(request_id, 0) + 1
            token_id = request.output_token_ids[-1]
            # NOTE: the grammar first: a complete constraint ends the request with stop, as
            # the matcher's terminal state does in vLLM, whatever else this token reaches
            is_complete = self.structured_outputs.num_requests > 0 and (
                self.structured_outputs.accept(request_id, token_id)
            )
            stop_string = self._detokenizers[request_id].add_token(token_id)
            status = check_stop(request, self.config.max_model_len, stop_string)
            if is_complete:
                status = RequestStatus.FINISHED_STOPPED
            if status is None:
                return False
            finished.setdefault(status, []).append(request_id)
            return True

        updated = self.scheduler.update_from_output(
            output, result.sampled_token_ids, result.accepted_draft_token_ids, on_token
        )
        for status, ids in finished.items():
            self.scheduler.finish_requests(ids, status)
        if self.drafter is not None and self.speculative_config is not None:
            propose_drafts(
                self.drafter,
                updated,
                self.speculative_config.num_speculative_tokens,
                self.config.max_model_len,
                skip=self.structured_outputs.has,  # NOTE: a grammar decides each token
            )
        outputs = []
        for request in updated:
            count = num_new[request.request_id]
            outputs.append(
                self._output(
                    request,
                    request.output_token_ids[-count:],
                    request.is_finished,
                    result.logprobs.get(request.request_id, ())[:count],
                )
            )
        self.last_step = StepStats(
            step_index=self.last_step.step_index + 1,
            num_prompt_tokens=output.num_scheduled_tokens - num_decode_tokens,
            num_generation_tokens=sum(num_new.values()),
            num_requests=len(output.scheduled),
            step_seconds=time.perf_counter() - started,
            timing=self.runner.last_timing,
            spec_decoding=None
            if self.speculative_config is None
            else SpecDecodingStats.of_step(
                self.speculative_config.num_speculative_tokens,
                output.scheduled,
                result.accepted_draft_token_ids,
            ),
        )
        return outputs

    def _output(
        self,
        request: Request,
        new_ids: Sequence[int],
        finished: bool,
        new_logprobs: tuple[TokenLogprobs, ...] = (),
    ) -> RequestOutput:
        detokenizer = self._detokenizers[request.request_id]
        new_text = detokenizer.take_new_text(finished)
        if finished:
            del self._detokenizers[request.request_id]
            self.structured_outputs.forget(request.request_id)
        return RequestOutput(
            request_id=request.request_id,
            new_token_ids=tuple(new_ids),
            new_text=new_text,
            finished=finished,
            finish_reason=request.status.finish_reason,
            num_prompt_tokens=request.num_prompt_tokens,
            num_output_tokens=request.num_output_tokens,
            num_cached_tokens=max(request.num_cached_tokens, 0),
            num_preemptions=request.num_preemptions,
            arrival_time=request.arrival_time,
            token_time=request.token_times[-1] if new_ids else None,
            stop_reason=request.stop_reason,
            timings=RequestTimings.of(request) if finished else None,
            new_logprobs=new_logprobs,
            lora_name=None if request.lora_request is None else request.lora_request.lora_name,
        )


def _resolve_num_blocks(config: EngineConfig, model: torch.nn.Module) -> int:
    """KV blocks for this engine: fixed, from a byte budget, or from GPU memory left over."""
    if config.num_gpu_blocks is not None:
        return config.num_gpu_blocks
    param = next(model.parameters())
    budget = config.kv_cache_memory_bytes
    knob = "kv_cache_memory_bytes"
    if budget is None and param.device.type == "cuda":
        budget = _profile_cuda_kv_budget(config, param.device)
        knob = "gpu_memory_utilization"
    if budget is None:
        budget = DEFAULT_CPU_KV_CACHE_MEMORY_BYTES
    num_blocks = num_blocks_for_memory(model.config, budget, config.block_size, param.dtype)
    if num_blocks < 1:
        raise ConfigError(
            f"{knob}: leaves {budget} bytes for the KV cache, less than one block; raise it"
        )
    return num_blocks


def _profile_cuda_kv_budget(config: EngineConfig, device: torch.device) -> int:
    """Bytes left for KV blocks on CUDA: the allowed share of device memory, less weights
    and headroom (``device_kv_budget_bytes``, which the simulator sizes its pool with too)."""
    _free, total = torch.cuda.mem_get_info(device)
    torch.cuda.synchronize(device)
    used = torch.cuda.memory_allocated(device)
    return device_kv_budget_bytes(total, used, config.gpu_memory_utilization)
