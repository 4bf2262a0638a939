"""Print one NVML reading of every GPU through ``collectors.gpu``, as the collector stores it.

    .venv/bin/python scripts/gpu_check.py          # exit 0: a reading; 1: no GPU telemetry

Each line is ``family{labels} value``; readings a GPU does not support are listed after.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from collectors.gpu import GpuTelemetry


def main() -> int:
    logging.basicConfig(level=logging.INFO, format="%(levelname)s: %(name)s: %(message)s")
    telemetry = GpuTelemetry("auto")
    if not telemetry.start():
        print(f"no GPU telemetry: {telemetry.reason}")
        return 1
    try:
        for device in telemetry.devices:
            print(f"gpu {device.index}: {device.name} {device.uuid}")
        print(f"driver {telemetry.driver_version or '?'}; target {telemetry.target}")
        record = telemetry.read()
        assert record is not None
        if not record.is_up:
            print(f"reading failed: {record.error}")
            return 1
        for sample in record.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sample.labels if k != "target")
            print(f"{sample.family}{{{labels}}} {sample.value:g}")
        print(f"{len(record.samples)} readings in {record.duration_seconds * 1000:.1f} ms")
    finally:
        telemetry.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
