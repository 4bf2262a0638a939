"""``FakeLab``: the :class:`~collectors.store.protocols.LabStore` and
:class:`~collectors.store.protocols.LabReader` over plain in-memory lists, for tests of the
sweep and replay writers and of the console's knob lab without a database. It checks and
copies what it is given as the SQL store does (:mod:`collectors.store.lab_codec`), so both
refuse the same input and give back the same values."""

from __future__ import annotations

import dataclasses
import time

from collectors.store.lab_codec import check_end, check_limit, check_point, check_run
from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunNotFound, LabRunStatus

__all__ = ["FakeLab", "LabRunNotFound"]


class FakeLab:
    def __init__(self) -> None:
        self._runs: dict[int, LabRun] = {}
        self._points: dict[int, list[LabPoint]] = {}

    def create_lab_run(self, run: LabRun) -> int:
        run_id = len(self._runs) + 1
        self._runs[run_id] = dataclasses.replace(check_run(run), id=run_id)
        self._points[run_id] = []
        return run_id

    def add_lab_point(self, point: LabPoint) -> None:
        point = check_point(point)
        if point.run_id not in self._runs:
            raise LabRunNotFound(f"lab run {point.run_id} does not exist")
        self._points[point.run_id].append(point)

    def finish_lab_run(self, run_id: int, status: LabRunStatus, error: str | None = None) -> None:
        status = check_end(status, error)
        if run_id not in self._runs:
            raise LabRunNotFound(f"lab run {run_id} does not exist")
        self._runs[run_id] = dataclasses.replace(
            self._runs[run_id], status=status, error=error, finished_at=time.time()
        )

    def lab_runs(self, kind: LabRunKind | None = None, limit: int = 100) -> list[LabRun]:
        check_limit(limit)
        kind = None if kind is None else LabRunKind(kind)
        runs = [r for r in self._runs.values() if kind is None or r.kind == kind]
        return sorted(runs, key=lambda r: (-r.created_at, -(r.id or 0)))[:limit]

    def lab_run(self, run_id: int) -> LabRun | None:
        return self._runs.get(run_id)

    def lab_points(self, run_id: int) -> list[LabPoint]:
        return list(self._points.get(run_id, []))
