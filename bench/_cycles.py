"""Evaluation cycles of the built-in rules, measured in a process of their own, as
``tailwatch alerts run`` is one (its imports, not the benchmark's). The benchmark's process also
holds torch, Streamlit and the loaded histories; the garbage collector walks all of that on
every full collection, which added a third to a cycle's CPU at 500 replicas and is not what
the evaluator costs. Prints one JSON object: the first cycle's wall time (cold) and the median
of ``REPEATS`` more, ``TICK`` seconds apart, of wall, CPU, the server's CPU and queries.

``python -m bench._cycles SOURCE NOW SERVER_PID [CONCURRENCY]``: ``SOURCE`` a server's URL
(``http…``) or a store's SQLAlchemy URL; ``SERVER_PID`` ``-`` for none.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

REPEATS = 5
TICK = 15.0


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of process ``pid`` (and its waited-for children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def cycles(reader, now: float, server_pid: int | None, count_queries) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """The first cycle of a fresh evaluator (cold) and the median of ``REPEATS`` more."""
    from alerts import Evaluator, MemoryAlertState
    from alerts.rules import builtin_rule_set
    from bench._slos import SLOS

    rules, _ = builtin_rule_set(SLOS)
    evaluator = Evaluator(rules, reader, MemoryAlertState(), clock=lambda: now)
    runs = []
    for i in range(REPEATS + 1):
        at = now - TICK * (REPEATS - i)
        queries, server = count_queries(), cpu_seconds(server_pid) if server_pid else 0.0
        wall, cpu = time.perf_counter(), time.process_time()
        result = evaluator.evaluate_once(at)
        runs.append(
            {
                "wall": time.perf_counter() - wall,
                "cpu": time.process_time() - cpu,
                "server": (cpu_seconds(server_pid) - server) if server_pid else 0.0,
                "queries": count_queries() - queries,
                "errors": len(result.errors),
                "alerts": len(result.alerts),
            }
        )
    warm = runs[1:]
    return {
        "cold_wall": runs[0]["wall"],
        **{k: statistics.median(r[k] for r in warm) for k in runs[0]},
        "rules": len(rules),
        "concurrency": evaluator.read_concurrency,
    }


def measure(source: str, now: float, server_pid: int | None) -> dict[str, float]:
    """:func:`main` in a child process; its JSON."""
    import subprocess

    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-m", "bench._cycles", source, repr(now), str(server_pid or "-")],
        capture_output=True, text=True, check=False, cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"bench._cycles failed: {done.stderr[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    # NOTE: what `tailwatch alerts run`'s process holds besides the CLI (112,000 objects for
    # the garbage collector to walk, as there; bench does not import tailwatch)
    import rich.console  # noqa: F401
    import typer  # noqa: F401

    import alerts.triage  # noqa: F401
    import collectors.prometheus
    import collectors.store  # noqa: F401

    source, now = argv[0], float(argv[1])
    pid = None if argv[2] == "-" else int(argv[2])
    if source.startswith("http"):
        from collectors.prometheus import PrometheusReader

        with PrometheusReader(source) as reader:
            out = cycles(reader, now, pid, lambda: reader.api.num_requests)
    else:
        from collectors.store import Store

        store = Store(source)
        try:
            out = cycles(store, now, pid, lambda: 0)
        finally:
            store.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
