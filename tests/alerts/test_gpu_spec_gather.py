"""The busy-idle-gpu and spec-not-paying measurements as gather reads them from a store
(SQLite, through the MetricsReader protocol): the batch and the acceptance per replica and
for the fleet, and NVML's utilisation for the fleet only (a host's pseudo-target)."""

from __future__ import annotations

import pytest

from alerts.triage import TimeWindow, gather, rows_by_key, triage
from alerts.triage.evidence import EvidenceKey
from collectors import canonical as c
from collectors.canonical import CanonicalSample, Kind
from collectors.store import ScrapeRecord, Store, sqlite_url

BASELINE = TimeWindow(0.0, 60.0)
INCIDENT = TimeWindow(60.0, 120.0)
K = EvidenceKey


def _labels(target: str, **extra: str) -> tuple[tuple[str, str], ...]:
    return c.labels_key({"model": "m", "target": target, **extra})


def _engine(target: str, t: float, running: float, drafts: float, accepted: float):
    lab = _labels(target)
    samples = (
        CanonicalSample(c.REQUESTS_TOTAL, lab, t, Kind.COUNTER),
        CanonicalSample(c.REQUESTS_RUNNING, lab, running, Kind.GAUGE),
        CanonicalSample(c.SPEC_DECODE_DRAFT_TOKENS_TOTAL, lab, drafts, Kind.COUNTER),
        CanonicalSample(c.SPEC_DECODE_ACCEPTED_TOKENS_TOTAL, lab, accepted, Kind.COUNTER),
    )
    return ScrapeRecord(target, t, samples)


def _gpu(t: float, busy: float) -> ScrapeRecord:
    labels = c.labels_key({"target": "nvml:host", "gpu": "0", "uuid": "GPU-0", "gpu_name": "x"})
    sample = CanonicalSample(c.GPU_UTILIZATION, labels, busy, Kind.GAUGE)
    return ScrapeRecord("nvml:host", t, (sample,), dialect="nvml")


@pytest.fixture
def store(tmp_path):
    s = Store(sqlite_url(tmp_path / "tw.db"))
    yield s
    s.close()


def test_the_batch_acceptance_and_utilisation_are_read_per_window(store) -> None:
    """Two replicas each run 4 sequences, then 6; each drafts 100 tokens per 10 s and has
    70 accepted, then 10; the GPU reads 0.9 busy, then 1.0."""
    records = []
    drafts = {"a": 0.0, "b": 0.0}
    accepted = {"a": 0.0, "b": 0.0}
    for t in range(0, 130, 10):
        late = t > 60
        for target in ("a", "b"):
            if t > 0:
                drafts[target] += 100.0
                accepted[target] += 10.0 if late else 70.0
            running = 6.0 if late else 4.0
            records.append(_engine(target, float(t), running, drafts[target], accepted[target]))
        records.append(_gpu(float(t), 1.0 if late else 0.9))
    store.write_scrapes(records)
    data = gather(store, None, INCIDENT, BASELINE)
    inc, base = data.fleet.incident, data.fleet.baseline
    assert (base.running_mean.value, inc.running_mean.value) == (8.0, 12.0)  # summed
    assert (base.spec_draft_tokens.value, inc.spec_draft_tokens.value) == (1200.0, 1200.0)
    assert (base.spec_accepted_tokens.value, inc.spec_accepted_tokens.value) == (840.0, 120.0)
    assert base.gpu_utilization_mean.value == pytest.approx(0.9)
    assert inc.gpu_utilization_mean.value == pytest.approx(1.0)
    replica = data.replicas["a"].incident
    assert replica.running_mean.value == 6.0
    assert not replica.gpu_utilization_mean.is_known  # NVML's readings are the host's
    rows = rows_by_key(triage(data).evidence)
    assert rows[K.SPEC_ACCEPTANCE].change == pytest.approx(0.1 - 0.7)
    assert rows[K.RUNNING_MEAN].change == pytest.approx(1.5)
