"""Profile the real torch engine: time its steps over a grid of batch shapes.

Every step is the engine's own ``step()`` (schedule, forward, sample, outputs) timed on
the wall clock, because that whole cycle is what separates two tokens of a served
request; the batch it ran (each item's new tokens and context) is recorded by a thin
wrapper around the runner. The grid:

- prefill cells (new tokens ``q`` x context ``c``): one prompt of ``c`` tokens with the
  step budget (``max_num_batched_tokens``, a live knob) set to ``q``, so it runs as
  chunks of ``q`` new tokens at contexts ``q, 2q, ... c``; ``repeats`` times;
- decode cells (batch ``B`` x context ``c``): ``B`` prompts of ``c`` tokens, then
  ``decode_steps`` steps of ``B`` decodes at contexts ``c+1 ...``. Their prefill steps
  (chunks mixed with decodes, as in serving) are measured and fitted too.

Prompts are random byte ids, fresh each run, so no step is shortened by the prefix
cache. A warm-up (one chunk of every prefill size and a few decodes) runs first and is
not recorded.
"""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from engine.errors import ConfigError
from engine.llm_engine import LLMEngine
from engine.sampling_params import SamplingParams
from engine.sim.step_cost import BatchItem


@dataclass(frozen=True)
class Grid:
    prefill_tokens: tuple[int, ...] = (32, 128, 512)
    prefill_contexts: tuple[int, ...] = (512, 1536)
    decode_batches: tuple[int, ...] = (1, 8, 32)
    decode_contexts: tuple[int, ...] = (64, 512, 1024)
    decode_steps: int = 8
    repeats: int = 2
    warmup_steps: int = 4

    def __post_init__(self) -> None:
        for name in ("prefill_tokens", "prefill_contexts", "decode_batches", "decode_contexts"):
            values = getattr(self, name)
            if not values:
                raise ConfigError(f"{name}: give at least one size")
            bad = next((v for v in values if _not_positive(v)), None)
            if bad is not None:
                raise ConfigError(f"{name}={bad!r}: sizes must be positive integers")
        for name in ("decode_steps", "repeats"):
            if _not_positive(getattr(self, name)):
                raise ConfigError(f"{name}={getattr(self, name)!r}: must be a positive integer")
        if _not_positive(self.warmup_steps + 1):
            raise ConfigError(f"warmup_steps={self.warmup_steps!r}: must be >= 0")
        # NOTE: a chunk longer than a prompt is no chunk: such (q, c) pairs are skipped,
        # and a size longer than every prompt would measure nothing at all
        longest = max(self.prefill_contexts)
        unused = next((q for q in self.prefill_tokens if q > longest), None)
        if unused is not None:
            raise ConfigError(
                f"prefill_tokens={unused}: longer than every prefill context (at most "
                f"{longest}); a chunk cannot exceed its prompt"
            )

    def check_fits(self, config: Any, num_blocks: int) -> None:
        """Refuse cells the engine could not run as asked (too long, too many, no room)."""
        longest = max(max(self.prefill_contexts), max(self.decode_contexts) + self.decode_steps)
        if longest + 1 > config.max_model_len:
            raise ConfigError(
                f"the grid needs contexts of {longest + 1} tokens, more than "
                f"max_model_len={config.max_model_len}; lower the contexts or raise it"
            )
        if max(self.decode_batches) > config.max_num_seqs:
            raise ConfigError(
                f"decode_batches={max(self.decode_batches)}: more than "
                f"max_num_seqs={config.max_num_seqs}"
            )
        longest_decode = max(self.decode_contexts) + self.decode_steps + 1
        needed = max(self.decode_batches) * -(-longest_decode // config.block_size)
        if needed > num_blocks:
            raise ConfigError(
                f"decode cell {max(self.decode_batches)} x {max(self.decode_contexts)} needs "
                f"about {needed} KV blocks; the pool has {num_blocks} (it would preempt)"
            )

    def as_dict(self) -> dict[str, Any]:
        return {k: list(v) if isinstance(v, tuple) else v for k, v in self.__dict__.items()}


def _not_positive(value: Any) -> bool:
    return isinstance(value, bool) or not isinstance(value, int) or value < 1


@dataclass(frozen=True)
class StepRecord:
    """One measured step: its grid cell, what kind of step, its batch and its seconds."""

    cell: str
    kind: str  # "prefill", "decode" or "mixed"
    batch: tuple[BatchItem, ...]
    num_sampled: int
    seconds: float


class RecordingRunner:
    """The engine's runner, unchanged, that keeps the batch of the step it last ran."""

    def __init__(self, runner: Any) -> None:
        self.runner = runner
        self.last_batch: tuple[BatchItem, ...] = ()
        self.last_num_sampled = 0

    def execute(self, output: Any, histories: Any = None, grammar_bitmask: Any = None) -> Any:
        self.last_batch = tuple(
            BatchItem(i.num_new_tokens, i.num_computed_tokens + i.num_new_tokens)
            for i in output.scheduled
        )
        self.last_num_sampled = sum(1 for i in output.scheduled if i.samples_token)
        return self.runner.execute(output, histories, grammar_bitmask)

    def __getattr__(self, name: str) -> Any:  # NOTE: last_timing, device, dtype, ...
        return getattr(self.runner, name)


OnStep = Callable[[str, int], None]  # (cell label, steps recorded so far)


class Profiler:
    def __init__(
        self,
        engine: LLMEngine,
        seed: int = 0,
        on_step: OnStep | None = None,
        timer: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.engine = engine
        self.timer = timer
        self.recorder = RecordingRunner(engine.runner)
        engine.runner = self.recorder  # type: ignore[assignment]
        self.rng = random.Random(seed)
        self.records: list[StepRecord] = []
        self.on_step = on_step or (lambda cell, n: None)
        self._ids = 0
        base = engine.live_config
        self._budget = {
            "max_num_seqs": base.max_num_seqs,
            "max_num_batched_tokens": base.max_num_batched_tokens,
        }

    def _add(self, num_prompt_tokens: int, max_tokens: int) -> None:
        self._ids += 1
        prompt = [self.rng.randrange(256) for _ in range(num_prompt_tokens)]
        params = SamplingParams(max_tokens=max_tokens, temperature=0.0, ignore_eos=True)
        self.engine.add_request(prompt, params, request_id=f"calibrate-{self._ids}")

    def _run(self, cell: str | None) -> None:
        """Step until idle; record each step under ``cell`` (None: a warm-up)."""
        engine = self.engine
        while engine.has_unfinished_requests():
            started = self.timer()
            engine.step()
            seconds = self.timer() - started
            batch = self.recorder.last_batch
            if cell is None or not batch:
                continue
            decodes = sum(1 for q, _ in batch if q == 1)
            kind = "decode" if decodes == len(batch) else "prefill" if not decodes else "mixed"
            self.records.append(
                StepRecord(cell, kind, batch, self.recorder.last_num_sampled, seconds)
            )
            self.on_step(cell, len(self.records))

    def _set_budget(self, tokens: int | None) -> None:
        if tokens is None:
            self.engine.update_knobs(self._budget)
        else:
            seqs = min(tokens, self._budget["max_num_seqs"])
            self.engine.update_knobs({"max_num_seqs": seqs, "max_num_batched_tokens": tokens})

    def prefill(self, new_tokens: int, context: int, cell: str | None) -> None:
        self._set_budget(new_tokens)
        try:
            self._add(context, 1)
            self._run(cell)
        finally:
            self._set_budget(None)

    def decode(self, batch: int, context: int, steps: int, cell: str | None) -> None:
        for _ in range(batch):
            self._add(context, steps + 1)
        self._run(cell)

    def warm_up(self, grid: Grid) -> None:
        for q in sorted(set(grid.prefill_tokens)):
            self.prefill(q, q, None)
        if grid.warmup_steps:
            self.decode(max(grid.decode_batches), 16, grid.warmup_steps, None)

    def profile(self, grid: Grid) -> list[StepRecord]:
        self.warm_up(grid)
        for q in grid.prefill_tokens:
            for c in grid.prefill_contexts:
                if q > c:
                    continue
                for _ in range(grid.repeats):
                    self.prefill(q, c, f"prefill {q} x {c}")
        for b in grid.decode_batches:
            for c in grid.decode_contexts:
                self.decode(b, c, grid.decode_steps, f"decode {b} x {c}")
        return self.records


def estimated_steps(grid: Grid, max_num_batched_tokens: int) -> int:
    """About how many steps ``Profiler.profile`` records (for a progress bar)."""
    prefill = sum(
        -(-c // q) * grid.repeats
        for q in grid.prefill_tokens
        for c in grid.prefill_contexts
        if q <= c
    )
    decode = sum(
        -(-(b * c) // max_num_batched_tokens) + grid.decode_steps
        for b in grid.decode_batches
        for c in grid.decode_contexts
    )
    return prefill + decode


def cell_summary(records: Sequence[StepRecord], predict: Callable[[StepRecord], float]):
    """Per cell (and kind): steps, median measured and predicted seconds, relative error."""
    groups: dict[tuple[str, str], list[StepRecord]] = {}
    for record in records:
        kind = record.kind
        if record.cell.startswith("decode") and kind != "decode":
            kind = "mixed"  # NOTE: a decode cell's prefill phase, reported apart
        groups.setdefault((record.cell, kind), []).append(record)
    rows = []
    for (cell, kind), members in groups.items():
        measured = statistics.median(r.seconds for r in members)
        predicted = statistics.median(predict(r) for r in members)
        rows.append(
            {
                "cell": cell,
                "kind": kind,
                "steps": len(members),
                "measured_median_seconds": measured,
                "predicted_median_seconds": predicted,
                "relative_error": predicted / measured - 1.0,
            }
        )
    return rows
