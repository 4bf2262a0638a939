"""The collector's side of the virtual fleet: scrapes and spans through the real code paths.

At a virtual scrape time each replica's ``/metrics`` exposition (OpenMetrics, as a
collector asks for it) is rendered by its ``EngineMetrics`` and goes through exactly what a
scrape goes through in ``collectors.scrape.Scraper.scrape``: ``parse_exposition``
(prometheus_client's parser), ``collectors.dialects.normalise`` and
``ScrapeRecord.from_normalised``, then the store's ``write_scrapes``. A finished request
becomes the span the engine's tracer would export (``engine.tracing.start_attributes`` and
``finished_span``), and the span a request record by the receiver's own
``collectors.request_records.request_records``; both are written as the trace writer
writes them (``write_spans`` then ``write_requests``), at the next scrape time, as spans
reach a real collector in batches.

:class:`VirtualStore` is where the run's data lives: the in-memory readers (the default:
``FakeMetricsReader``, ``FakeRequestReader``, ``MemoryAlertState`` and ``MemoryChanges``,
which the contract tests hold to the SQL store's answers) or a real ``Store`` at a URL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from alerts import AlertStateStore, MemoryAlertState
from alerts.sql import alert_state_of
from collectors import canonical as c
from collectors import gpu
from collectors.dialects import normalise
from collectors.request_records import SpanEvent, SpanRecord, request_records
from collectors.scrape import parse_exposition
from collectors.store.fake import FakeMetricsReader, FakeRequestReader
from collectors.store.fake_changes import MemoryChanges
from collectors.store.records import ScrapeRecord
from engine.sim.offline import VIRTUAL_EPOCH
from engine.tracing import TRACER_NAME, finished_span, start_attributes
from loadgen.virtual.gateway import VirtualGateway
from loadgen.virtual.replica import OPERATION, Finished, VirtualReplica, stable_hex

#: The resource's ``service.name`` (``engine.tracing.TracingConfig``'s default).
SERVICE_NAME = "tailwatch-engine"
_SPAN_KIND_SERVER, _STATUS_UNSET, _STATUS_ERROR = 2, 0, 2


@dataclass
class VirtualStore:
    """The readers and writers a virtual run uses: ``metrics`` (a ``MetricsReader`` with
    ``write_scrapes``), ``requests`` (a ``RequestReader`` with ``write_spans`` and
    ``write_requests``), ``alert_state`` and ``changes`` (a ``ChangeStore`` and
    ``ChangeReader``: what the change detector found); ``closer`` ends a database's
    connections."""

    metrics: Any
    requests: Any
    alert_state: AlertStateStore
    closer: Any = None
    changes: Any = field(default_factory=MemoryChanges)

    @classmethod
    def memory(cls) -> VirtualStore:
        return cls(FakeMetricsReader(), FakeRequestReader(), MemoryAlertState())

    @classmethod
    def at(cls, url: str) -> VirtualStore:
        """A SQL store at ``url`` (created and migrated as ``tailwatch collect`` does)."""
        from collectors.store import Store

        store = Store(url)
        return cls(store, store, alert_state_of(store), store.close, store)

    def close(self) -> None:
        if self.closer is not None:
            self.closer()


def scrape_record(replica: VirtualReplica, at_seconds: float) -> ScrapeRecord:
    """One scrape of ``replica`` at virtual time ``at_seconds``, as the collector makes it."""
    body, content_type = replica.exposition()
    normalised = normalise(parse_exposition(body, content_type), target=replica.target)
    return ScrapeRecord.from_normalised(
        replica.target, VIRTUAL_EPOCH + at_seconds, normalised, duration_seconds=0.0
    )


def gateway_record(gateway: VirtualGateway, at_seconds: float) -> ScrapeRecord:
    """One scrape of the gateway's ``/metrics`` (its clients' first tokens) at ``at_seconds``,
    through the collector's parsing and dialects as any target's."""
    body, content_type = gateway.exposition()
    normalised = normalise(parse_exposition(body, content_type), target=gateway.target)
    return ScrapeRecord.from_normalised(
        gateway.target, VIRTUAL_EPOCH + at_seconds, normalised, duration_seconds=0.0
    )


def request_span(done: Finished, replica: VirtualReplica) -> SpanRecord:
    """The span the engine's tracer exports for a finished request, as the receiver
    decodes it (ids fixed by the run's seed and the request)."""
    handle, out = done.handle, done.output
    assert out.timings is not None
    ended = finished_span(replica.model_name, out, out.timings)
    attributes = {
        **start_attributes(
            replica.model_name,
            OPERATION,
            handle.params,
            handle.request_id,
            handle.tenant,
            handle.priority,
        ),
        **ended.attributes,
    }
    if ended.error_type is not None:
        attributes["error.type"] = ended.error_type
    start = VIRTUAL_EPOCH + handle.arrival_seconds
    return SpanRecord(
        trace_id=handle.trace_id,
        span_id=stable_hex(f"{handle.trace_id}/span", 8),
        parent_span_id=None,
        name=f"{OPERATION} {replica.model_name}",
        kind=_SPAN_KIND_SERVER,
        start=start,
        end=max(start, ended.end_seconds),
        attributes=attributes,
        events=tuple(SpanEvent(name, max(start, at), attrs) for name, attrs, at in ended.events),
        status_code=_STATUS_UNSET if ended.error_type is None else _STATUS_ERROR,
        status_message=ended.status_message,
        resource={"service.name": SERVICE_NAME, "service.instance.id": replica.instance_id},
        scope=TRACER_NAME,
    )


#: The pseudo-target the virtual GPUs' readings belong to, as ``collectors.gpu`` names a
#: host's (``nvml:<hostname>``): NVML's readings are a host's, not an engine's.
GPU_TARGET = f"{gpu.TARGET_PREFIX}virtual"


def gpu_record(
    replicas: Sequence[VirtualReplica], busy_since: dict[int, tuple[float, float]], at: float
) -> ScrapeRecord:
    """What NVML would read on the replicas' GPUs at virtual ``at``: each one's utilisation,
    the share of the time since the last reading (``busy_since``: index -> (time, busy
    seconds) then, updated here) that it spent in steps, at most 1 (a step that runs past
    ``at`` counts whole when it began). NOTE: one device per replica, whatever its tensor
    parallelism: its devices step together."""
    samples = []
    for replica in replicas:
        then, busy_then = busy_since.get(replica.index, (0.0, 0.0))
        busy = replica.busy_seconds
        if busy < busy_then:  # a restart: a fresh engine counts from 0
            busy_then = 0.0
        busy_since[replica.index] = (at, busy)
        share = min(1.0, (busy - busy_then) / (at - then)) if at > then else 0.0
        labels = {
            c.LABEL_TARGET: GPU_TARGET,
            c.LABEL_GPU: str(replica.index),
            c.LABEL_UUID: f"GPU-virtual-{replica.index}",
            c.LABEL_GPU_NAME: replica.model_name,
        }
        samples.append(
            c.CanonicalSample(
                c.GPU_UTILIZATION,
                c.labels_key(labels),
                share,
                c.GPU_FAMILIES[c.GPU_UTILIZATION],
                source="virtual busy time",
            )
        )
    return ScrapeRecord(
        GPU_TARGET, VIRTUAL_EPOCH + at, tuple(samples), dialect=gpu.DIALECT, duration_seconds=0.0
    )


class VirtualCollector:
    """Scrapes ``replicas`` into ``store`` and receives their spans."""

    def __init__(
        self,
        store: VirtualStore,
        replicas: Sequence[VirtualReplica],
        gateway: VirtualGateway | None = None,
    ) -> None:
        self.store = store
        self.replicas = list(replicas)
        self.gateway = gateway
        self._spans: list[SpanRecord] = []
        self._busy_since: dict[int, tuple[float, float]] = {}
        self.num_scrapes = 0

    def receive(self, finished: Sequence[Finished]) -> None:
        """Queue the spans of finished requests (written at the next :meth:`scrape`)."""
        self._spans.extend(
            request_span(done, self.replicas[done.handle.replica])
            for done in finished
            if done.output.timings is not None
        )

    def replace_replica(self, replica: VirtualReplica) -> None:
        """Scrape ``replica`` from now on in place of the one at its index (a restart).
        NOTE: spans are built when received, so those of the old engine's requests that
        were received before this keep its instance id."""
        self.replicas[replica.index] = replica

    def scrape(self, at_seconds: float) -> None:
        """Scrape every replica at virtual ``at_seconds`` and write what was received."""
        records = [scrape_record(replica, at_seconds) for replica in self.replicas]
        self.num_scrapes += len(records)
        records.append(gpu_record(self.replicas, self._busy_since, at_seconds))
        if self.gateway is not None:
            records.append(gateway_record(self.gateway, at_seconds))
        self.store.metrics.write_scrapes(records)
        self.flush()

    def flush(self) -> None:
        """Write the queued spans and their request records now."""
        if not self._spans:
            return
        spans, self._spans = self._spans, []
        self.store.requests.write_spans(spans)
        self.store.requests.write_requests(request_records(spans))
