"""One simulated replica of the virtual fleet: the served engine's parts on a virtual clock.

A replica is what ``tailwatch engine serve --model sim:…`` runs, less the HTTP server and
the engine thread: the real ``LLMEngine`` (scheduler, KV pool, prefix cache, preemption)
with the simulated runner, the real ``EngineMetrics`` registry its ``/metrics`` renders,
the real ``Admission`` in front of it (``max_waiting_requests``: 429 with Retry-After), and
``/admin/config`` patches through ``engine.live_knobs`` (live knobs, admission limits and
the drill faults), so an ``admin:`` patch acts on it as on a served replica.

Time is the replica's own ``VirtualClock``: a step moves it by the step's predicted time
(``engine/sim``), then by the delay faults, as the serving loop sleeps them after a step.
A request arriving while a step runs waits for the step's end, as a real one waits for
the engine thread's next command window. :class:`loadgen.virtual.fleet.VirtualFleet`
decides which replica steps next, in global time order.

A replica started cold (``start_cold``: a scale-out, a restart) is not ready for its
``StartupTimes`` (``engine:`` keys ``model_load_seconds``, ``warm_up_seconds``); it takes
no step before then, and its start-up phases are on its ``/metrics`` once it is ready; for
``cold_seconds`` after that its steps take ``cold_step_factor`` times as long (a warm-up
that did not cover what the first requests pay for).
With LoRA on (``engine: {enable_lora: true, lora_modules: [name=random:rank=8, ...]}``)
a request's ``model`` selects an adapter, as on a served replica (an unknown one: 404).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from engine.admission import Admission, QueueFullError
from engine.config import EngineConfig
from engine.errors import ConfigError, RequestError
from engine.live_knobs import NOT_INFO_LABELS, apply_knob_changes, knobs_in_force
from engine.llm_engine import InjectedStepFault, KnobChange, LLMEngine
from engine.lora.request import LoRARequest
from engine.lora.source import LoRASource, parse_lora_module
from engine.metrics import OPENMETRICS_CONTENT_TYPE, EngineMetrics
from engine.outputs import RequestOutput
from engine.sampling_params import SamplingParams
from engine.sim.fast_path import FastPath
from engine.sim.offline import VIRTUAL_EPOCH
from engine.sim.runner import VirtualClock
from engine.sim.startup import STARTUP_KNOBS, StartupTimes
from engine.sim.target import is_simulated
from engine.structured.params import StructuredOutputsParams
from loadgen.errors import WorkloadError
from loadgen.workload import ScheduledRequest, schema_of

#: The simulated model a bundled model (``tiny``, a checkpoint path) maps to: a scenario
#: written for the bundled engine runs unchanged, with a GPU's step times.
DEFAULT_SIM_MODEL = "sim:llama-3.1-8b@h100"
#: ``engine:`` keys that are the server's, not ``EngineConfig``'s (``ServeOptions``).
SERVE_KNOBS = ("max_waiting_requests", "max_concurrency_per_tenant")
#: ``engine:`` keys of a replica beside its engine and admission: the adapters it serves
#: (``--lora-modules``) and its start-up phase times (``engine.sim.startup``).
REPLICA_KNOBS = ("lora_modules", *STARTUP_KNOBS)
#: Engine knobs a simulation ignores: they choose a device or a torch dtype.
_DEVICE_KNOBS = ("device", "dtype", "kv_cache_memory_bytes")
OPERATION = "text_completion"
#: The route a virtual request stands for (token ids in, a text completion out): its
#: responses count under the handler the server would give them.
VIRTUAL_HANDLER = "/v1/completions"


@dataclass(slots=True)
class VirtualHandle:
    """One admitted request as the front end would hold it: what the engine's observers
    read (``tenant``, ``trace_id``, ``params``, ``is_warm_up``) and what the fleet reports
    (the schedule's request, the replica)."""

    request: ScheduledRequest
    request_id: str
    params: SamplingParams
    trace_id: str
    arrival_seconds: float
    replica: int
    priority: int = 0
    is_warm_up: bool = False
    lora_request: LoRARequest | None = None

    @property
    def tenant(self) -> str | None:
        return self.request.tenant


@dataclass(frozen=True)
class Finished:
    """A request the replica finished (or failed), with its front end's handle."""

    handle: VirtualHandle
    output: RequestOutput


@dataclass(frozen=True)
class Refused:
    """A request the front end refused: ``status`` 429 (admission) or 400 (bad request)."""

    request: ScheduledRequest
    replica: int
    status: int
    reason: str
    retry_after_seconds: int | None = None


def engine_settings(
    knobs: Mapping[str, Any], model: str | None = None
) -> tuple[EngineConfig, dict[str, int | None]]:
    """(``EngineConfig``, admission limits) of a scenario's ``engine:`` mapping on the
    virtual fleet. A model that is not simulated becomes ``model`` (default
    :data:`DEFAULT_SIM_MODEL`); ``model`` given replaces any. ``WorkloadError`` naming the
    key for an unknown knob or a value the engine refuses."""
    allowed = {f.name for f in fields(EngineConfig)} | set(SERVE_KNOBS) | set(REPLICA_KNOBS)
    for key in knobs:
        if key not in allowed:
            raise WorkloadError(f"engine.{key}", f"is not an engine knob; known: {sorted(allowed)}")
    skipped = {*SERVE_KNOBS, *_DEVICE_KNOBS, *REPLICA_KNOBS}
    engine = {k: v for k, v in knobs.items() if k not in skipped}
    given = engine.get("model", "tiny")
    engine["model"] = model or (given if is_simulated(given) else DEFAULT_SIM_MODEL)
    limits = {k: knobs.get(k) for k in SERVE_KNOBS}
    try:
        config = EngineConfig(**engine)
    except ConfigError as error:
        raise WorkloadError("engine", str(error)) from None
    for knob, value in limits.items():
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int) or value < 1
        ):
            raise WorkloadError(f"engine.{knob}", f"must be a positive integer, got {value!r}")
    return config, limits


