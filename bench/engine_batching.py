"""Continuous vs static vs sequential batching (issue 2, benchmark 1).

Four ways of batching, with the same batch cap (``max_num_seqs``):

- continuous: a request joins the running batch at the first step after it arrives
  and leaves as soon as it finishes (the engine as shipped);
- static: arrived requests wait in the driver; up to the cap of them are admitted
  together only once the previous batch has completely finished, so a batch lasts as
  long as its longest member;
- static padded: static, but every member also keeps computing until the longest is
  done, as a padded static batch (HF ``generate`` on a fixed batch) does;
- sequential: static with a batch of one.

Two figures per mode, each measured so that it holds on any machine:

- capacity (output tokens/s): every request is queued at t=0, enough of them (sized from
  a decode step timed at the start) that no mode runs out of work within the window, so
  each mode's tokens/s is its capacity, not the offered load; the output says whether
  each mode still had a backlog at the end (it must, for the ratio to be a capacity
  ratio);
- goodput knee (req/s): the highest open-loop Poisson rate at which 90% of requests meet
  the SLO, bracketed and bisected from half the mode's measured capacity
  (``bench/_knee.py``).

NOTE: plain "static" is kinder than a padded implementation: on our engine a member
that finishes early leaves the forward pass, so the later steps of a batch cost less
instead of computing padding. The headline continuous/static ratio is taken against
it, so it understates continuous batching's edge over a classic static batcher; the
padded row shows by how much.

The capacity runs take turns of ``SLICE_SECONDS`` of engine time, each on its own
``EngineClock``, so load from other work on the machine falls on all of them alike.
"""

from __future__ import annotations

import math

from bench._driver import (
    EngineClock,
    OpenLoopRun,
    RunResult,
    make_engine,
    run_interleaved,
    setup_torch,
)
from bench._knee import describe_knee, goodput_knee, workload_at
from bench._report import Slo, ms, nearest_rank, print_table, verdict
from bench._saturation import decode_tokens_per_second_bound, num_never_started, queued_at_zero
from bench._workload import CHAT_MAX_MODEL_LEN, CHAT_WORKLOAD

BATCH_CAP = 32
WINDOW_SECONDS = 6.0
SLICE_SECONDS = 1.0
MAX_MODEL_LEN = CHAT_MAX_MODEL_LEN
BLOCK_SIZE = 16
# every running request can reach max_model_len: no preemption in any mode
ENGINE_KNOBS = {
    "max_model_len": MAX_MODEL_LEN,
    "num_gpu_blocks": BATCH_CAP * MAX_MODEL_LEN // BLOCK_SIZE,
    "block_size": BLOCK_SIZE,
}
# Interactive targets scaled to a CPU: first token within a second, then at least
# 20 tokens/s per request (faster than reading speed).
SLO = Slo(ttft_seconds=1.0, tpot_seconds=0.05)
# NOTE: each knee probe offers Poisson arrivals for KNEE_ARRIVAL_SECONDS, then allows
# KNEE_DRAIN_SECONDS for the requests to finish (the p99 output, ~450 tokens, takes ~15 s
# at the SLO's TPOT, so only rare requests are cut); engine time per probe is bounded by
# their sum whatever the rate.
KNEE_ARRIVAL_SECONDS = 8.0
KNEE_DRAIN_SECONDS = 8.0
KNEE_PROBES = 6
# (name, static batch size or None for continuous, pad finished members)
MODES = (
    ("continuous", None, False),
    ("static", BATCH_CAP, False),
    ("static padded", BATCH_CAP, True),
    ("sequential", 1, False),
)
TARGET_RATIO = 2.0


