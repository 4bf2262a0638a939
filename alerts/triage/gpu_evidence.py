"""Evidence rows about how the GPUs spend their steps: the token gap (a step's time), the
batch each step carries, NVML's utilisation, and speculative decoding's acceptance rate.

A busy-but-idle GPU (``Cause.BUSY_IDLE_GPU``) shows as steps that got slower while the batch
did not grow, utilisation reading high; speculation that stopped paying
(``Cause.SPEC_NOT_PAYING``) as an acceptance rate that fell while the token gaps grew.
Fleet-wide rows: a replica of its own is the skew rows' business.
"""

from __future__ import annotations

from alerts.triage.data import TriageInput
from alerts.triage.evidence_rows import (
    ChangeKind,
    EvidenceKey,
    EvidenceRow,
    make_row,
    ratio,
    spec_acceptance,
)


def gpu_rows(data: TriageInput) -> list[EvidenceRow]:
    """The fleet's ITL mean, batch, GPU utilisation and draft acceptance rate."""
    inc, base = data.fleet.incident, data.fleet.baseline
    R, D = ChangeKind.RATIO, ChangeKind.DIFFERENCE
    return [
        make_row(EvidenceKey.ITL_MEAN, "ITL mean", inc.itl_mean_seconds, base.itl_mean_seconds, R),
        make_row(EvidenceKey.E2E_MEAN, "e2e mean", inc.e2e_mean_seconds, base.e2e_mean_seconds, R),
        make_row(
            EvidenceKey.RUNNING_MEAN,
            "requests running (the batch), mean",
            inc.running_mean,
            base.running_mean,
            R,
        ),
        # NOTE: a batch that grows with the load makes steps slower in proportion at most
        # (less while decode is memory-bound); steps that slow more than their batch grew
        # are doing the same work slower: this row's change is the one to read
        make_row(
            EvidenceKey.ITL_PER_RUNNING,
            "ITL mean / requests running",
            ratio(inc.itl_mean_seconds, inc.running_mean),
            ratio(base.itl_mean_seconds, base.running_mean),
            R,
        ),
        make_row(
            EvidenceKey.GPU_UTILIZATION,
            "GPU utilisation, mean",
            inc.gpu_utilization_mean,
            base.gpu_utilization_mean,
            D,
        ),
        make_row(
            EvidenceKey.SPEC_ACCEPTANCE,
            "draft acceptance rate",
            spec_acceptance(inc),
            spec_acceptance(base),
            D,
        ),
    ]
