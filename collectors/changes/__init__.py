"""What changed: the detector that finds change events through the metrics reader (info
labels, live knobs, the target set, restarts, the traffic mix) and writes them to the
store's ``change_events`` (``collectors.store.change_records``)."""

from collectors.changes.detector import (
    KNOB_CHANGES_FAMILY,
    LABEL_KNOB,
    ChangeDetector,
    DetectorOptions,
)
from collectors.changes.mix import MixOptions, MixTracker
from collectors.store.change_records import (
    FLEET_TARGET,
    ChangeEvent,
    ChangeKind,
    MixDimension,
    TargetChange,
    describe_change,
)

__all__ = [
    "FLEET_TARGET",
    "KNOB_CHANGES_FAMILY",
    "LABEL_KNOB",
    "ChangeDetector",
    "ChangeEvent",
    "ChangeKind",
    "DetectorOptions",
    "MixDimension",
    "MixOptions",
    "MixTracker",
    "TargetChange",
    "describe_change",
]
