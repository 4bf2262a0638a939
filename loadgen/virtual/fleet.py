"""N simulated replicas on one virtual clock behind the load generator's router.

The fleet is a discrete-event simulation in global virtual seconds. Its events are
arrivals (routed by ``loadgen.routing.Router`` as the HTTP runner routes them, admitted by
the replica's front end), replica steps (each replica steps whenever it has work, at its
own clock: the end of its last step) and completions (which the router's
``least-outstanding`` policy sees when they happen, not when their step was computed).
:meth:`VirtualFleet.advance_to` processes every event before a time, in time order (ties:
completions, then arrivals, then steps, then by replica index), so a caller interleaves its
own events (phase changes, scrapes, evaluations) at exact virtual times. Nothing here
reads a wall clock or draws an unseeded random number: a seed fixes every result.

NOTE: a step is computed when it starts (the engine's step is atomic), so a scrape at ``t``
sees the steps that started before ``t``, a few milliseconds of which may end after it, as
a real scrape sees what the engine thread last published.

Readiness gates routing, as a Kubernetes Service routes only to ready pods: a replica that
``set_active`` adds (a scale-out) or ``restart`` replaces starts cold
(``VirtualReplica.start_cold``) and gets traffic once it is ready, a further event of the
loop. While no active replica is ready (a scale from zero) requests go to the active ones
and wait there, as a gateway that holds requests for a starting backend does.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace

from engine.outputs import RequestOutput
from loadgen.record import RequestResult
from loadgen.routing import Router
from loadgen.virtual.gateway import VirtualGateway
from loadgen.virtual.replica import Finished, Refused, VirtualHandle, VirtualReplica
from loadgen.workload import ScheduledRequest


@dataclass
class FleetLog:
    """What the fleet did since the caller last took it (:meth:`VirtualFleet.take_log`):
    the requests finished (with their outputs, for request records) and refused."""

    finished: list[Finished] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)


def client_result(done: Finished) -> RequestResult:
    """The client's view of a finished request on loopback: TTFT, e2e and the gaps between
    its tokens from the engine's own times (no network), ``status`` 200 or 500."""
    request, out = done.handle.request, done.output
    t = out.timings
    arrival = done.handle.arrival_seconds
    ttft = e2e = None
    gaps: list[float] = []
    if t is not None:
        ttft = None if t.first_token_time is None else t.first_token_time - arrival
        e2e = None if t.finished_time is None else t.finished_time - arrival
        times = t.token_times
        gaps = [b - a for a, b in itertools.pairwise(times)]
    ok = out.finish_reason is not None and out.finish_reason != "abort"
    return RequestResult(
        index=request.index,
        scheduled_seconds=request.at_seconds,
        sent_seconds=request.at_seconds,
        ttft_seconds=ttft,
        e2e_seconds=e2e,
        itl_seconds=gaps,
        prompt_tokens=out.num_prompt_tokens,
        output_tokens=out.num_output_tokens,
        status=200 if ok else 500,
        error="" if ok else "engine_error",
        replica=f"replica-{done.handle.replica}",
        tenant=request.tenant,
        priority=request.priority,
        stream=request.stream,
        response_id=out.request_id,
        finish_reason=out.finish_reason or "",
    )


def refused_result(refused: Refused) -> RequestResult:
    request = refused.request
    return RequestResult(
        index=request.index,
        scheduled_seconds=request.at_seconds,
        sent_seconds=request.at_seconds,
        status=refused.status,
        error=refused.reason,
        replica=f"replica-{refused.replica}",
        tenant=request.tenant,
        priority=request.priority,
        stream=request.stream,
        retry_after_seconds=refused.retry_after_seconds,
    )


#: The client's error for a request its replica lost by restarting (the stream broke).
RESTART_ERROR = "replica_restarted"


def lost_result(handle: VirtualHandle, at_seconds: float) -> RequestResult:
    """The client's view of a request whose replica restarted under it at ``at_seconds``:
    no complete response (status 0), an error, the time it waited for nothing."""
    request = handle.request
    return RequestResult(
        index=request.index,
        scheduled_seconds=request.at_seconds,
        sent_seconds=request.at_seconds,
        e2e_seconds=at_seconds - handle.arrival_seconds,
        status=0,
        error=RESTART_ERROR,
        replica=f"replica-{handle.replica}",
        tenant=request.tenant,
        priority=request.priority,
        stream=request.stream,
    )