@dataclass(frozen=True)
class ReplicaExtras:
    """A replica's adapters and start-up times, from a scenario's ``engine:`` mapping."""

    lora_modules: tuple[tuple[str, LoRASource], ...] = ()
    startup: StartupTimes = StartupTimes()  # noqa: RUF009 (frozen: an immutable default)


def replica_extras(knobs: Mapping[str, Any]) -> ReplicaExtras:
    """The ``REPLICA_KNOBS`` of a scenario's ``engine:`` mapping; ``WorkloadError`` naming
    the key for a bad value."""
    modules = knobs.get("lora_modules", ())
    if isinstance(modules, str) or not isinstance(modules, list | tuple):
        raise WorkloadError("engine.lora_modules", "must be a list of name=path entries")
    try:
        parsed = tuple(parse_lora_module(m) for m in modules)
        startup = StartupTimes.of(dict(knobs))
    except ConfigError as error:
        raise WorkloadError("engine", str(error)) from None
    if parsed and not knobs.get("enable_lora"):
        raise WorkloadError("engine.lora_modules", "needs enable_lora: true")
    return ReplicaExtras(parsed, startup)


def stable_hex(text: str, num_bytes: int) -> str:
    """``num_bytes`` of a digest of ``text`` as lowercase hex: ids that a seed fixes."""
    return hashlib.blake2b(text.encode(), digest_size=num_bytes).hexdigest()


def instance_id(seed: int, index: int, generation: int = 0) -> str:
    """The engine instance id of replica ``index`` after ``generation`` restarts (0: as
    started), fixed by the seed, as ``tailwatch:engine_info`` and the spans carry it."""
    name = f"{seed}/{index}" if generation == 0 else f"{seed}/{index}/restart-{generation}"
    return f"virtual-{stable_hex(name, 8)}"


