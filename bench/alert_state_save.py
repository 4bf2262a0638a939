"""What saving one evaluation costs the SQL alert state: ``SQLAlertState.save_evaluation`` on
SQLite with 0, 16 and 64 firing alerts whose values change at every evaluation (so every open
incident is rewritten, the most a cycle writes), plus a rule failure per cycle. CPU seconds
(``time.process_time``; SQLite runs in-process), median of ``REPEATS`` cycles after the first
(which opens the incidents).
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from alerts import Alert, AlertState, EvaluationError, Transition
from alerts.sql import alert_state_of
from bench._report import print_table
from collectors.store import Store, sqlite_url

FIRING_COUNTS = (0, 16, 64)
REPEATS = 40
START = 1_800_000_000.0
INTERVAL = 15.0


def cycle_cpu_seconds(firing: int, folder: Path) -> float:
    store = Store(sqlite_url(folder / f"save-{firing}.db"))
    try:
        state = alert_state_of(store)
        alerts = [
            Alert.pending({"alertname": "KVSaturation", "target": f"r{i}"}, START).fire(START, value=0.0)
            for i in range(firing)
        ]  # fmt: skip
        opened = [Transition(START, a.fingerprint, AlertState.PENDING, a.state, a) for a in alerts]
        state.save_evaluation(alerts, opened, (), START)
        costs = []
        for k in range(1, REPEATS + 1):
            at = START + k * INTERVAL
            alerts = [replace(a, value=float(k)) for a in alerts]
            error = EvaluationError("tail-latency-ttft", at, "LayoutChangeError", "changed")
            started = time.process_time()
            state.save_evaluation(alerts, [], [error], at)
            costs.append(time.process_time() - started)
        return statistics.median(costs)
    finally:
        store.close()


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for firing in FIRING_COUNTS:
            cpu = cycle_cpu_seconds(firing, Path(folder))
            rows.append((firing, f"{cpu * 1000:.2f} ms", f"{cpu / INTERVAL:.3%}"))
    print_table(("firing alerts", "CPU per save", "share of one core at 15 s"), rows)


if __name__ == "__main__":
    main()