def main() -> None:
    threads = setup_torch()
    bound = decode_tokens_per_second_bound(BATCH_CAP, **ENGINE_KNOBS)
    workload = queued_at_zero(CHAT_WORKLOAD, bound, WINDOW_SECONDS)
    mean_output = sum(r.max_tokens for r in workload) / len(workload)
    print(
        f"tiny preset, CPU, {threads} torch thread(s); batch cap {BATCH_CAP} (max_num_seqs), "
        f"max_model_len {MAX_MODEL_LEN}; SLO: {SLO.describe()}"
    )
    print(
        f"capacity: a decode step at batch {BATCH_CAP} bounds output at {bound:.0f} tok/s here, "
        f"so {len(workload)} chat requests (mean {mean_output:.0f} output tokens, seed "
        f"{CHAT_WORKLOAD.seed}) are queued at t=0 for {WINDOW_SECONDS:g} s of engine time per "
        f"mode, modes interleaved in {SLICE_SECONDS:g} s turns"
    )
    capacity = _capacity(workload)
    knees = {}
    for mode, static_batch_size, pad in MODES:
        requests_per_second = capacity[mode].output_tokens_per_second / mean_output
        knees[mode] = goodput_knee(
            lambda rate, size=static_batch_size, pad=pad: _open_loop(rate, size, pad),
            SLO,
            start_rate=max(requests_per_second / 2, 0.05),
            max_probes=KNEE_PROBES,
        )
    rows = []
    for mode, result in capacity.items():
        finished = [r for r in result.records if r.finished_time is not None]
        tpots = [r.tpot_seconds for r in finished if r.tpot_seconds is not None]
        rows.append(
            (
                mode,
                f"{result.output_tokens_per_second:.0f}",
                describe_knee(knees[mode]),
                ms(nearest_rank(tpots, 50)),
                f"{result.mean_batch_size:.1f}",
                f"{len(finished)}",
                f"{num_never_started(result)}",
                f"{len(knees[mode].rows)}",
            )
        )
    print_table(
        (
            "mode",
            "capacity output tok/s",
            "goodput knee req/s",
            "TPOT p50 ms",
            "mean batch",
            "finished",
            "never started",
            "knee probes",
        ),
        rows,
    )
    unsaturated = [mode for mode, r in capacity.items() if num_never_started(r) == 0]
    if unsaturated:
        print(
            f"NOT saturated: {', '.join(unsaturated)} ran out of queued requests within the "
            "window, so their tok/s (and the ratios with them) are lower bounds"
        )
    else:
        print(
            "every mode still had requests never started at the end: the ratios compare capacities"
        )
    throughput = {mode: r.output_tokens_per_second for mode, r in capacity.items()}
    ratios = {mode: _ratio(throughput["continuous"], tok_s) for mode, tok_s in throughput.items()}
    print(
        f"capacity: continuous / static = {ratios['static']:.2f}x (target >= {TARGET_RATIO:g}x: "
        f"{verdict(ratios['static'], TARGET_RATIO)}); continuous / static padded = "
        f"{ratios['static padded']:.2f}x; continuous / sequential = {ratios['sequential']:.2f}x"
    )
    print(f"goodput knee: {_knee_ratios(knees)}")


def _capacity(workload) -> dict[str, RunResult]:
    runs = []
    for _mode, static_batch_size, pad in MODES:
        clock = EngineClock()
        engine = make_engine(clock, max_num_seqs=BATCH_CAP, **ENGINE_KNOBS)
        runs.append(
            OpenLoopRun(
                engine,
                workload,
                clock,
                static_batch_size=static_batch_size,
                pad_static_batches=pad,
                deadline_seconds=WINDOW_SECONDS,
            )
        )
    results = run_interleaved(runs, SLICE_SECONDS)
    return dict(zip((m[0] for m in MODES), results, strict=True))


def _open_loop(rate: float, static_batch_size: int | None, pad: bool) -> RunResult:
    """One knee probe: Poisson arrivals at ``rate``, then the drain allowance."""
    clock = EngineClock()
    engine = make_engine(clock, max_num_seqs=BATCH_CAP, **ENGINE_KNOBS)
    run = OpenLoopRun(
        engine,
        workload_at(CHAT_WORKLOAD, rate, KNEE_ARRIVAL_SECONDS),
        clock,
        static_batch_size=static_batch_size,
        pad_static_batches=pad,
        deadline_seconds=KNEE_ARRIVAL_SECONDS + KNEE_DRAIN_SECONDS,
    )
    run.advance()
    return run.result()


def _ratio(numerator: float, denominator: float) -> float:
    """``numerator / denominator``; NaN (printed "nan", a MISSED verdict) when a mode
    produced no token in the window."""
    return numerator / denominator if denominator else math.nan


def _knee_ratios(knees) -> str:
    """continuous's knee over each other mode's, where both were found."""
    base = knees["continuous"].knee_rate
    parts = []
    for mode, knee in knees.items():
        if mode == "continuous":
            continue
        if base is None or knee.knee_rate is None:
            parts.append(f"continuous / {mode}: no ratio (a knee was not found)")
        else:
            parts.append(f"continuous / {mode} = {base / knee.knee_rate:.2f}x")
    return "; ".join(parts)