class VirtualFleet:
    """``replicas`` behind a router of ``routing`` (``loadgen.routing.POLICIES``)."""

    def __init__(self, replicas: Sequence[VirtualReplica], routing: str = "round-robin") -> None:
        self.replicas = list(replicas)
        self.router = Router([r.target for r in self.replicas], routing)
        # the replicas the scenario routes to; the router gets those of them that are ready
        self._wanted: tuple[int, ...] = tuple(range(len(self.replicas)))
        self.now = 0.0
        self._arrivals: list[ScheduledRequest] = []
        self._next_arrival = 0
        self._completions: list[tuple[float, int, int]] = []  # (time, seq, replica)
        self._seq = 0
        self._log = FleetLog()
        self.results: list[RequestResult] = []
        self.num_steps = 0
        #: the gateway in front of the replicas, if the scenario has one: it delays the
        #: first tokens the clients see (``loadgen.virtual.gateway``)
        self.gateway: VirtualGateway | None = None

    # -- what the caller changes -----------------------------------------------------------

    def add_arrivals(self, requests: Iterable[ScheduledRequest]) -> None:
        """Schedule more arrivals (any order; none before :attr:`now`)."""
        pending = self._arrivals[self._next_arrival :]
        merged = sorted([*pending, *requests], key=lambda r: (r.at_seconds, r.index))
        if merged and merged[0].at_seconds < self.now:
            raise ValueError(f"an arrival at {merged[0].at_seconds} s is before now ({self.now} s)")
        self._arrivals, self._next_arrival = merged, 0

    def set_active(self, replicas: Sequence[int] | None) -> None:
        """Route only to these replicas from now on (``None``: all); one not active before
        starts cold now (a scale-out), ready after its start-up times."""
        chosen = tuple(range(len(self.replicas)) if replicas is None else replicas)
        for index in chosen:
            if index not in self._wanted:
                self.replicas[index].start_cold(self.now)
        self._wanted = chosen
        self._route()

    def _route(self) -> None:
        """Give the router the wanted replicas that are ready (all wanted, if none is)."""
        ready = [i for i in self._wanted if self.replicas[i].is_ready(self.now)]
        self.router.set_active(ready or list(self._wanted))

    def _next_ready(self) -> float:
        """When the next replica not yet ready becomes ready (``inf``: none is starting)."""
        return min((r.ready_at for r in self.replicas if r.ready_at > self.now), default=math.inf)

    def restart(self, index: int) -> VirtualReplica:
        """Replace replica ``index`` by a fresh engine at :attr:`now`: the scenario's knobs
        (no patch survives), counters at zero, a cold prefix cache and the next instance
        id. Every request it held (queued or running) is lost, as a killed process loses
        them: the client records an error. Returns the new replica (the collector must
        scrape it instead). NOTE: a request whose last step was computed before ``now``
        but ends after it is already finished (a step is computed when it starts)."""
        old = self.replicas[index]
        new = VirtualReplica(
            index,
            old.initial_config,
            old.initial_limits,
            seed=old.seed,
            fast=old.is_fast,
            generation=old.generation + 1,
            extras=old.extras,
        )
        new.start_cold(self.now)
        for handle in old.in_flight():
            self.router.finished(index)
            self.results.append(lost_result(handle, self.now))
        self.replicas[index] = new
        self._route()
        return new

    def take_log(self) -> FleetLog:
        """What finished and was refused since the last call."""
        log, self._log = self._log, FleetLog()
        return log

    # -- running ---------------------------------------------------------------------------

    def advance_to(self, until_seconds: float) -> None:
        """Process every completion, arrival and step that happens before ``until_seconds``
        (virtual seconds); :attr:`now` is then ``until_seconds``."""
        while True:
            completion = self._completions[0][0] if self._completions else math.inf
            arrival = (
                self._arrivals[self._next_arrival].at_seconds
                if self._next_arrival < len(self._arrivals)
                else math.inf
            )
            replica, step = self._next_step()
            ready = self._next_ready()
            first = min(completion, arrival, step, ready)
            if first >= until_seconds:
                break
            if ready == first:  # NOTE: before an arrival at the same time, which it may take
                self.now = ready
                for starting in self.replicas:
                    if starting.is_ready(ready):
                        starting.mark_ready()
                self._route()
            elif completion == first:
                _, _, index = heapq.heappop(self._completions)
                self.router.finished(index)
            elif arrival == first:
                self._arrive(self._arrivals[self._next_arrival])
                self._next_arrival += 1
            else:
                assert replica is not None
                self._step(replica)
        self.now = max(self.now, until_seconds)

    def run_until_idle(self, limit_seconds: float) -> None:
        """Advance until every arrival is served and every replica idle (the stragglers
        of a run's last phase), or ``limit_seconds``."""
        while self.now < limit_seconds:
            _, step = self._next_step()
            if step == math.inf and self._next_arrival >= len(self._arrivals):
                break
            self.advance_to(min(limit_seconds, max(step, self.now) + 1.0))

    def _next_step(self) -> tuple[VirtualReplica | None, float]:
        chosen, at = None, math.inf
        for replica in self.replicas:
            t = replica.next_step_seconds
            if t is not None and t < at:
                chosen, at = replica, t
        return chosen, at

    def _arrive(self, request: ScheduledRequest) -> None:
        index = self.router.pick(request)
        self.router.started(index)
        refused = self.replicas[index].admit(request, request.at_seconds)
        if refused is not None:
            self.router.finished(index)
            self._log.refused.append(refused)
            self.results.append(refused_result(refused))

    def _step(self, replica: VirtualReplica) -> None:
        self.num_steps += 1
        for done in replica.step():
            self._log.finished.append(done)
            self.results.append(self._through_gateway(client_result(done), replica))
            self._seq += 1
            heapq.heappush(self._completions, (_finished_at(done.output), self._seq, replica.index))

    def _through_gateway(self, result: RequestResult, replica: VirtualReplica) -> RequestResult:
        """``result`` as the client behind the gateway sees it: first token and end later
        by the gateway's delay (no gateway, or no first token: unchanged)."""
        if self.gateway is None or result.ttft_seconds is None:
            return result
        delay = self.gateway.delay_seconds
        ttft = self.gateway.observe(replica.model_name, result.ttft_seconds)
        e2e = None if result.e2e_seconds is None else result.e2e_seconds + delay
        return replace(result, ttft_seconds=ttft, e2e_seconds=e2e)


def _finished_at(out: RequestOutput) -> float:
    t = out.timings
    if t is not None and t.finished_time is not None:
        return t.finished_time
    return out.token_time if out.token_time is not None else 0.0
