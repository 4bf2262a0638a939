"""``SimRunner``: ``ModelRunner``'s contract with a predicted step time instead of a forward.

It takes the scheduler's ``SchedulerOutput`` as the torch runner does, prices the batch
with ``StepCostModel``, spends that time (``advance``: ``time.sleep`` when serving, a
``VirtualClock`` offline) and returns a sampled token per request that completes its
known tokens. Tokens are pseudo-random printable bytes, a pure function of (seed,
request id, position): the same run gives the same text, and a request preempted and
recomputed draws the same tokens again, as a seeded torch request does.

With LoRA (``lora``: the engine's ``Adapters``), each adapter in a step adds its shrink and
expand matmuls over its own tokens to the roofline, its weights read once, and two kernel
launches per adapted projection per layer (``LORA_LAUNCH_SECONDS``); its tokens are drawn
under a key that includes the adapter, so an adapter changes the text, as a real one does.

A request verifying drafts (speculative decoding) is priced for all its tokens and sampled
rows; it keeps each draft that is the token the simulator would sample there, with the
acceptance rate of ``engine.sim.features`` given the drafts before it were kept. A
structured request that samples adds its token mask's cost to the step.
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.lora.shapes import FUSED_GROUPS, AdapterShape, lora_flops_and_bytes
from engine.model_runner import RunnerOutput, StepTiming
from engine.scheduler import SchedulerOutput
from engine.sim.step_cost import BatchItem, BatchTotals, ExtraWork, StepCost, StepCostModel
from engine.sim.step_noise import NoiseDraws, StepNoise

if TYPE_CHECKING:
    from engine.lora.adapters import Adapters

# Sampled ids are the printable ASCII bytes, so served text is readable junk and the
# byte tokenizer's EOS is never drawn: a request runs to max_tokens or a stop string.
FIRST_PRINTABLE, NUM_PRINTABLE = 32, 95
_GOLDEN = 0x9E3779B97F4A7C15
_MASK = (1 << 64) - 1
# NOTE: from this many tokens on, one numpy pass over uint64 arrays (whose arithmetic wraps
# mod 2**64 exactly as the masks below do) is cheaper than the Python loop
_VECTOR_MIN_TOKENS = 32
_U30, _U27, _U31 = np.uint64(30), np.uint64(27), np.uint64(31)
_MUL1, _MUL2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)
# NOTE: no datasheet figure: a punica-style LoRA kernel pair (shrink, expand) per adapted
# fused projection per layer costs a launch each, a few microseconds, on top of its FLOPs
# and bytes; calibration against a LoRA run would refit it.
LORA_LAUNCH_SECONDS = 4e-6


def uniform(key: int, salt: int, position: int) -> float:
    """A number in [0, 1), a pure function of its arguments (splitmix64, as the tokens are
    drawn): the same run accepts the same drafts."""
    z = ((key ^ salt) + (position + 1) * _GOLDEN) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return ((z ^ (z >> 31)) >> 11) / float(1 << 53)


class VirtualClock:
    """A monotonic clock that only moves when told to: the engine's clock offline."""

    def __init__(self, start: float = 0.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        if seconds > 0:
            self.now += seconds

    def advance_to(self, time_seconds: float) -> None:
        if time_seconds > self.now:
            self.now = time_seconds


def pseudo_random_token(request_key: int, position: int) -> int:
    """A printable byte id from a request's key and a token position (splitmix64)."""
    return pseudo_random_tokens(request_key, position, 1)[0]


def pseudo_random_tokens(request_key: int, first_position: int, count: int) -> list[int]:
    """``pseudo_random_token`` at ``count`` positions from ``first_position`` on, in one
    pass (the offline fast path draws a run of a request's tokens at a time)."""
    if count >= _VECTOR_MIN_TOKENS:
        return _pseudo_random_tokens_vector(request_key, first_position, count)
    # NOTE: the splitmix64 state advances by _GOLDEN per position; masking the running sum
    # gives the same state as masking (key + (position + 1) * _GOLDEN) afresh
    mask, golden, first, num = _MASK, _GOLDEN, FIRST_PRINTABLE, NUM_PRINTABLE
    state = request_key + first_position * golden
    tokens = []
    append = tokens.append
    for _ in range(count):
        state += golden
        z = state & mask
        z ^= z >> 30
        z = (z * 0xBF58476D1CE4E5B9) & mask
        z ^= z >> 27
        z = (z * 0x94D049BB133111EB) & mask
        append(first + (z ^ (z >> 31)) % num)
    return tokens


def _pseudo_random_tokens_vector(request_key: int, first_position: int, count: int) -> list[int]:
    """The loop above on uint64 arrays: the same ids (every product and sum wraps mod
    2**64 in numpy as the masks make it wrap in Python)."""
    base = np.uint64((request_key + first_position * _GOLDEN) & _MASK)
    z = np.arange(1, count + 1, dtype=np.uint64)
    z *= np.uint64(_GOLDEN)
    z += base
    z ^= z >> _U30
    z *= _MUL1
    z ^= z >> _U27
    z *= _MUL2
    z ^= z >> _U31
    z %= np.uint64(NUM_PRINTABLE)
    z += np.uint64(FIRST_PRINTABLE)
    return z.tolist()


# NOTE: mixed into a request's key for its acceptance draws, so they are not its tokens' draws
_ACCEPT_SALT = 0x5DEECE66D


class SimRunner:
    def __init__(
        self,
        cost_model: StepCostModel,
        seed: int = 0,
        advance: Callable[[float], None] = time.sleep,
        noise: StepNoise | None = None,
        features: Any = None,
    ) -> None:
        self.cost_model = cost_model
        # NOTE: engine.sim.features.SimFeatures (imported there, not here: it imports this)
        self.features = features
        # NOTE: a calibration's step-to-step noise (engine.sim.step_noise); None: exact
        self.noise = None if noise is None else NoiseDraws(noise, seed)
        self.seed = seed
        self.advance = advance
        self._request_keys: dict[str, int] = {}
        self.last_timing = StepTiming(0.0, 0.0, 0.0)
        self.last_cost = StepCost(0.0, 0.0, 0.0, 0.0, 0.0)
        # the engine's adapters, set by the engine when LoRA is on (their loaded shapes)
        self.lora: Adapters | None = None

    def request_key(self, request_id: str, seed: int | None, lora_int_id: int | None = None) -> int:
        """The key a request's tokens are drawn with (``pseudo_random_token``); kept until
        ``forget``."""
        key = self._request_keys.get(request_id)
        if key is None:
            text = f"{self.seed if seed is None else seed}:{request_id}"
            if lora_int_id is not None:
                text += f":lora{lora_int_id}"
            key = self._request_keys[request_id] = zlib.crc32(text.encode()) * _GOLDEN & _MASK
        return key

    def execute(
        self,
        output: SchedulerOutput,
        histories: Mapping[str, Any] | None = None,
        grammar_bitmask: Any = None,
    ) -> RunnerOutput:
        """Price and spend one step; ``histories`` and ``grammar_bitmask`` are accepted for
        the runner contract (penalties and masks change no sampled id here)."""
        started = time.perf_counter()
        self.forget(output.finished_request_ids)
        if output.is_empty:
            return RunnerOutput([])
        batch = []
        sampled: list[int | None] = []
        accepted: dict[str, tuple[int, ...]] = {}
        num_sampled = num_masked = 0
        lora_tokens: dict[int, int] = {}  # adapter id → its tokens this step
        for item in output.scheduled:
            end = item.num_computed_tokens + item.num_new_tokens
            batch.append(BatchItem(item.num_new_tokens, end))
            lora_id = None if item.lora_request is None else item.lora_request.lora_int_id
            if lora_id is not None:
                lora_tokens[lora_id] = lora_tokens.get(lora_id, 0) + item.num_new_tokens
            if not item.samples_token:
                sampled.append(None)
                continue
            key = self.request_key(item.request_id, item.sampling_params.seed, lora_id)
            drafts = item.draft_token_ids
            num_sampled += 1 + len(drafts)
            num_masked += item.sampling_params.structured_outputs is not None
            if drafts:
                first = end - len(drafts)  # the position of the first draft
                kept = drafts[: self._num_accepted(key, first, drafts)]
                accepted[item.request_id] = kept
                sampled.append(pseudo_random_token(key, first + len(kept)))
            else:
                sampled.append(pseudo_random_token(key, end))
        mask_seconds = 0.0
        if num_masked and self.features is not None:
            mask_seconds = num_masked * self.features.knobs.structured_output_mask_seconds
        extra = self.lora_work(lora_tokens) if lora_tokens else None
        self._spend(self.cost_model.cost(batch, num_sampled, extra), started, mask_seconds)
        return RunnerOutput(sampled, accepted_draft_token_ids=accepted)

    def _num_accepted(self, key: int, first: int, drafts: tuple[int, ...]) -> int:
        """How many leading drafts the step keeps: each must be the token drawn there and
        pass its acceptance draw."""
        rate = self.features.knobs.spec_decode_acceptance_rate if self.features else 0.0
        tokens = pseudo_random_tokens(key, first, len(drafts))
        for i, (draft, token) in enumerate(zip(drafts, tokens, strict=True)):
            if draft != token or uniform(key, _ACCEPT_SALT, first + i) >= rate:
                return i
        return len(drafts)

    def lora_work(self, tokens_by_adapter: Mapping[int, int]) -> ExtraWork:
        """The LoRA work of a step whose adapters (by id, loaded) compute these tokens."""
        assert self.lora is not None
        model = self.cost_model
        flops = num_bytes = 0.0
        num_launches = 0
        for lora_id, num_tokens in tokens_by_adapter.items():
            shape: AdapterShape = self.lora.manager.get(lora_id)
            more_flops, more_bytes = lora_flops_and_bytes(
                model.shape, shape, num_tokens, model.dtype_bytes
            )
            flops += more_flops
            num_bytes += more_bytes
            groups = sum(
                1 for members in FUSED_GROUPS.values() if set(members) & set(shape.target_modules)
            )
            num_launches += 2 * groups * model.shape.num_hidden_layers
        tp = model.tensor_parallel_size
        return ExtraWork(flops / tp, num_bytes / tp, num_launches * LORA_LAUNCH_SECONDS)

    def forget(self, request_ids: Iterable[str]) -> None:
        """Drop the keys of finished or aborted requests."""
        for request_id in request_ids:
            self._request_keys.pop(request_id, None)

    def spend(self, batch: Sequence[BatchItem], num_sampled: int, started: float) -> StepCost:
        """Price one step's batch and spend its time; ``started`` is the ``perf_counter``
        reading the step's preparation began at."""
        return self._spend(self.cost_model.cost(batch, num_sampled), started)

    def spend_totals(self, totals: BatchTotals, num_sampled: int, started: float) -> StepCost:
        """``spend`` from the batch's sums (``BatchTotals``): the offline fast path's
        pricing (``engine.sim.fast_path``), the same floats as ``spend`` on the batch."""
        return self._spend(self.cost_model.cost_of_totals(totals, num_sampled), started)

    def _spend(self, cost: StepCost, started: float, extra_seconds: float = 0.0) -> StepCost:
        """Spend a priced step's time (both ``spend`` and ``spend_totals`` end here), with
        the step noise's next factor when there is one: one draw a step on either path;
        ``extra_seconds`` (token masks) are added after the noise."""
        if self.noise is not None:
            cost = cost._replace(step_seconds=cost.step_seconds * self.noise.next_factor())
        if extra_seconds:
            cost = cost._replace(step_seconds=cost.step_seconds + extra_seconds)
        prepared = time.perf_counter()
        self.advance(cost.step_seconds)
        self.last_cost = cost
        self.last_timing = StepTiming(prepared - started, cost.step_seconds, 0.0)
        return cost