class VirtualReplica:
    """Replica ``index`` of a fleet (target ``replica-<index>``); see the module docstring.
    ``generation`` counts its restarts (:meth:`VirtualFleet.restart`)."""

    def __init__(
        self,
        index: int,
        config: EngineConfig,
        limits: Mapping[str, int | None],
        *,
        seed: int = 0,
        fast: bool = True,
        generation: int = 0,
        extras: ReplicaExtras | None = None,
    ) -> None:
        self.index = index
        self.target = f"replica-{index}"
        self.generation = generation
        self.instance_id = instance_id(seed, index, generation)
        self.seed = seed
        # NOTE: what a restart starts again from (the scenario's knobs, not the patched ones)
        self.initial_config, self.initial_limits = config, dict(limits)
        self.extras = extras = extras or ReplicaExtras()
        # when the replica is ready (virtual seconds): 0 until ``start_cold`` says otherwise
        self.ready_at = 0.0
        self.cold_until = 0.0  # until when its steps are slow (``StartupTimes.cold_seconds``)
        self._startup_pending = False
        self.is_fast = fast
        self.clock = VirtualClock()
        self.engine = LLMEngine(
            config, clock=self.clock, wall_clock=lambda: VIRTUAL_EPOCH + self.clock.now
        )
        self.model_name = config.model
        # the delay faults (engine.live_knobs.DelayFaults), as the serving loop holds them
        self.step_delay_seconds = 0.0
        self.prefill_seconds_per_token = 0.0
        #: virtual seconds spent in steps (their predicted time and the delay faults): what
        #: NVML's utilisation counts, a kernel running however little of the GPU it uses
        self.busy_seconds = 0.0
        observers: list[EngineMetrics] = []  # NOTE: admission keeps the list, not a copy
        self.admission = Admission(
            self.engine,
            observers,
            max_waiting_requests=limits.get("max_waiting_requests"),
            max_concurrency_per_tenant=limits.get("max_concurrency_per_tenant"),
        )
        # NOTE: as the server builds them: a fault counts down by itself and the simulator's
        # feature knobs are drill parameters, so neither labels vllm:cache_config_info
        knobs = {k: v for k, v in self.knobs().items() if k not in NOT_INFO_LABELS}
        spec = config.speculative_config
        self.metrics = EngineMetrics(
            self.model_name,
            knobs,
            max_model_len=config.max_model_len,
            instance_id=self.instance_id,
            num_speculative_tokens=None if spec is None else spec.num_speculative_tokens,
        )
        simulation = self.engine.simulation
        assert simulation is not None  # NOTE: engine_settings made the model a sim: one
        self.metrics.mark_simulated(simulation.target.gpu.name, config.tensor_parallel_size)
        for name, source in extras.lora_modules:
            try:
                self.engine.add_lora(name, source)
            except ConfigError as error:
                raise WorkloadError("engine.lora_modules", str(error)) from None
        if self.engine.lora is not None:
            self.metrics.enable_lora()
        observers.append(self.metrics)
        self.fast_path = FastPath(self.engine, emit_outputs=True) if fast else None
        self.handles: dict[str, VirtualHandle] = {}
        self._pending: list[VirtualHandle] = []
        self._params: dict[tuple[int, str, int | None], SamplingParams] = {}

    # -- start-up --------------------------------------------------------------------------

    def start_cold(self, at_seconds: float) -> None:
        """The replica's process starts at ``at_seconds``: it is ready ``StartupTimes``
        later (at once when both are 0) and takes no step before then."""
        startup = self.extras.startup
        self.clock.advance_to(at_seconds)
        self.ready_at = at_seconds + startup.ready_seconds
        self.cold_until = self.ready_at + startup.cold_seconds
        self.metrics.set_start_time(VIRTUAL_EPOCH + at_seconds)
        self._startup_pending = True
        if not startup.ready_seconds:
            self.mark_ready()

    def is_ready(self, at_seconds: float) -> bool:
        return at_seconds >= self.ready_at

    def mark_ready(self) -> None:
        """Publish the start-up phases (the fleet calls it at ``ready_at``)."""
        if not self._startup_pending:
            return
        self._startup_pending = False
        startup = self.extras.startup
        self.metrics.set_startup_phase("model_load", startup.model_load_seconds)
        self.metrics.set_startup_phase("warm_up", startup.warm_up_seconds)
        self.metrics.set_startup_phase("ready", startup.ready_seconds)

    # -- the front end ---------------------------------------------------------------------

    def knobs(self) -> dict[str, Any]:
        """What ``GET /admin/config`` would answer."""
        return knobs_in_force(self.engine, self, self.admission)

    def patch(self, changes: Mapping[str, Any]) -> list[KnobChange]:
        """``PATCH /admin/config``: validated all or nothing (``ConfigError`` naming the
        knob), applied before the next step, counted by the metrics as on a server."""
        applied = apply_knob_changes(self.engine, self, self.admission, changes)
        if self.fast_path is not None:
            self.fast_path.invalidate()  # NOTE: its plan assumed the old limits and pool
        self.metrics.on_knob_changes(applied)
        return applied

    def admit(self, request: ScheduledRequest, at_seconds: float) -> Refused | None:
        """Take one request arriving at ``at_seconds`` (virtual): validated as the server
        validates it (400), through admission control (429), then queued for the engine's
        next step. ``None`` when admitted."""
        params = self._params_of(request)
        lora_request = None
        if request.model is not None and request.model != self.model_name:
            lora_request = self.engine.resolve_lora(request.model)
            if lora_request is None:
                self.metrics.observe_http_response(404, VIRTUAL_HANDLER)
                return Refused(request, self.index, 404, f"model_not_found: {request.model}")
        try:
            self.engine.validate_request(list(request.prompt_token_ids), params)
        except RequestError as error:
            self.metrics.observe_http_response(400, VIRTUAL_HANDLER)
            return Refused(request, self.index, 400, str(error))
        try:
            self.admission.admit(
                request.tenant,
                num_waiting=len(self.engine.scheduler.waiting),
                num_pending_adds=len(self._pending),
            )
        except QueueFullError as error:
            self.metrics.observe_http_response(429, VIRTUAL_HANDLER)
            return Refused(request, self.index, 429, error.reason, error.retry_after_seconds)
        if not self.is_busy:
            self.clock.advance_to(at_seconds)  # NOTE: an idle engine starts on arrival
        request_id = f"req-{request.index}"
        trace_id = stable_hex(f"{self.seed}/trace/{request.index}", 16)
        handle = VirtualHandle(
            request,
            request_id,
            params,
            trace_id,
            at_seconds,
            self.index,
            request.priority or 0,
            lora_request=lora_request,
        )
        self._pending.append(handle)
        return None

    def _params_of(self, request: ScheduledRequest) -> SamplingParams:
        """The request's sampling parameters, as the HTTP client asks (``loadgen.client``):
        greedy, its length fixed, a JSON schema for a structured one; one object per kind."""
        key = (request.max_tokens, request.stream, request.schema)
        params = self._params.get(key)
        if params is None:
            structured = None
            if request.schema is not None:
                schema = schema_of(request.stream, request.schema)
                structured = StructuredOutputsParams(json=schema)
            params = self._params[key] = SamplingParams(
                max_tokens=request.max_tokens,
                temperature=0.0,
                ignore_eos=True,
                structured_outputs=structured,
            )
        return params

    # -- the engine loop -------------------------------------------------------------------

    def in_flight(self) -> list[VirtualHandle]:
        """Every request admitted and not finished (queued, running, or not yet added):
        what a restart loses."""
        return [*self.handles.values(), *self._pending]

    @property
    def is_busy(self) -> bool:
        return bool(self._pending) or self.engine.has_unfinished_requests()

    @property
    def next_step_seconds(self) -> float | None:
        """When this replica's next step starts (virtual seconds; not before it is ready);
        ``None`` when idle."""
        return max(self.clock.now, self.ready_at) if self.is_busy else None

    def step(self) -> list[Finished]:
        """Add the requests that arrived, take one engine step (``FastPath``: the same
        results as ``LLMEngine.step``), deliver its outputs to the metrics, spend the delay
        faults; the requests it finished or failed."""
        self.clock.advance_to(self.ready_at)  # NOTE: a cold replica's requests wait for it
        for handle in self._pending:
            self.engine.add_request(
                list(handle.request.prompt_token_ids),
                handle.params,
                request_id=handle.request_id,
                priority=handle.priority,
                cache_salt=handle.tenant,
                arrival_time=handle.arrival_seconds,
                arrival_wall_time=VIRTUAL_EPOCH + handle.arrival_seconds,
                lora_request=handle.lora_request,
            )
            self.handles[handle.request_id] = handle
        self._pending.clear()
        if not self.engine.has_unfinished_requests():
            return []
        begun = self.clock.now
        try:
            if self.fast_path is not None:
                outputs: Sequence[RequestOutput] = self.fast_path.step().outputs
            else:
                outputs = self.engine.step()
        except InjectedStepFault:
            # NOTE: as the serving loop contains it (engine.step_failures.fail_batch): the
            # batch is failed, observers see it finish with no reason, the engine goes on
            if self.fast_path is not None:
                self.fast_path.invalidate()
            outputs = self.engine.fail(self.engine.scheduled_request_ids)
        self.metrics.on_step(self.engine, outputs, self.handles)
        finished = []
        for out in outputs:
            if not out.finished:
                continue
            handle = self.handles.pop(out.request_id)
            self.admission.release(handle.tenant)
            self.metrics.observe_http_response(200 if out.finish_reason else 500, VIRTUAL_HANDLER)
            finished.append(Finished(handle, out))
        delay = self.step_delay_seconds
        if self.prefill_seconds_per_token and self.engine.last_step.num_prompt_tokens:
            delay += self.prefill_seconds_per_token * self.engine.last_step.num_prompt_tokens
        if begun < self.cold_until:
            delay += (self.extras.startup.cold_step_factor - 1) * (self.clock.now - begun)
        self.clock.advance(delay)
        self.busy_seconds += self.clock.now - begun
        return finished

    def exposition(self) -> tuple[str, str]:
        """``GET /metrics`` with a scraper's ``Accept`` (OpenMetrics, exemplars included):
        the body and its content type."""
        body, content_type = self.metrics.render(OPENMETRICS_CONTENT_TYPE)
        return body.decode("utf-8"), content_type
