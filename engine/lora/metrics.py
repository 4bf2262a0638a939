"""The LoRA series of ``/metrics``: vLLM's ``vllm:lora_requests_info`` and ours per adapter.

``EngineMetrics`` makes one ``LoRAMetrics`` when LoRA is on (vLLM registers its LoRA gauge
only then) and hands it every step's outputs; it reads the adapters' state from
``LLMEngine.lora.stats()`` after each step.

``vllm:lora_requests_info`` is vLLM's (``vllm/v1/metrics/loggers.py``): labels
``max_lora``, ``waiting_lora_adapters`` and ``running_lora_adapters`` (names comma-joined),
value the time of the update. NOTE: vLLM leaves every label set it ever set in the
exposition, each with its last time, so a reader takes the newest; here the previous set
is removed when the state changes, so there is one series, the newest, and a reader
written for vLLM's exposition reads the same thing from it.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.utils import INF

from engine import metric_names as mn
from engine.safe_text import MAX_LABEL_VALUE_CHARS, safe_text

if TYPE_CHECKING:
    from engine.llm_engine import LLMEngine
    from engine.outputs import RequestOutput


class LoRAMetrics:
    def __init__(
        self, registry: CollectorRegistry, labels: tuple[str, ...], lock: threading.Lock
    ) -> None:
        self.labels = labels
        self._lock = lock  # NOTE: the render lock of EngineMetrics: a scrape sees whole updates
        self._families: dict[str, Any] = {}
        for spec in mn.LORA_SPECS:
            if spec.kind == "counter":
                family: Any = Counter(spec.name, spec.documentation, spec.labels, registry=registry)
            elif spec.kind == "gauge":
                family = Gauge(spec.name, spec.documentation, spec.labels, registry=registry)
            else:
                assert spec.buckets is not None
                buckets = (*mn.BUCKETS[spec.buckets], INF)
                family = Histogram(
                    spec.name, spec.documentation, spec.labels, registry=registry, buckets=buckets
                )
            self._families[spec.name] = family
        self._info = Gauge(
            mn.LORA_REQUESTS_INFO_NAME,
            mn.LORA_REQUESTS_INFO_HELP,
            mn.LORA_REQUESTS_INFO_LABELS,
            registry=registry,
        )
        self._info_labels: tuple[str, str, str] | None = None
        self._names: dict[str, str] = {}  # adapter name → its (safe, capped) label value
        self._loads_seen: dict[str, tuple[int, float]] = {}

    def _family(self, spec: mn.MetricSpec) -> Any:
        return self._families[spec.name]

    def _label(self, lora_name: str | None) -> str:
        if lora_name is None:
            return mn.NO_ADAPTER
        label = self._names.get(lora_name)
        if label is None:
            label = safe_text(lora_name, MAX_LABEL_VALUE_CHARS)
            if len(self._names) >= mn.MAX_ADAPTERS:
                label = mn.OTHER_ADAPTER
            self._names[lora_name] = label
        return label

    def on_step(
        self, engine: LLMEngine, outputs: Sequence[RequestOutput], handles: Mapping[str, Any]
    ) -> None:
        """Count the step's outputs per adapter, then read the adapters' state."""
        for out in outputs:
            handle = handles.get(out.request_id)
            if handle is not None and handle.is_warm_up:
                continue
            self._observe(out)
        if engine.lora is not None:
            self._observe_state(engine)

    def _observe(self, out: RequestOutput) -> None:
        labels = (*self.labels, self._label(out.lora_name))
        num_new = len(out.new_token_ids)
        if num_new and out.token_time is not None and out.num_output_tokens == num_new:
            ttft = out.token_time - out.arrival_time
            self._family(mn.LORA_TIME_TO_FIRST_TOKEN).labels(*labels).observe(ttft)
        if not out.finished:
            return
        reason = out.finish_reason or "error"
        self._family(mn.LORA_REQUESTS).labels(*labels, reason).inc()
        timings = out.timings
        if reason != "abort" and timings is not None and timings.finished_time is not None:
            e2e = timings.finished_time - timings.arrival_time
            self._family(mn.LORA_E2E_REQUEST_LATENCY).labels(*labels).observe(e2e)

    def _observe_state(self, engine: LLMEngine) -> None:
        assert engine.lora is not None
        stats = engine.lora.stats()
        self._family(mn.LORA_RESIDENT_ADAPTERS).labels(*self.labels).set(len(stats.loaded))
        for name, loads in stats.loads.items():
            seen_loads, seen_seconds = self._loads_seen.get(name, (0, 0.0))
            if loads.num_loads == seen_loads:
                continue
            labels = (*self.labels, self._label(name))
            self._family(mn.LORA_LOADS).labels(*labels).inc(loads.num_loads - seen_loads)
            self._family(mn.LORA_LOAD_SECONDS).labels(*labels).inc(
                max(0.0, loads.load_seconds - seen_seconds)
            )
            self._loads_seen[name] = (loads.num_loads, loads.load_seconds)
        new = (
            str(stats.max_loras),
            ",".join(self._label(n) for n in stats.waiting),
            ",".join(self._label(n) for n in stats.running),
        )
        with self._lock:
            if new != self._info_labels:
                if self._info_labels is not None:
                    self._info.remove(*self._info_labels)
                self._info_labels = new
            self._info.labels(*new).set(engine.wall_clock())
