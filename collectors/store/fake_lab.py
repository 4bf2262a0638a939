"""``FakeLab``: the :class:`~collectors.store.protocols.LabStore` and
:class:`~collectors.store.protocols.LabReader` over plain in-memory lists, for tests of the
sweep and replay writers and of the console's knob lab without a database."""

from __future__ import annotations

import dataclasses
import json
import time

from collectors.store.lab_records import LabPoint, LabRun, LabRunKind, LabRunStatus


class LabRunNotFound(LookupError):
    """A lab run id the store does not hold."""


def _json_copy(value):
    # NOTE: what a JSON column gives back (tuples as lists, keys as strings)
    return json.loads(json.dumps(value))


class FakeLab:
    def __init__(self) -> None:
        self._runs: dict[int, LabRun] = {}
        self._points: dict[int, list[LabPoint]] = {}

    def create_lab_run(self, run: LabRun) -> int:
        run_id = len(self._runs) + 1
        self._runs[run_id] = dataclasses.replace(
            run,
            id=run_id,
            knobs=_json_copy(dict(run.knobs)),
            workload=_json_copy(dict(run.workload)),
            knob_values=tuple(_json_copy(list(run.knob_values))),
            rates=tuple(float(r) for r in run.rates),
        )
        self._points[run_id] = []
        return run_id

    def add_lab_point(self, point: LabPoint) -> None:
        if point.run_id not in self._runs:
            raise LabRunNotFound(f"lab run {point.run_id} does not exist")
        self._points[point.run_id].append(
            dataclasses.replace(
                point,
                summary=_json_copy(dict(point.summary)),
                samples={k: [float(x) for x in v] for k, v in point.samples.items()},
            )
        )

    def finish_lab_run(self, run_id: int, status: LabRunStatus, error: str | None = None) -> None:
        if run_id not in self._runs:
            raise LabRunNotFound(f"lab run {run_id} does not exist")
        self._runs[run_id] = dataclasses.replace(
            self._runs[run_id], status=status, error=error, finished_at=time.time()
        )

    def lab_runs(self, kind: LabRunKind | None = None, limit: int = 100) -> list[LabRun]:
        runs = [r for r in self._runs.values() if kind is None or r.kind == kind]
        return sorted(runs, key=lambda r: (-r.created_at, -(r.id or 0)))[:limit]

    def lab_run(self, run_id: int) -> LabRun | None:
        return self._runs.get(run_id)

    def lab_points(self, run_id: int) -> list[LabPoint]:
        return list(self._points.get(run_id, []))
